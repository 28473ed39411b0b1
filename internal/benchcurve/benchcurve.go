// Package benchcurve records how a benchmark's cost grows with its size:
// each curve is printed as a table (size, time, requests, peak heap,
// requests per item, items per second) and written as a CSV file, from
// which internal/tools/benchchart draws one chart per curve.
//
// The CSV files go to the folder named by BENCH_OUT (make bench sets it to
// bench/out at the repository root, which git ignores), else to
// bench/out under the first parent folder of the working directory that
// holds a go.work file, else to the system's temporary folder.
// BENCH_MAX_SIZE, when set, leaves out the sizes above it (a quick run).
package benchcurve

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"
)

// Point is one measurement of a curve.
type Point struct {
	// Series names what was measured at this size: the code under test
	// ("groundskeeper") or a reference ("rclone", "batch driver").
	Series string
	// Size is the number of items.
	Size int
	// Seconds is the time the work took.
	Seconds float64
	// Items is the number of items the work handled (Size when zero); the
	// rates are per item.
	Items int
	// Requests is the number of requests the work sent.
	Requests int64
	// PeakHeap is the highest live heap seen during the work, less the
	// heap before it (see Heap).
	PeakHeap uint64
	// AllocBytes is the bytes allocated during the work.
	AllocBytes uint64
}

func (p Point) items() int {
	if p.Items > 0 {
		return p.Items
	}
	return p.Size
}

// Curve is a named set of points, with notes printed under its table (the
// physical limit, the targets).
type Curve struct {
	Name string // file name: lower case, dashes
	Item string // what an item is: "object", "claim", "task"
	// Size says what the size counts, for the charts' axis; default "<Item>s".
	Size   string
	mu     sync.Mutex
	points []Point
	notes  []string
}

// Add records p and logs it.
func (c *Curve) Add(tb testing.TB, p Point) {
	tb.Helper()
	c.mu.Lock()
	c.points = append(c.points, p)
	c.mu.Unlock()
	tb.Logf("%s %s size %d: %.3f s, %d requests, peak heap %.1f MiB", c.Name, p.Series, p.Size, p.Seconds, p.Requests, float64(p.PeakHeap)/(1<<20))
}

// Note adds a line printed under the table.
func (c *Curve) Note(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

// Points returns the points recorded so far.
func (c *Curve) Points() []Point {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Point(nil), c.points...)
}

// Find returns the point of series at size.
func (c *Curve) Find(series string, size int) (Point, bool) {
	for _, p := range c.Points() {
		if p.Series == series && p.Size == size {
			return p, true
		}
	}
	return Point{}, false
}

// Write prints the table to standard output and writes the CSV file.
func (c *Curve) Write(tb testing.TB) {
	tb.Helper()
	points := c.Points()
	var b strings.Builder
	fmt.Fprintf(&b, "\ncurve %s (per %s)\n", c.Name, c.Item)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "series\tsize\tseconds\t%ss/s\trequests\trequests/%s\tpeak heap MiB\talloc/%s KiB\t\n", c.Item, c.Item, c.Item)
	for _, p := range points {
		n := float64(p.items())
		fmt.Fprintf(w, "%s\t%d\t%.3f\t%.1f\t%d\t%.4f\t%.1f\t%.1f\t\n", p.Series, p.Size, p.Seconds, n/p.Seconds,
			p.Requests, float64(p.Requests)/n, float64(p.PeakHeap)/(1<<20), float64(p.AllocBytes)/n/1024)
	}
	w.Flush()
	c.mu.Lock()
	for _, n := range c.notes {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	c.mu.Unlock()
	fmt.Print(b.String())

	dir := outDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Errorf("benchcurve: %v", err)
		return
	}
	path := filepath.Join(dir, c.Name+".csv")
	f, err := os.Create(path)
	if err != nil {
		tb.Errorf("benchcurve: %v", err)
		return
	}
	cw := csv.NewWriter(f)
	sizeLabel := c.Size
	if sizeLabel == "" {
		sizeLabel = c.Item + "s"
	}
	_ = cw.Write([]string{"curve", "item", "size_label", "series", "size", "items", "seconds", "items_per_second", "requests", "requests_per_item", "peak_heap_bytes", "alloc_bytes_per_item"})
	for _, p := range points {
		n := float64(p.items())
		_ = cw.Write([]string{c.Name, c.Item, sizeLabel, p.Series, strconv.Itoa(p.Size), strconv.Itoa(p.items()),
			ff(p.Seconds), ff(n / p.Seconds), strconv.FormatInt(p.Requests, 10), ff(float64(p.Requests) / n),
			strconv.FormatUint(p.PeakHeap, 10), ff(float64(p.AllocBytes) / n)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		tb.Errorf("benchcurve: write %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		tb.Errorf("benchcurve: write %s: %v", path, err)
	}
	fmt.Printf("  (written to %s)\n", path)
}

func ff(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

func outDir() string {
	if d := os.Getenv("BENCH_OUT"); d != "" {
		return d
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
				return filepath.Join(d, "bench", "out")
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return filepath.Join(os.TempDir(), "groundskeeper-bench")
}

// Sizes returns the sizes not above BENCH_MAX_SIZE (all when it is unset).
func Sizes(sizes ...int) []int {
	limit, err := strconv.Atoi(os.Getenv("BENCH_MAX_SIZE"))
	if err != nil || limit <= 0 {
		return sizes
	}
	var out []int
	for _, s := range sizes {
		if s <= limit {
			out = append(out, s)
		}
	}
	return out
}

// Heap samples the live heap while work runs.
type Heap struct {
	base, peak, alloc0 uint64
	stop               chan struct{}
	done               chan struct{}
}

var heapSamples = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/allocs:bytes"}}

func readHeap() (live, allocs uint64) {
	s := make([]metrics.Sample, len(heapSamples))
	copy(s, heapSamples)
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// StartHeap collects garbage, then samples the heap every 5 ms until Stop.
// The heap's objects include garbage not yet collected, so the peak is an
// upper bound of what the work kept, by up to GOGC percent.
func StartHeap() *Heap {
	runtime.GC()
	h := &Heap{stop: make(chan struct{}), done: make(chan struct{})}
	h.base, h.alloc0 = readHeap()
	h.peak = h.base
	go func() {
		defer close(h.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			live, _ := readHeap()
			h.peak = max(h.peak, live)
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// Stop returns the peak heap above the heap before the work, and the bytes
// allocated during it.
func (h *Heap) Stop() (peak, alloc uint64) {
	close(h.stop)
	<-h.done
	live, allocs := readHeap()
	h.peak = max(h.peak, live)
	return h.peak - h.base, allocs - h.alloc0
}
