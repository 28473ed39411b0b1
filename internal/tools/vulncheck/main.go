// Command vulncheck runs govulncheck (golang.org/x/vuln, at the version this
// module's go.mod pins) over each module it is given, against a Go
// vulnerability database on disk, and fails on every known vulnerability
// that the module's code calls unless the allowlist names it, with the
// reason it stays. An allowlist line that no longer matches a finding fails
// too, so that the list says only what is true.
//
// In a directory named plainly, only what the code calls counts, as
// govulncheck itself counts it ("Your code is affected by ..."): a
// vulnerable function in a required module that no path from our code
// reaches is not a finding. A directory named DIR:package is scanned at
// package level (govulncheck -scan package): every vulnerability in a
// package its code imports is a finding, called or not. That is stricter,
// and takes seconds where the call graph takes minutes: it suits modules
// that ship no library (the examples, the kubectl plugin).
//
// Each module is scanned alone (GOWORK=off), at the versions its own go.mod
// selects: the library at the oldest versions it supports, the examples at
// the newest. Findings in Go's standard library are those of the Go
// toolchain that runs the scan.
//
// Usage, from the repository root:
//
//	go run ./internal/tools/vulncheck -C ../.. -db .cache/vulndb -allow hack/vulncheck.allow . examples:package
//
// With -cache DIR, each scan's result is kept in DIR under a hash of all
// it reads (see resultCache), and a scan of the same inputs is not run
// again; the allowlist is applied to it afresh.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/vuln/scan"
)

func main() {
	root := flag.String("C", ".", "the repository root; the other paths are relative to it")
	db := flag.String("db", ".cache/vulndb", "the vulnerability database, a directory in the layout of vuln.go.dev")
	allow := flag.String("allow", "hack/vulncheck.allow", "the findings allowed to stay, with their reasons")
	cache := flag.String("cache", "", "a directory that keeps each scan's result under a hash of its inputs (empty: none)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "vulncheck: name the module directories to scan")
		os.Exit(2)
	}
	if err := run(context.Background(), *root, *db, *allow, *cache, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(1)
	}
}

// key names one finding: a vulnerability in one module at one version,
// called from the code of one scanned module directory.
type key struct {
	dir, id, module string // module is "stdlib" for Go's standard library
}

type finding struct {
	key
	version, fixed, summary, trace string
}

func run(ctx context.Context, root, db, allowPath, cacheDir string, dirs []string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	dbDir := filepath.Join(root, db)
	about, err := describeDB(dbDir)
	if err != nil {
		return fmt.Errorf("database %s: %w (hack/testenv.sh vulndb builds it)", db, err)
	}
	fmt.Printf("vulncheck: govulncheck %s, database %s: %s\n", vulnVersion(), db, about)

	allowed, err := readAllow(filepath.Join(root, allowPath))
	if err != nil {
		return err
	}
	cache, err := newResultCache(cacheDir, dbDir)
	if err != nil {
		return err
	}
	var problems []string
	matched := map[int]bool{}
	for _, arg := range dirs {
		dir, level, _ := strings.Cut(arg, ":")
		switch level {
		case "":
			level = "symbol"
		case "package":
		default:
			return fmt.Errorf("%s: scan level %q: want DIR (the calls) or DIR:package (the imports)", arg, level)
		}
		key, err := cache.key(filepath.Join(root, dir), level)
		if err != nil {
			return err
		}
		out := cache.get(key)
		if out != nil {
			fmt.Printf("vulncheck: %s: the result of an earlier scan of the same inputs (%s)\n", dir, filepath.Join(cacheDir, key[:16]+"….json"))
		} else {
			var buf bytes.Buffer
			cmd := scan.Command(ctx, "-C", filepath.Join(root, dir), "-db", "file://"+dbDir, "-format", "json", "-scan", level, "./...")
			cmd.Stdout = &buf
			cmd.Env = append(os.Environ(), "GOWORK=off")
			if err := cmd.Start(); err != nil {
				return err
			}
			if err := cmd.Wait(); err != nil {
				return fmt.Errorf("govulncheck in %s: %w", dir, err)
			}
			out = buf.Bytes()
		}
		cfg, found, err := parse(dir, level == "package", out)
		if err != nil {
			return fmt.Errorf("govulncheck in %s: %w", dir, err)
		}
		cache.put(key, out)
		notAllowed := 0
		var allowedIDs []string // "module@version: ID ID ...", grouped
		group := map[string]int{}
		for _, f := range found {
			if line, ok := allowed.match(f.key, f.version); ok {
				matched[line] = true
				mv := f.module + "@" + f.version
				i, ok := group[mv]
				if !ok {
					i = len(allowedIDs)
					group[mv] = i
					allowedIDs = append(allowedIDs, mv+":")
				}
				allowedIDs[i] += " " + f.id
				continue
			}
			notAllowed++
			problems = append(problems, fmt.Sprintf("%s: %s in %s@%s, fixed in %s, is %s: %s (%s)", dir, f.id, f.module, f.version, orNone(f.fixed), verb(level), f.summary, f.trace))
		}
		fmt.Printf("vulncheck: %s (GOWORK=off, %s, -scan %s): %d vulnerabilities %s, %d of them allowed by %s\n", dir, cfg.GoVersion, level, len(found), verb(level), len(found)-notAllowed, allowPath)
		for _, a := range allowedIDs {
			fmt.Printf("vulncheck: %s: allowed %s\n", dir, a)
		}
		if notAllowed > 0 {
			// The whole report, with every trace, as govulncheck prints it.
			text := scan.Command(ctx, "-mode", "convert")
			text.Stdin = bytes.NewReader(out)
			text.Stdout = os.Stderr
			if err := text.Start(); err == nil {
				_ = text.Wait() // exits non-zero when it reports vulnerabilities
			}
		}
	}
	for _, a := range allowed {
		if !matched[a.line] && a.dirMatches(dirs) {
			problems = append(problems, fmt.Sprintf("%s:%d: %s in %s@%s matches no finding in %s: remove the line", allowPath, a.line, a.id, a.module, a.version, a.dir))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problems:\n  %s\nRaise the module to its fixed version, or, when that cannot be done, list the finding in %s with the reason", len(problems), strings.Join(problems, "\n  "), allowPath)
	}
	return nil
}

func orNone(v string) string {
	if v == "" {
		return "no version yet"
	}
	return v
}

// verb says what makes a finding at a scan level.
func verb(level string) string {
	if level == "package" {
		return "imported"
	}
	return "called"
}

// The parts of govulncheck's JSON output (its protocol 1.0.0) that we read.
type message struct {
	Config *struct {
		ProtocolVersion string `json:"protocol_version"`
		GoVersion       string `json:"go_version"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string  `json:"osv"`
		FixedVersion string  `json:"fixed_version"`
		Trace        []frame `json:"trace"`
	} `json:"finding"`
}

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
}

func (f frame) String() string {
	if f.Function == "" {
		return f.Package // a package-level finding's frame
	}
	name := f.Function
	if f.Receiver != "" {
		name = strings.TrimPrefix(f.Receiver, "*") + "." + name
	}
	return f.Package + "." + name
}

// parse reads govulncheck's JSON stream and returns the vulnerabilities the
// code calls: findings whose trace reaches a function (trace[0] is the
// vulnerable symbol, the last frame our code); with imports, of a package-
// level scan, those whose trace names a package. One per vulnerability and
// module, in a stable order.
func parse(dir string, imports bool, out []byte) (cfg struct{ GoVersion string }, found []finding, err error) {
	summaries := map[string]string{}
	byKey := map[key]*finding{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return cfg, nil, err
		}
		switch {
		case m.Config != nil:
			if !strings.HasPrefix(m.Config.ProtocolVersion, "v1.") {
				return cfg, nil, fmt.Errorf("protocol %q, want v1.x", m.Config.ProtocolVersion)
			}
			cfg.GoVersion = m.Config.GoVersion
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0 && (m.Finding.Trace[0].Function != "" || imports && m.Finding.Trace[0].Package != ""):
			t := m.Finding.Trace
			k := key{dir: dir, id: m.Finding.OSV, module: t[0].Module}
			if byKey[k] != nil {
				continue
			}
			trace := t[len(t)-1].String()
			if len(t) > 1 {
				link := " calls "
				if t[0].Function == "" {
					link = " imports "
				}
				trace += link + t[0].String()
			}
			byKey[k] = &finding{key: k, version: t[0].Version, fixed: m.Finding.FixedVersion, trace: trace}
		}
	}
	if cfg.GoVersion == "" {
		return cfg, nil, errors.New("no config message in the output")
	}
	for _, f := range byKey {
		f.summary = summaries[f.id]
		found = append(found, *f)
	}
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.id != b.id {
			return a.id < b.id
		}
		return a.module < b.module
	})
	return cfg, found, nil
}

// An allowed finding: one line of the allowlist,
//
//	DIR  ID  MODULE@VERSION  REASON...
//
// where DIR is the scanned module directory, or * for every one.
type allowed struct {
	line                     int
	dir, id, module, version string
}

type allowlist []allowed

func (l allowlist) match(k key, version string) (line int, ok bool) {
	for _, a := range l {
		if (a.dir == "*" || a.dir == k.dir) && a.id == k.id && a.module == k.module && a.version == version {
			return a.line, true
		}
	}
	return 0, false
}

func (a allowed) dirMatches(dirs []string) bool {
	if a.dir == "*" {
		return true
	}
	for _, d := range dirs {
		if dir, _, _ := strings.Cut(d, ":"); dir == a.dir {
			return true
		}
	}
	return false
}

func readAllow(path string) (allowlist, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var list allowlist
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 {
			return nil, fmt.Errorf("%s:%d: want DIR ID MODULE@VERSION REASON, got %q", path, n, line)
		}
		module, version, ok := strings.Cut(fields[2], "@")
		if !ok || module == "" || version == "" {
			return nil, fmt.Errorf("%s:%d: %q is not MODULE@VERSION", path, n, fields[2])
		}
		list = append(list, allowed{line: n, dir: fields[0], id: fields[1], module: module, version: version})
	}
	return list, s.Err()
}

// describeDB says what the database holds: how many reports, and the
// version of golang.org/x/vulndb it was built from (hack/testenv.sh writes it
// to SOURCE), whose date is the newest a report in it can be. Its reports
// carry no modification times of their own.
func describeDB(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "index", "vulns.json"))
	if err != nil {
		return "", err
	}
	var entries []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		return "", fmt.Errorf("index/vulns.json: %w", err)
	}
	if len(entries) == 0 {
		return "", errors.New("index/vulns.json lists no reports")
	}
	about := fmt.Sprintf("%d reports", len(entries))
	source, err := os.ReadFile(filepath.Join(dir, "SOURCE"))
	if err != nil {
		return about + ", from an unknown source", nil
	}
	src := strings.TrimSpace(string(source))
	about += " from " + src
	if _, v, ok := strings.Cut(src, "@"); ok && module.IsPseudoVersion(v) {
		if t, err := module.PseudoVersionTime(v); err == nil {
			about += fmt.Sprintf(" (reports up to %s)", t.Format(time.DateOnly))
		}
	}
	return about, nil
}

// vulnVersion is the version of golang.org/x/vuln built into this command.
func vulnVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "golang.org/x/vuln" {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}
