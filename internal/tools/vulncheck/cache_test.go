package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCacheKeyFollowsWhatTheScanReads: a key changes with the module's
// code, go.mod, go.sum and the scan level, and not with its tests, its
// testdata or a module nested in it; a stored result is read back.
func TestCacheKeyFollowsWhatTheScanReads(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("a.go", "package m\n")
	write("sub/b.go", "package sub\n")
	c := &resultCache{dir: t.TempDir(), base: "base"}
	key := func(level string) string {
		t.Helper()
		k, err := c.key(dir, level)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key("symbol")
	for _, change := range []struct {
		name, file, content string
		same                bool
	}{
		{"a test", "a_test.go", "package m\n", true},
		{"testdata", "testdata/x.go", "package x\n", true},
		{"a nested module", "nested/go.mod", "module example.com/n\n", true},
		{"a nested module's code", "nested/n.go", "package n\n", true},
		{"a file of a package", "sub/b.go", "package sub // changed\n", false},
		{"a new file", "c.go", "package m\n", false},
		{"go.sum", "go.sum", "example.com/x v1.0.0 h1:abc=\n", false},
		{"go.mod", "go.mod", "module example.com/m\n\ngo 1.24\n", false},
	} {
		write(change.file, change.content)
		k := key("symbol")
		if (k == k0) != change.same {
			t.Errorf("%s: key changed %v, want %v", change.name, k != k0, !change.same)
		}
		k0 = k
	}
	if key("package") == k0 {
		t.Error("the scan level does not change the key")
	}
	if c.get(k0) != nil {
		t.Error("a result is read before any was stored")
	}
	c.put(k0, []byte(`{"config":{}}`))
	if got := string(c.get(k0)); got != `{"config":{}}` {
		t.Errorf("stored result read back as %q", got)
	}
	off := &resultCache{}
	off.put(k0, []byte("x"))
	if off.get(k0) != nil {
		t.Error("a cache without a directory returns a result")
	}
}
