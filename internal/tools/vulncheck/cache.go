package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// A resultCache keeps govulncheck's JSON output per scan, under a key that
// hashes everything the scan reads: govulncheck's version, the Go toolchain
// and build settings, the database's index and source, the scan level, and
// every non-test Go file, go.mod and go.sum of the module (the required
// modules' code is fixed by go.sum). A scan of unchanged inputs is then
// not run again, in this clone or another: govulncheck's call graph of the
// library takes minutes of CPU.
type resultCache struct {
	dir  string // "" when off
	base string // the key's part common to every scan
}

// newResultCache returns the cache in dir ("": none) for scans against the
// database in dbDir.
func newResultCache(dir, dbDir string) (*resultCache, error) {
	if dir == "" {
		return &resultCache{}, nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "govulncheck %s\n", vulnVersion())
	env, err := exec.Command("go", "env", "GOVERSION", "GOOS", "GOARCH", "GOFLAGS", "GOEXPERIMENT", "CGO_ENABLED").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	h.Write(env)
	for _, name := range []string{"SOURCE", "index/db.json", "index/modules.json", "index/vulns.json"} {
		if err := hashFile(h, filepath.Join(dbDir, name), name); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	return &resultCache{dir: dir, base: hex.EncodeToString(h.Sum(nil))}, nil
}

// key returns the cache key of a scan at level of the module in dir.
func (c *resultCache) key(dir, level string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\nlevel %s\n", c.base, level)
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != dir && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			if path != dir {
				// Another module's directory: not in this module's ./...
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return nil
		}
		name := d.Name()
		if name == "go.mod" || name == "go.sum" || (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		if err := hashFile(h, f, rel); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// get returns the output stored under key, or nil.
func (c *resultCache) get(key string) []byte {
	if c.dir == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(c.dir, key+".json"))
	if err != nil {
		return nil
	}
	return data
}

// put stores out under key; a failure to store is not the scan's.
func (c *resultCache) put(key string, out []byte) {
	if c.dir == "" {
		return
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(c.dir, key+".*.tmp")
	if err != nil {
		return
	}
	_, werr := tmp.Write(out)
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return
	}
	if err := os.Rename(tmp.Name(), filepath.Join(c.dir, key+".json")); err != nil {
		os.Remove(tmp.Name())
	}
}

// hashFile writes name, the size and the content of the file at path to h.
func hashFile(h io.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "file %s %d\n", filepath.ToSlash(name), st.Size())
	_, err = io.Copy(h, f)
	return err
}
