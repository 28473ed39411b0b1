// Command apicheck writes and checks the exported API of the library's
// public packages, one declaration a line, as the Go project's api/*.txt
// files do: every exported constant, variable, function, type, struct
// field, interface method and method, with its type.
//
//	apicheck -C DIR [-file F]          compare DIR's API with F (api/groundskeeper.txt)
//	apicheck -C DIR [-file F] -write   rewrite F
//
// A line in the file that the code no longer has is an incompatible
// change (a removal, or a signature that changed); a line the code has
// and the file does not is an addition. Either fails the check until the
// file is rewritten, so that every change of the API is seen in review;
// RELEASING.md says which changes a release may make.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/constant"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

func main() {
	dir := flag.String("C", ".", "the module's root directory")
	file := flag.String("file", "api/groundskeeper.txt", "the API file, relative to the module's root")
	write := flag.Bool("write", false, "rewrite the API file instead of checking it")
	stats := flag.Bool("stats", false, "print the number of exported top-level identifiers of each package")
	flag.Parse()
	File := *file
	lines, err := api(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(2)
	}
	path := filepath.Join(*dir, File)
	if *stats {
		for _, c := range count(lines) {
			fmt.Println(c)
		}
		return
	}
	if *write {
		var buf bytes.Buffer
		for _, l := range lines {
			buf.WriteString(l + "\n")
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "apicheck:", err)
			os.Exit(2)
		}
		fmt.Printf("apicheck: %s: %d lines\n", File, len(lines))
		return
	}
	recorded, err := read(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(2)
	}
	removed, added := diff(recorded, lines)
	for _, l := range removed {
		fmt.Printf("INCOMPATIBLE (removed or changed): %s\n", l)
	}
	for _, l := range added {
		fmt.Printf("added: %s\n", l)
	}
	if len(removed)+len(added) > 0 {
		fmt.Printf("apicheck: the exported API differs from %s (%d incompatible, %d added): review it, then run make api to record it\n", File, len(removed), len(added))
		os.Exit(1)
	}
}

// count returns, for each package, its number of exported top-level
// identifiers (constants, variables, functions and types; not fields or
// methods), as "<count> <package>".
func count(lines []string) []string {
	n := map[string]int{}
	var pkgs []string
	for _, l := range lines {
		pkg, decl, _ := strings.Cut(strings.TrimPrefix(l, "pkg "), ", ")
		if _, ok := n[pkg]; !ok {
			pkgs = append(pkgs, pkg)
		}
		kind, rest, _ := strings.Cut(decl, " ")
		if kind == "method" || kind == "type" && strings.Contains(rest, ", ") {
			n[pkg] += 0
			continue
		}
		n[pkg]++
	}
	var out []string
	for _, p := range pkgs {
		out = append(out, fmt.Sprintf("%4d %s", n[p], p))
	}
	return out
}

// read returns the lines of the API file.
func read(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		if l := s.Text(); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, s.Err()
}

// diff returns the lines of a not in b, and of b not in a; both sorted.
func diff(a, b []string) (onlyA, onlyB []string) {
	inA, inB := map[string]bool{}, map[string]bool{}
	for _, l := range a {
		inA[l] = true
	}
	for _, l := range b {
		inB[l] = true
		if !inA[l] {
			onlyB = append(onlyB, l)
		}
	}
	for _, l := range a {
		if !inB[l] {
			onlyA = append(onlyA, l)
		}
	}
	slices.Sort(onlyA)
	slices.Sort(onlyB)
	return onlyA, onlyB
}

// api loads the module's public packages (none under internal/) and
// returns their exported API, sorted.
func api(dir string) ([]string, error) {
	cfg := &packages.Config{Dir: dir, Mode: packages.NeedName | packages.NeedTypes, Env: append(os.Environ(), "GOWORK=off")}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		if isInternal(p.PkgPath) || p.Name == "main" {
			continue
		}
		lines = append(lines, declarations(p.Types)...)
	}
	slices.Sort(lines)
	return slices.Compact(lines), nil
}

func isInternal(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// declarations are the lines of one package.
func declarations(pkg *types.Package) []string {
	q := func(other *types.Package) string {
		if other == pkg {
			return ""
		}
		return qualifier(other)
	}
	var out []string
	emit := func(format string, args ...any) {
		out = append(out, "pkg "+pkg.Path()+", "+fmt.Sprintf(format, args...))
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			emit("const %s %s = %s", name, typeString(o.Type(), q), constValue(o.Val()))
		case *types.Var:
			emit("var %s %s", name, typeString(o.Type(), q))
		case *types.Func:
			sig := o.Type().(*types.Signature)
			emit("func %s%s%s", name, typeParams(sig.TypeParams(), q), signature(sig, q))
		case *types.TypeName:
			typeLines(o, q, emit)
		}
	}
	return out
}

// qualifier names another package by its name, or, for a versioned API
// package of Kubernetes (k8s.io/api/core/v1), by its last two elements
// ("core/v1"), which a name alone leaves ambiguous.
func qualifier(p *types.Package) string {
	path := strings.Split(p.Path(), "/")
	if n := len(path); n >= 2 && p.Name() == path[n-1] && len(p.Name()) > 1 && p.Name()[0] == 'v' && strings.Trim(p.Name()[1:], "0123456789alphabet") == "" {
		return path[n-2] + "/" + p.Name()
	}
	return p.Name()
}

// typeString is types.TypeString of t without the names of the
// parameters and results of the function types in it.
func typeString(t types.Type, q types.Qualifier) string {
	return types.TypeString(unnamed(t), q)
}

// unnamed returns t with the parameters and results of its function types
// unnamed, as far as the type literals go (not inside type arguments).
func unnamed(t types.Type) types.Type {
	switch t := t.(type) {
	case *types.Signature:
		strip := func(tu *types.Tuple) *types.Tuple {
			var vs []*types.Var
			for i := range tu.Len() {
				vs = append(vs, types.NewParam(0, nil, "", unnamed(tu.At(i).Type())))
			}
			return types.NewTuple(vs...)
		}
		return types.NewSignatureType(nil, nil, nil, strip(t.Params()), strip(t.Results()), t.Variadic())
	case *types.Pointer:
		return types.NewPointer(unnamed(t.Elem()))
	case *types.Slice:
		return types.NewSlice(unnamed(t.Elem()))
	case *types.Array:
		return types.NewArray(unnamed(t.Elem()), t.Len())
	case *types.Map:
		return types.NewMap(unnamed(t.Key()), unnamed(t.Elem()))
	case *types.Chan:
		return types.NewChan(t.Dir(), unnamed(t.Elem()))
	}
	return t
}

// signature is a function's parameters and results without their names,
// which a caller cannot see: renaming one is no change of the API.
func signature(sig *types.Signature, q types.Qualifier) string {
	list := func(t *types.Tuple, variadic bool) []string {
		var out []string
		for i := range t.Len() {
			typ := t.At(i).Type()
			if variadic && i == t.Len()-1 {
				out = append(out, "..."+typeString(typ.(*types.Slice).Elem(), q))
				continue
			}
			out = append(out, typeString(typ, q))
		}
		return out
	}
	s := "(" + strings.Join(list(sig.Params(), sig.Variadic()), ", ") + ")"
	switch res := list(sig.Results(), false); len(res) {
	case 0:
	case 1:
		s += " " + res[0]
	default:
		s += " (" + strings.Join(res, ", ") + ")"
	}
	return s
}

func constValue(v constant.Value) string {
	s := v.ExactString()
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func typeParams(tps *types.TypeParamList, q types.Qualifier) string {
	if tps == nil || tps.Len() == 0 {
		return ""
	}
	var parts []string
	for i := range tps.Len() {
		tp := tps.At(i)
		parts = append(parts, tp.Obj().Name()+" "+typeString(tp.Constraint(), q))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// typeLines emits a type: its kind and parameters, each exported field of
// a struct and method of an interface on a line, and its exported
// methods.
func typeLines(o *types.TypeName, q types.Qualifier, emit func(string, ...any)) {
	name := o.Name()
	if o.IsAlias() {
		emit("type %s = %s", name, typeString(o.Type(), q))
		return
	}
	named, ok := o.Type().(*types.Named)
	if !ok {
		emit("type %s %s", name, typeString(o.Type(), q))
		return
	}
	decl := name + typeParams(named.TypeParams(), q)
	switch u := named.Underlying().(type) {
	case *types.Struct:
		emit("type %s struct", decl)
		for i := range u.NumFields() {
			f := u.Field(i)
			switch {
			case f.Embedded():
				emit("type %s struct, embedded %s", decl, typeString(f.Type(), q))
			case f.Exported():
				emit("type %s struct, %s %s", decl, f.Name(), typeString(f.Type(), q))
			}
		}
	case *types.Interface:
		emit("type %s interface", decl)
		for i := range u.NumEmbeddeds() {
			emit("type %s interface, embedded %s", decl, typeString(u.EmbeddedType(i), q))
		}
		for i := range u.NumExplicitMethods() {
			m := u.ExplicitMethod(i)
			if m.Exported() {
				emit("type %s interface, %s%s", decl, m.Name(), signature(m.Type().(*types.Signature), q))
			}
		}
	default:
		emit("type %s %s", decl, typeString(u, q))
	}
	for i := range named.NumMethods() {
		m := named.Method(i)
		if !m.Exported() {
			continue
		}
		sig := m.Type().(*types.Signature)
		recv := name
		if rtp := sig.RecvTypeParams(); rtp != nil && rtp.Len() > 0 {
			var ps []string
			for j := range rtp.Len() {
				ps = append(ps, rtp.At(j).Obj().Name())
			}
			recv += "[" + strings.Join(ps, ", ") + "]"
		}
		if _, ptr := sig.Recv().Type().(*types.Pointer); ptr {
			recv = "*" + recv
		}
		emit("method (%s) %s%s", recv, m.Name(), signature(sig, q))
	}
}
