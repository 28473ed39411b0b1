package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// module writes a module of one package with source src into a new
// directory and returns it.
func module(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{
		"go.mod":               "module example.com/m\n\ngo 1.25\n",
		"p/p.go":               "package p\n\n" + src,
		"internal/q/q.go":      "package q\n\nfunc Hidden() {}\n",
		"cmd/tool/main.go":     "package main\n\nfunc Exported() {}\n\nfunc main() {}\n",
		"p/p_internal_test.go": "package p\n\nfunc TestOnly() {}\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestAPIListsEveryExportedDeclarationWithoutParameterNames(t *testing.T) {
	dir := module(t, `import "context"

const Max = 3

var Default Options

type Options struct {
	Retries int
	hidden  bool
	Hook    func(ctx context.Context, n int) error
}

type Getter[T any] interface {
	Get(ctx context.Context, name string) (T, error)
}

type Mode string

func (o *Options) Apply(values ...string) {}

func (o Options) valid() bool { return true }

func Do[T any](ctx context.Context, g Getter[T]) (T, error) { var z T; return z, nil }

func unexported() {}
`)
	got, err := api(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pkg example.com/m/p, const Max untyped int = 3",
		"pkg example.com/m/p, func Do[T any](context.Context, Getter[T]) (T, error)",
		"pkg example.com/m/p, method (*Options) Apply(...string)",
		"pkg example.com/m/p, type Getter[T any] interface",
		"pkg example.com/m/p, type Getter[T any] interface, Get(context.Context, string) (T, error)",
		"pkg example.com/m/p, type Mode string",
		"pkg example.com/m/p, type Options struct",
		"pkg example.com/m/p, type Options struct, Hook func(context.Context, int) error",
		"pkg example.com/m/p, type Options struct, Retries int",
		"pkg example.com/m/p, var Default Options",
	}
	if !slices.Equal(got, want) {
		t.Errorf("api:\n%q\nwant:\n%q", got, want)
	}
}

func TestDiffNamesRemovalsAndAdditions(t *testing.T) {
	recorded := []string{"pkg p, func A()", "pkg p, func B(int)", "pkg p, type T struct"}
	now := []string{"pkg p, func A()", "pkg p, func B(int, string)", "pkg p, func C()", "pkg p, type T struct"}
	removed, added := diff(recorded, now)
	if !slices.Equal(removed, []string{"pkg p, func B(int)"}) {
		t.Errorf("removed %q; want the old signature of B", removed)
	}
	if !slices.Equal(added, []string{"pkg p, func B(int, string)", "pkg p, func C()"}) {
		t.Errorf("added %q; want B's new signature and C", added)
	}
}
