package crt_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// raceFlag is "-race" when the test runs with the race detector, so that
// go list -export finds in the build cache what the test's own build put
// there.
var raceFlag []string

// exportedError is an exported sentinel (a package-level variable of a type
// that implements error) or error type of one of the module's packages.
type exportedError struct {
	pkgPath, pkgName, name string
	// typ is the spelling an errorType line takes ("*PolicyError" or
	// "KeyError"); empty for a sentinel.
	typ string
}

func (e exportedError) key() string { return e.pkgPath + "." + e.name }

// line is the line of classes that classifies e as class.
func (e exportedError) line(class string) string {
	if e.typ == "" {
		return fmt.Sprintf("sentinel(%s.%s, %s),", e.pkgName, e.name, class)
	}
	star := strings.TrimSuffix(e.typ, e.name)
	return fmt.Sprintf("errorType[%s%s.%s](%s),", star, e.pkgName, e.name, class)
}

// Every exported sentinel and error type of every public package of the
// module is classified in crt's classes, terminal or not: a list kept by
// hand drifts (it missed retention.ErrInvalidSpan, backupstore's
// ErrExpiryUnsupported and ErrTooManyRules, locking.ErrTxnDone).
func TestEveryErrorIsClassified(t *testing.T) {
	exported := exportedErrors(t)
	if len(exported) < 40 {
		t.Fatalf("found only %d exported errors in the module: the enumeration is broken", len(exported))
	}
	classified, imports := classifiedErrors(t, "terminal.go")
	for _, e := range exported {
		switch n := classified[e.key()]; {
		case n == 0:
			msg := fmt.Sprintf("%s.%s (%s) is not classified: add to classes in crt/terminal.go, beside its package's lines, either\n\t%s\nor\n\t%s",
				e.pkgName, e.name, e.pkgPath, e.line("doNotRetry"), e.line("mayRetry"))
			if e.typ == "" {
				msg += fmt.Sprintf("\n(a doNotRetry sentinel is also named in Terminal's documentation, in the bullet \"  - %s:\")", e.pkgName)
			}
			if !imports[e.pkgPath] {
				msg += fmt.Sprintf("\nand import %q there", e.pkgPath)
			}
			t.Error(msg)
		case n > 1:
			t.Errorf("%s.%s is classified %d times in crt/terminal.go: keep one line", e.pkgName, e.name, n)
		}
	}
}

// Terminal's documentation names exactly the sentinels classified
// doNotRetry, each in its package's bullet.
func TestTerminalDocListsTheTerminalSentinels(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "terminal.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "Terminal" {
			doc = fn.Doc.Text()
		}
	}
	// The bullets: "  - pkg: Err..., Err... (why);" and their continuation
	// lines.
	bullets := map[string]string{}
	var cur string
	for _, l := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(l, "  - "):
			pkg, rest, _ := strings.Cut(strings.TrimPrefix(l, "  - "), ":")
			cur = pkg
			bullets[cur] += rest
		case strings.HasPrefix(l, "    ") && cur != "":
			bullets[cur] += " " + l
		default:
			cur = ""
		}
	}
	named := map[string]bool{}
	for pkg, text := range bullets {
		for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) }) {
			if strings.HasPrefix(w, "Err") {
				named[pkg+"."+w] = true
			}
		}
	}
	for _, e := range sentinelClasses(t, f) {
		switch {
		case e.class == "doNotRetry" && !named[e.name]:
			pkg, name, _ := strings.Cut(e.name, ".")
			t.Errorf("%s is classified doNotRetry but Terminal's documentation does not name it: add %s to the bullet \"  - %s:\" there", e.name, name, pkg)
		case e.class != "doNotRetry" && named[e.name]:
			t.Errorf("%s is classified %s but Terminal's documentation names it among the terminal errors", e.name, e.class)
		}
	}
}

type sentinelClass struct{ name, class string }

// sentinelClasses returns the sentinel lines of classes in f:
// "lifecycle.ErrInvalidPolicy" and its class.
func sentinelClasses(t *testing.T, f *ast.File) []sentinelClass {
	t.Helper()
	var out []sentinelClass
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 2 {
			return true
		}
		if fn, ok := call.Fun.(*ast.Ident); !ok || fn.Name != "sentinel" {
			return true
		}
		sel, ok1 := call.Args[0].(*ast.SelectorExpr)
		class, ok2 := call.Args[1].(*ast.Ident)
		if !ok1 || !ok2 {
			t.Fatal("a sentinel line of classes is not sentinel(pkg.ErrX, doNotRetry or mayRetry)")
		}
		out = append(out, sentinelClass{sel.X.(*ast.Ident).Name + "." + sel.Sel.Name, class.Name})
		return true
	})
	if len(out) == 0 {
		t.Fatal("no sentinel lines in classes")
	}
	return out
}

// exportedErrors lists the exported sentinels and error types of the
// module's public packages (not internal, not examples, not commands), from
// their type information.
func exportedErrors(t *testing.T) []exportedError {
	t.Helper()
	// The module of this package: go list -m would list every module of the
	// go.work workspace.
	module := strings.TrimSpace(goCmd(t, "list", "-f", "{{.Module.Path}}", "."))
	var public []string
	names := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(goCmd(t, "list", "-f", "{{.ImportPath}}\t{{.Name}}", module+"/...")), "\n") {
		p, name, _ := strings.Cut(l, "\t")
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		if name == "main" || rel == "examples" || strings.HasPrefix(rel, "examples/") ||
			slices.Contains(strings.Split(rel, "/"), "internal") {
			continue
		}
		public = append(public, p)
		names[p] = name
	}
	args := append([]string{"list"}, raceFlag...)
	args = append(args, "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}")
	exports := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(goCmd(t, append(args, public...)...)), "\n") {
		p, file, _ := strings.Cut(l, "\t")
		exports[p] = file
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) {
		file := exports[p]
		if file == "" {
			return nil, fmt.Errorf("no export data for %q", p)
		}
		return os.Open(file)
	})
	errType := types.Universe.Lookup("error").Type().Underlying().(*types.Interface)
	var out []exportedError
	for _, p := range public {
		pkg, err := imp.Import(p)
		if err != nil {
			t.Fatalf("import %s: %v", p, err)
		}
		scope := pkg.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !obj.Exported() {
				continue
			}
			e := exportedError{pkgPath: p, pkgName: names[p], name: name}
			switch obj := obj.(type) {
			case *types.Var:
				if types.Implements(obj.Type(), errType) {
					out = append(out, e)
				}
			case *types.TypeName:
				if obj.IsAlias() || types.IsInterface(obj.Type()) {
					continue
				}
				switch {
				case types.Implements(obj.Type(), errType):
					e.typ = name
				case types.Implements(types.NewPointer(obj.Type()), errType):
					e.typ = "*" + name
				default:
					continue
				}
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// classifiedErrors reads the declaration of classes in file and returns how
// often each package-qualified name appears in it, and the packages the
// file imports.
func classifiedErrors(t *testing.T, file string) (map[string]int, map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{} // import name -> path
	imports := map[string]bool{}
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		imports[p] = true
		name := path.Base(p) // the module's package names are their directories'
		if spec.Name != nil {
			name = spec.Name.Name
		}
		byName[name] = p
	}
	var decl ast.Node
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, s := range g.Specs {
				if vs := s.(*ast.ValueSpec); len(vs.Names) == 1 && vs.Names[0].Name == "classes" {
					decl = vs
				}
			}
		}
	}
	if decl == nil {
		t.Fatalf("%s declares no var classes", file)
	}
	count := map[string]int{}
	ast.Inspect(decl, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && byName[id.Name] != "" {
				count[byName[id.Name]+"."+sel.Sel.Name]++
			}
		}
		return true
	})
	return count, imports
}

func goCmd(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}
