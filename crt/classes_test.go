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

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/crt"
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

// unimported are the public packages crt must not import, and why. Their
// sentinels are classified in crt/terminal.go through the internal package
// they re-export them from; their error types in unimportedTypes.
var unimported = map[string]string{
	"backupstore": "an operator that uses crt without backupstore would link every cloud SDK",
}

// unimportedTypes classifies the error types of the packages crt does not
// import: Terminal cannot name them, and judges each by what it wraps. A
// type classified doNotRetry here must therefore be terminal through the
// sentinel it wraps, and one classified mayRetry must not be terminal by
// itself: TestUnimportedTypesAreJudgedAsClassified checks both.
var unimportedTypes = []struct {
	err      error
	terminal bool // doNotRetry
}{
	{&backupstore.PrefixError{}, true}, // it is ErrUnsafePrefix
	{&backupstore.SecretError{}, false},
	{&backupstore.Retention{}, false},
	{&backupstore.RetainedError{}, false},
	{&backupstore.RetainedObject{}, false}, // an error by its embedded Retention
	{backupstore.KeyError{}, false},
	{&backupstore.DeleteError{}, false},
	{&backupstore.CopyError{}, false},
}

// Every exported sentinel and error type of every public package of the
// module is classified in crt's classes, terminal or not: a list kept by
// hand drifts (it missed retention.ErrInvalidSpan, backupstore's
// ErrExpiryUnsupported and ErrTooManyRules, locking.ErrTxnDone). A
// sentinel re-exported from an internal package (var ErrX = pkg.ErrX) is
// classified by the line of the value it re-exports; an error type of a
// package crt does not import by its line in unimportedTypes.
func TestEveryErrorIsClassified(t *testing.T) {
	public := publicPackages(t)
	exported := exportedErrors(t, public)
	if len(exported) < 40 {
		t.Fatalf("found only %d exported errors in the module: the enumeration is broken", len(exported))
	}
	classified, imports := classifiedErrors(t, "terminal.go", "classes")
	testClassified, _ := classifiedErrors(t, "classes_test.go", "unimportedTypes")
	origin := reexports(t, public)
	for _, e := range exported {
		n := classified[e.key()]
		if e.typ == "" {
			n += classified[origin[e.key()]]
		} else {
			n += testClassified[e.key()]
		}
		switch {
		case n == 0:
			t.Error(unclassified(e, origin[e.key()], imports))
		case n > 1:
			t.Errorf("%s.%s is classified %d times in crt/terminal.go and unimportedTypes: keep one line", e.pkgName, e.name, n)
		}
	}
}

// unclassified says how to classify e, which no line classifies; origin is
// the sentinel e re-exports, if it does.
func unclassified(e exportedError, origin string, imports map[string]bool) string {
	if why, ok := unimported[e.pkgName]; ok {
		if e.typ != "" {
			lit := e.pkgName + "." + e.name + "{}"
			if strings.HasPrefix(e.typ, "*") {
				lit = "&" + lit
			}
			return fmt.Sprintf("%s.%s (%s) is not classified: crt does not import %s (%s), so add to unimportedTypes in crt/classes_test.go, beside its package's lines, either\n\t{%s, true}, // doNotRetry: only if it wraps a doNotRetry sentinel\nor\n\t{%s, false},",
				e.pkgName, e.name, e.pkgPath, e.pkgName, why, lit, lit)
		}
		if origin == "" {
			return fmt.Sprintf("%s.%s (%s) is not classified: crt does not import %s (%s), so declare the sentinel in the internal package %s re-exports its sentinels from (internal/storeerr), make it %s.%s = storeerr.%s, and add sentinel(storeerr.%s, doNotRetry or mayRetry) to classes in crt/terminal.go",
				e.pkgName, e.name, e.pkgPath, e.pkgName, why, e.pkgName, e.pkgName, e.name, e.name, e.name)
		}
		pkg, name, _ := strings.Cut(path.Base(origin), ".")
		return fmt.Sprintf("%s.%s (%s, the value of %s) is not classified: add to classes in crt/terminal.go, beside its package's lines, either\n\tsentinel(%s.%s, doNotRetry),\nor\n\tsentinel(%s.%s, mayRetry),\n(a doNotRetry sentinel is also named in Terminal's documentation, in the bullet \"  - %s:\")",
			e.pkgName, e.name, e.pkgPath, origin, pkg, name, pkg, name, e.pkgName)
	}
	msg := fmt.Sprintf("%s.%s (%s) is not classified: add to classes in crt/terminal.go, beside its package's lines, either\n\t%s\nor\n\t%s",
		e.pkgName, e.name, e.pkgPath, e.line("doNotRetry"), e.line("mayRetry"))
	if e.typ == "" {
		msg += fmt.Sprintf("\n(a doNotRetry sentinel is also named in Terminal's documentation, in the bullet \"  - %s:\")", e.pkgName)
	}
	if !imports[e.pkgPath] {
		msg += fmt.Sprintf("\nand import %q there", e.pkgPath)
	}
	return msg
}

// Terminal cannot name the error types of the packages crt does not
// import; it must judge each as unimportedTypes classifies it, by what the
// type wraps.
func TestUnimportedTypesAreJudgedAsClassified(t *testing.T) {
	for _, c := range unimportedTypes {
		if got := crt.IsTerminal(c.err); got != c.terminal {
			t.Errorf("IsTerminal(%T{}) = %t, but unimportedTypes classifies it terminal: %t", c.err, got, c.terminal)
		}
	}
}

// crt must not import the packages of unimported, directly or through
// another package.
func TestCrtDoesNotImportTheUnimported(t *testing.T) {
	module := modulePath(t)
	for _, dep := range strings.Fields(goCmd(t, "list", "-deps", module+"/crt")) {
		if why, ok := unimported[strings.TrimPrefix(dep, module+"/")]; ok {
			t.Errorf("crt imports %s (%s): go list -deps names it; see unimported in crt/classes_test.go for how its errors are classified without it", dep, why)
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
	// A line of classes names the value a public package re-exports
	// (storeerr.ErrX); the documentation names the public one
	// (backupstore's ErrX).
	publicName := map[string]string{}
	public := publicPackages(t)
	names := map[string]string{}
	for _, p := range public {
		names[p.path] = p.name
	}
	for pub, orig := range reexports(t, public) {
		pubPkg, name := splitKey(pub)
		origPkg, _ := splitKey(orig)
		publicName[path.Base(origPkg)+"."+name] = names[pubPkg] + "." + name
	}
	for _, e := range sentinelClasses(t, f) {
		if p, ok := publicName[e.name]; ok {
			e.name = p
		}
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

// publicPackage is a public package of the module: not internal, not an
// example, not a command.
type publicPackage struct {
	path, name, dir string
	files           []string // its Go files, tests not included
}

func publicPackages(t *testing.T) []publicPackage {
	t.Helper()
	module := modulePath(t)
	var public []publicPackage
	for _, l := range strings.Split(strings.TrimSpace(goCmd(t, "list", "-f", "{{.ImportPath}}\t{{.Name}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", module+"/...")), "\n") {
		f := strings.Split(l, "\t")
		p, name := f[0], f[1]
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		// testenv is test infrastructure and opstask/taskctl the command
		// line's side of tasks: their errors end a test or a command, never
		// a reconcile.
		if name == "main" || rel == "examples" || strings.HasPrefix(rel, "examples/") ||
			rel == "testenv" || strings.HasPrefix(rel, "testenv/") || rel == "opstask/taskctl" ||
			slices.Contains(strings.Split(rel, "/"), "internal") {
			continue
		}
		public = append(public, publicPackage{path: p, name: name, dir: f[2], files: strings.Fields(f[3])})
	}
	return public
}

// splitKey splits "path/to/pkg.ErrX" into the package path and the name.
func splitKey(key string) (string, string) {
	i := strings.LastIndex(key, ".")
	return key[:i], key[i+1:]
}

// reexports maps each exported variable of the public packages that is
// declared as another package's variable (var ErrX = storeerr.ErrX) to
// that variable: "…/backupstore.ErrX" to "…/internal/storeerr.ErrX".
func reexports(t *testing.T, public []publicPackage) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, p := range public {
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, p.dir+"/"+name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			byName := importNames(t, f)
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.VAR {
					continue
				}
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, id := range vs.Names {
						if i >= len(vs.Values) || !id.IsExported() {
							continue
						}
						sel, ok := vs.Values[i].(*ast.SelectorExpr)
						if !ok {
							continue
						}
						if x, ok := sel.X.(*ast.Ident); ok && byName[x.Name] != "" {
							out[p.path+"."+id.Name] = byName[x.Name] + "." + sel.Sel.Name
						}
					}
				}
			}
		}
	}
	return out
}

// importNames maps the names under which f refers to the packages it
// imports to their paths.
func importNames(t *testing.T, f *ast.File) map[string]string {
	t.Helper()
	byName := map[string]string{}
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		name := path.Base(p) // the module's package names are their directories'
		if spec.Name != nil {
			name = spec.Name.Name
		}
		byName[name] = p
	}
	return byName
}

// exportedErrors lists the exported sentinels and error types of the
// module's public packages, from their type information.
func exportedErrors(t *testing.T, publicPkgs []publicPackage) []exportedError {
	t.Helper()
	var public []string
	names := map[string]string{}
	for _, p := range publicPkgs {
		public = append(public, p.path)
		names[p.path] = p.name
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

// classifiedErrors reads the declaration of the variable name in file and
// returns how often each package-qualified name appears in it, and the
// packages the file imports.
func classifiedErrors(t *testing.T, file, name string) (map[string]int, map[string]bool) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	byName := importNames(t, f)
	imports := map[string]bool{}
	for _, p := range byName {
		imports[p] = true
	}
	var decl ast.Node
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, s := range g.Specs {
				if vs := s.(*ast.ValueSpec); len(vs.Names) == 1 && vs.Names[0].Name == name {
					decl = vs
				}
			}
		}
	}
	if decl == nil {
		t.Fatalf("%s declares no var %s", file, name)
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

// modulePath is the path of crt's module. (go list -m names every module
// of the go.work workspace the tests may run in.)
func modulePath(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(goCmd(t, "list", "-f", "{{.Module.Path}}", "."))
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
