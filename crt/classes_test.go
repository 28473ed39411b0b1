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
)

// raceFlag is "-race" when the test runs with the race detector, so that
// go list -export finds in the build cache what the test's own build put
// there.
var raceFlag []string

// exportedError is an exported sentinel (a package-level variable of a type
// that implements error) or error type of one of the module's packages.
type exportedError struct {
	pkgPath, pkgName, name string
	// typ is the type's spelling ("*PolicyError" or "KeyError"); empty for
	// a sentinel.
	typ string
	// hasClass: a type whose method set has Terminal() bool.
	hasClass bool
}

func (e exportedError) key() string { return e.pkgPath + "." + e.name }

// unimported are the public packages crt must not import, and why.
var unimported = map[string]string{
	"backupstore": "an operator that uses crt without backupstore would link every cloud SDK",
}

// Every exported sentinel and error type of every public package of the
// module declares its retry class where it is declared, which
// crt.Terminal reads: an error type has the method Terminal() bool (read
// from type information), and a sentinel is declared
// errclass.Terminal(…) or errclass.Retryable(…), or as another package's
// sentinel that is (var ErrX = backupstore.ErrX, read from the syntax). A
// list kept by hand drifted (it missed retention.ErrInvalidSpan,
// backupstore's ErrExpiryUnsupported and ErrTooManyRules,
// locking.ErrTxnDone).
func TestEveryErrorIsClassified(t *testing.T) {
	exported := exportedErrors(t, publicPackages(t))
	if len(exported) < 40 {
		t.Fatalf("found only %d exported errors in the module: the enumeration is broken", len(exported))
	}
	decls := sentinelDecls(t)
	for _, e := range exported {
		if e.typ != "" {
			if !e.hasClass {
				t.Errorf("%s.%s (%s) has no method Terminal() bool: add, beside its Error method,\n\t// Terminal reports true: retrying cannot cure the error (crt.Terminal).\n\tfunc (%s) Terminal() bool { return true }\nor one that returns false (retried, or judged by the error it wraps)", e.pkgName, e.name, e.pkgPath, e.typ)
			}
			continue
		}
		key := e.key()
		for seen := 0; ; seen++ {
			d, ok := decls[key]
			switch {
			case !ok || seen > 10:
				t.Errorf("%s.%s (%s): its declaration could not be followed to a class (at %s)", e.pkgName, e.name, e.pkgPath, key)
			case d.class:
			case d.ref != "":
				key = d.ref
				continue
			default:
				t.Errorf("%s.%s (%s) is declared without a retry class: declare it errclass.Terminal(\"…\") (retrying cannot cure it) or errclass.Retryable(\"…\") (internal/errclass)", e.pkgName, e.name, e.pkgPath)
			}
			break
		}
	}
}

// sentinelDecl is how an exported package-level variable of the module is
// declared: with a class (errclass.Terminal or Retryable), as another
// package's variable (ref, "path.ErrX"), or otherwise.
type sentinelDecl struct {
	class bool
	ref   string
}

// sentinelDecls reads the declarations of the exported variables of every
// package of the module, internal ones included.
func sentinelDecls(t *testing.T) map[string]sentinelDecl {
	t.Helper()
	out := map[string]sentinelDecl{}
	fset := token.NewFileSet()
	module := modulePath(t)
	for _, l := range strings.Split(strings.TrimSpace(goCmd(t, "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", module+"/...")), "\n") {
		f := strings.Split(l, "\t")
		pkgPath, dir := f[0], f[1]
		for _, name := range strings.Fields(f[2]) {
			file, err := parser.ParseFile(fset, dir+"/"+name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			byName := importNames(t, file)
			for _, d := range file.Decls {
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
						var d sentinelDecl
						switch v := vs.Values[i].(type) {
						case *ast.CallExpr:
							if sel, ok := v.Fun.(*ast.SelectorExpr); ok {
								if x, ok := sel.X.(*ast.Ident); ok && byName[x.Name] == module+"/internal/errclass" {
									d.class = sel.Sel.Name == "Terminal" || sel.Sel.Name == "Retryable"
								}
							}
						case *ast.SelectorExpr:
							if x, ok := v.X.(*ast.Ident); ok && byName[x.Name] != "" {
								d.ref = byName[x.Name] + "." + v.Sel.Name
							}
						case *ast.Ident:
							d.ref = pkgPath + "." + v.Name
						}
						out[pkgPath+"."+id.Name] = d
					}
				}
			}
		}
	}
	return out
}

// crt, and its domain packages but crt/backups, must not import the
// packages of unimported, directly or through another package: crt reads
// the classes of their errors from the errors.
func TestCrtDoesNotImportTheUnimported(t *testing.T) {
	module := modulePath(t)
	for _, pkg := range []string{"crt", "crt/claims", "crt/locks", "crt/tasks"} {
		for _, dep := range strings.Fields(goCmd(t, "list", "-deps", module+"/"+pkg)) {
			if why, ok := unimported[strings.TrimPrefix(dep, module+"/")]; ok {
				t.Errorf("%s imports %s (%s): go list -deps names it", pkg, dep, why)
			}
		}
	}
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
	// interface{ Terminal() bool }
	classified := types.NewInterfaceType([]*types.Func{types.NewFunc(token.NoPos, nil, "Terminal",
		types.NewSignatureType(nil, nil, nil, nil, types.NewTuple(types.NewVar(token.NoPos, nil, "", types.Typ[types.Bool])), false))}, nil).Complete()
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
				e.hasClass = types.Implements(types.NewPointer(obj.Type()), classified)
				out = append(out, e)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
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
