// Command depsbudget guards what each public package of the library costs a
// user who imports it: the modules its import closure pulls in, and how many
// packages that closure compiles. It compares them with a committed budget
// (hack/deps-budget.txt) and fails when they differ, naming the package and
// the modules that came (with the import path that brings each in) or went.
// -write rewrites the budget from what the packages cost now, for a change
// that is intended.
//
// The closure is what go list -deps reports for the package alone, without
// its tests, in the library module with GOWORK=off (at the versions its
// go.mod requires, as a user's build selects them when it requires nothing
// newer), for linux/amd64 without cgo, the platform operators are built for.
// Public packages are those of the module but internal ones and commands.
// Modules are counted without the library's own; packages with it.
//
// Usage, from the repository root:
//
//	go run ./internal/tools/depsbudget -C ../.. [-budget hack/deps-budget.txt] [-write] [-v]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	root := flag.String("C", ".", "the repository root (the library module)")
	budgetPath := flag.String("budget", "hack/deps-budget.txt", "the budget file, relative to the root")
	write := flag.Bool("write", false, "rewrite the budget from what the packages cost now")
	verbose := flag.Bool("v", false, "print what every package costs")
	flag.Parse()
	if err := run(*root, *budgetPath, *write, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "deps-check:", err)
		os.Exit(1)
	}
}

func run(root, budgetPath string, write, verbose bool) error {
	costs, err := measure(root)
	if err != nil {
		return err
	}
	file := filepath.Join(root, budgetPath)
	if verbose || write {
		printTable(os.Stdout, costs)
	}
	if write {
		var buf bytes.Buffer
		format(&buf, costs)
		if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Printf("wrote %s: %d public packages\n", budgetPath, len(costs))
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("%w (make deps-budget writes it)", err)
	}
	budget, err := parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", budgetPath, err)
	}
	if problems := compare(costs, budget); len(problems) > 0 {
		return fmt.Errorf("what packages cost differs from %s:\n\n%s\n\n"+
			"A package should pull in only what it uses. If the change is intended, run\n"+
			"\tmake deps-budget\n"+
			"and commit %s with it, saying in the message why the package needs it.",
			budgetPath, strings.Join(problems, "\n"), budgetPath)
	}
	fmt.Printf("deps-check: %d public packages cost what %s allows\n", len(costs), budgetPath)
	return nil
}

// cost is what importing one package costs.
type cost struct {
	pkg      string   // relative to the module: "retention", "." for its root
	packages int      // non-standard packages in the closure, the library's included
	modules  []string // modules of the closure but the library's, sorted
	// via[m] is where the closure leaves the library on its way to module
	// m: which package of the library imports which package outside it.
	via map[string]step
}

// step is an import from a package of the library (relative, as cost.pkg)
// to a package outside it.
type step struct{ from, to string }

// listed is what go list -json reports of a package.
type listed struct {
	ImportPath string
	Name       string
	Standard   bool
	Module     *struct{ Path string }
	Imports    []string
	Deps       []string
	Error      *struct{ Err string }
	DepsErrors []*struct{ Err string }
}

// goList runs go list in root as the check needs it: the library alone,
// for linux/amd64 without cgo.
func goList(root string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

func measure(root string) ([]cost, error) {
	out, err := goList(root, "-m")
	if err != nil {
		return nil, err
	}
	module := strings.TrimSpace(string(out))
	out, err = goList(root, "-f", "{{.ImportPath}}\t{{.Name}}", "./...")
	if err != nil {
		return nil, err
	}
	var public []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		p, name, _ := strings.Cut(l, "\t")
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		if name == "main" || slices.Contains(strings.Split(rel, "/"), "internal") {
			continue
		}
		public = append(public, p)
	}
	out, err = goList(root, append([]string{"-e", "-deps", "-json=ImportPath,Name,Standard,Module,Imports,Deps,Error,DepsErrors"}, public...)...)
	if err != nil {
		return nil, err
	}
	pkgs := map[string]*listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list -json: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("package %s: %s", p.ImportPath, p.Error.Err)
		}
		for _, e := range p.DepsErrors {
			return nil, fmt.Errorf("package %s: %s", p.ImportPath, e.Err)
		}
		pkgs[p.ImportPath] = &p
	}
	var costs []cost
	for _, p := range public {
		rel := relative(module, p)
		c := cost{pkg: rel, via: map[string]step{}}
		seen := map[string]bool{}
		for _, d := range append([]string{p}, pkgs[p].Deps...) {
			dp := pkgs[d]
			if dp == nil {
				return nil, fmt.Errorf("package %s: go list did not report its dependency %s", p, d)
			}
			if dp.Standard {
				continue
			}
			c.packages++
			if dp.Module == nil {
				return nil, fmt.Errorf("package %s: its dependency %s is in no module", p, d)
			}
			if m := dp.Module.Path; m != module && !seen[m] {
				seen[m] = true
				c.modules = append(c.modules, m)
			}
		}
		sort.Strings(c.modules)
		for m, chain := range chains(p, pkgs) {
			for i := 1; i < len(chain); i++ {
				if pkgs[chain[i]].Module.Path != module {
					c.via[m] = step{from: relative(module, chain[i-1]), to: chain[i]}
					break
				}
			}
		}
		costs = append(costs, c)
	}
	sort.Slice(costs, func(i, j int) bool { return costs[i].pkg < costs[j].pkg })
	return costs, nil
}

// relative returns the path of a package of module relative to it, "."
// for its root.
func relative(module, pkg string) string {
	if rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/"); rel != "" {
		return rel
	}
	return "."
}

// chains returns, for every module the closure of from reaches, the first
// chain of imports (breadth first, so a shortest one) from from to a
// package of that module.
func chains(from string, pkgs map[string]*listed) map[string][]string {
	parent := map[string]string{from: ""}
	out := map[string][]string{}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		lp := pkgs[p]
		if lp == nil || lp.Standard {
			continue
		}
		if m := lp.Module; m != nil && out[m.Path] == nil {
			var chain []string
			for q := p; q != ""; q = parent[q] {
				chain = append([]string{q}, chain...)
			}
			out[m.Path] = chain
		}
		for _, i := range lp.Imports {
			if _, ok := parent[i]; !ok {
				parent[i] = p
				queue = append(queue, i)
			}
		}
	}
	return out
}

const header = `# What each public package of the library costs a user who imports it: the
# packages its import closure compiles (the library's own included, the
# standard library's not) and the modules that closure pulls in (the
# library's own not counted), from go list -deps without tests, GOWORK=off
# (the versions go.mod requires), linux/amd64 without cgo.
#
# make lint (deps-check) fails when a package costs anything else, more or
# less. When a change is intended, make deps-budget rewrites this file:
# commit it with the change, and say in the message why the package needs
# what it pulls in.
`

// format writes costs as the budget file.
func format(w io.Writer, costs []cost) {
	fmt.Fprint(w, header)
	for _, c := range costs {
		fmt.Fprintf(w, "\n%s: %d packages, %d modules\n", c.pkg, c.packages, len(c.modules))
		for _, m := range c.modules {
			fmt.Fprintf(w, "\t%s\n", m)
		}
	}
}

// parse reads a budget file written by format.
func parse(data []byte) (map[string]cost, error) {
	out := map[string]cost{}
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "\t"):
			if cur == "" {
				return nil, fmt.Errorf("line %d: a module before any package", n)
			}
			c := out[cur]
			c.modules = append(c.modules, strings.TrimSpace(line))
			out[cur] = c
		default:
			pkg, rest, ok := strings.Cut(line, ": ")
			count, _, ok2 := strings.Cut(rest, " packages")
			packages, err := strconv.Atoi(count)
			if !ok || !ok2 || err != nil {
				return nil, fmt.Errorf("line %d: %q: want \"<package>: <n> packages, <m> modules\"", n, line)
			}
			if _, dup := out[pkg]; dup {
				return nil, fmt.Errorf("line %d: package %s appears twice", n, pkg)
			}
			out[pkg] = cost{pkg: pkg, packages: packages}
			cur = pkg
		}
	}
	return out, sc.Err()
}

// compare returns one message per package whose cost differs from its
// budget, and per package that is only in one of them. Modules a package
// gains are grouped by the import that brings them in; a package that
// gains them only through another package of the library, itself over its
// budget, is named in one line.
func compare(costs []cost, budget map[string]cost) []string {
	var problems []string
	current := map[string]bool{}
	grew := map[string]map[string]bool{} // package -> modules it gained
	for _, c := range costs {
		grew[c.pkg] = map[string]bool{}
		for _, m := range c.modules {
			if b, ok := budget[c.pkg]; ok && !slices.Contains(b.modules, m) {
				grew[c.pkg][m] = true
			}
		}
	}
	for _, c := range costs {
		current[c.pkg] = true
		b, ok := budget[c.pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: a public package without a budget: it pulls in %d modules, %d packages", c.pkg, len(c.modules), c.packages))
			continue
		}
		if len(grew[c.pkg]) > 0 {
			problems = append(problems, gained(c, grew))
		}
		var gone []string
		for _, m := range b.modules {
			if !slices.Contains(c.modules, m) {
				gone = append(gone, "\t- "+m)
			}
		}
		if len(gone) > 0 {
			problems = append(problems, fmt.Sprintf("%s no longer pulls in %d modules of its budget (tighten it):\n%s", c.pkg, len(gone), strings.Join(gone, "\n")))
		}
		switch {
		case c.packages > b.packages:
			problems = append(problems, fmt.Sprintf("%s compiles %d packages, %d more than its budget of %d", c.pkg, c.packages, c.packages-b.packages, b.packages))
		case c.packages < b.packages:
			problems = append(problems, fmt.Sprintf("%s compiles %d packages, %d fewer than its budget of %d (tighten it)", c.pkg, c.packages, b.packages-c.packages, b.packages))
		}
	}
	var stale []string
	for p := range budget {
		if !current[p] {
			stale = append(stale, p)
		}
	}
	sort.Strings(stale)
	for _, p := range stale {
		problems = append(problems, fmt.Sprintf("%s: in the budget, but not a public package of the module any more", p))
	}
	return problems
}

// gained describes the modules c gained (grew[c.pkg]), grouped by the
// import that brings them in.
func gained(c cost, grew map[string]map[string]bool) string {
	var mods []string
	for m := range grew[c.pkg] {
		mods = append(mods, m)
	}
	sort.Strings(mods)
	groups := map[step][]string{}
	var order []step
	through := map[string]bool{} // other packages of the library over their budget
	for _, m := range mods {
		s := c.via[m]
		if s.from != c.pkg && grew[s.from][m] {
			through[s.from] = true
			continue
		}
		if groups[s] == nil {
			order = append(order, s)
		}
		groups[s] = append(groups[s], m)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s pulls in %d modules its budget does not allow", c.pkg, len(mods))
	if len(through) > 0 {
		var names []string
		for p := range through {
			names = append(names, p)
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "; through %s, which gains them too", strings.Join(names, ", "))
	}
	if len(order) > 0 {
		b.WriteString(":")
	}
	for _, s := range order {
		fmt.Fprintf(&b, "\n\t%s imports %s, which brings in:", s.from, s.to)
		for _, m := range groups[s] {
			fmt.Fprintf(&b, "\n\t\t+ %s", m)
		}
	}
	return b.String()
}

func printTable(w io.Writer, costs []cost) {
	fmt.Fprintf(w, "%-32s %8s %8s\n", "package", "modules", "packages")
	for _, c := range costs {
		fmt.Fprintf(w, "%-32s %8d %8d\n", c.pkg, len(c.modules), c.packages)
	}
}
