package plugin

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// reasonConstants returns the value of every exported constant named
// Reason* in the package importPath, read from its source, so that a
// reason added to the package is seen here without a change to this test.
func reasonConstants(t *testing.T, importPath string) map[string]string {
	t.Helper()
	// The go command finds the package as the build does (go/build cannot
	// when the test binary is built with -trimpath, as make test builds it:
	// it knows no GOROOT then).
	dir, err := exec.Command("go", "list", "-f", "{{.Dir}}", importPath).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", importPath, err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(dir)), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") || !name.IsExported() || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("%s.%s is not a string literal: explain it here by hand", importPath, name.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					consts[name.Name] = v
				}
			}
		}
	}
	return consts
}

func TestEveryReasonIsExplained(t *testing.T) {
	const lib = "github.com/groundskeeper-io/groundskeeper/"
	for _, tc := range []struct {
		pkg       string
		explained map[string]string
		condType  string
		atLeast   int
	}{
		{"backupstore/collect", collectReasons, "DataDeleted", 11},
		{"backupstore/share", shareReasons, "Admitted", 12},
		{"backupstore/share/pool", poolReasons, "", 7},
		{"backupstore/share/migrate", migrateReasons, "Migrated", 10},
		{"lifecycle", lifecycleReasons, "", 12},
	} {
		consts := reasonConstants(t, lib+tc.pkg)
		if len(consts) < tc.atLeast {
			t.Errorf("%s: found %d reason constants, want at least %d: is the source read?", tc.pkg, len(consts), tc.atLeast)
		}
		for name, reason := range consts {
			t.Run(tc.pkg+"."+name, func(t *testing.T) {
				if tc.explained[reason] == "" {
					t.Fatalf("%s.%s (%q) has no explanation: add one to reasons.go", tc.pkg, name, reason)
				}
				if got := meaning(tc.condType, reason); got == "" {
					t.Errorf("meaning(%q, %q) is empty", tc.condType, reason)
				}
			})
		}
		if len(tc.explained) != len(uniq(consts)) {
			t.Errorf("%s: %d explanations for %d reasons: one explains a reason the package no longer has", tc.pkg, len(tc.explained), len(uniq(consts)))
		}
	}
}

func uniq(m map[string]string) map[string]bool {
	u := map[string]bool{}
	for _, v := range m {
		u[v] = true
	}
	return u
}
