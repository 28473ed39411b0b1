// Command modsize guards what a user of the library downloads: it fails when
// a tracked file is larger than 1 MiB and not on the allowlist, and when the
// module zip that the Go module proxy would serve for the commit checked out
// is larger than its budget.
//
// The zip is built as the proxy builds it, with golang.org/x/mod/zip from
// the repository at HEAD (uncommitted changes are not in it): nested modules
// (internal/tools/*, and every folder with a go.mod of its own), vendor
// folders and files the go command never packs are left out.
//
// Usage, from the repository root:
//
//	go run ./internal/tools/modsize -C ../.. [-budget 2MiB] [-allow hack/large-files.allow]
package main

import (
	stdzip "archive/zip"
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

const fileLimit = 1 << 20

func main() {
	root := flag.String("C", ".", "the repository root")
	budget := flag.String("budget", "2MiB", "the largest module zip allowed")
	allow := flag.String("allow", "hack/large-files.allow", "tracked files allowed over 1 MiB, one path a line, relative to the root")
	flag.Parse()
	if err := run(*root, *budget, *allow); err != nil {
		fmt.Fprintln(os.Stderr, "modsize:", err)
		os.Exit(1)
	}
}

func run(root, budgetFlag, allowPath string) error {
	budget, err := parseSize(budgetFlag)
	if err != nil {
		return fmt.Errorf("-budget %q: %w", budgetFlag, err)
	}
	allowed, err := readAllow(filepath.Join(root, allowPath))
	if err != nil {
		return err
	}
	var problems []string
	big, err := largeTracked(root)
	if err != nil {
		return err
	}
	for _, f := range big {
		if !allowed[f.path] {
			problems = append(problems, fmt.Sprintf("tracked file %s is %s, over 1 MiB and not in %s (a built binary? git rm --cached it and ignore it)", f.path, human(f.size), allowPath))
		}
	}

	modPath, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	mv := module.Version{Path: modPath, Version: "v0.0.0-00010101000000-000000000000"}
	if err := zipHEAD(&buf, mv, root); err != nil {
		return fmt.Errorf("build the module zip of %s at HEAD: %w", modPath, err)
	}
	zr, err := stdzip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		return err
	}
	var unpacked uint64
	for _, f := range zr.File {
		unpacked += f.UncompressedSize64
	}
	n := int64(buf.Len())
	fmt.Printf("module zip of %s at HEAD: %s to download (budget %s), %d files, %s unpacked\n",
		modPath, human(n), human(budget), len(zr.File), human(int64(unpacked)))
	if n > budget {
		problems = append(problems, fmt.Sprintf("the module zip is %s, over its budget of %s: every go get of the library downloads it", human(n), human(budget)))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n  "))
	}
	return nil
}

// zipHEAD writes the module zip of the commit checked out at root.
// golang.org/x/mod/zip recognises a repository only where root/.git is the
// git directory, which a linked work tree (git worktree add) does not
// have: there the commit is zipped from a temporary clone that shares the
// repository's objects.
func zipHEAD(w *bytes.Buffer, mv module.Version, root string) error {
	err := zip.CreateFromVCS(w, mv, root, "HEAD", "")
	if uerr := (*zip.UnrecognizedVCSError)(nil); !errors.As(err, &uerr) {
		return err
	}
	rev, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "modsize-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := git(root, "clone", "--quiet", "--shared", "--no-checkout", ".", tmp); err != nil {
		return err
	}
	w.Reset()
	return zip.CreateFromVCS(w, mv, tmp, rev, "")
}

// git runs git in dir and returns its trimmed output.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

type tracked struct {
	path string
	size int64
}

// largeTracked lists the files git tracks that are larger than fileLimit,
// as they are in the work tree.
func largeTracked(root string) ([]tracked, error) {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var big []tracked
	for _, p := range bytes.Split(out, []byte{0}) {
		if len(p) == 0 {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, string(p)))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			return nil, err
		}
		if fi.Mode().IsRegular() && fi.Size() > fileLimit {
			big = append(big, tracked{string(p), fi.Size()})
		}
	}
	sort.Slice(big, func(i, j int) bool { return big[i].path < big[j].path })
	return big, nil
}

func readAllow(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	allowed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			allowed[line] = true
		}
	}
	return allowed, sc.Err()
}

func modulePath(gomod string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	p := modfile.ModulePath(data)
	if p == "" {
		return "", fmt.Errorf("%s: no module line", gomod)
	}
	return p, nil
}

// parseSize reads 4MiB, 512KiB or a number of bytes.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("not a positive size (4MiB, 512KiB or bytes)")
	}
	return int64(f * float64(mult)), nil
}

func human(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
