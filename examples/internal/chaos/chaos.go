package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"
)

// Environment variables that select and replay a run.
const (
	// SeedEnv replays the schedule of an earlier run: its value is the
	// seed that run printed.
	SeedEnv = "CHAOS_SEED"
	// DurationEnv selects the long run and says how long faults are
	// injected, as a Go duration ("20m").
	DurationEnv = "CHAOS_DURATION"
)

// SeedFromEnv returns the seed in CHAOS_SEED, or def when it is unset.
func SeedFromEnv(def uint64) (uint64, error) {
	s := os.Getenv(SeedEnv)
	if s == "" {
		return def, nil
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want an unsigned integer: %w", SeedEnv, s, err)
	}
	return seed, nil
}

// LongDuration returns the duration in CHAOS_DURATION and true, or false
// when it is unset: the caller then runs its short version.
func LongDuration() (time.Duration, bool, error) {
	s := os.Getenv(DurationEnv)
	if s == "" {
		return 0, false, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false, fmt.Errorf("%s=%q: want a positive duration such as 20m", DurationEnv, s)
	}
	return d, true, nil
}

// Fault is one kind of fault a workload can suffer.
type Fault struct {
	// Kind names the fault in schedules and summaries, e.g.
	// "restart etcd".
	Kind string
	// Weight is how often the kind is drawn relative to the others; 0
	// counts as 1.
	Weight int
	// Targets is how many things the fault can hit (proxies, replicas);
	// the schedule draws Step.Target from [0, Targets). 0 counts as 1.
	Targets int
	// Lasts says whether the fault is held for Step.Hold (a blackhole,
	// latency) rather than being over when Inject returns (a restart).
	Lasts bool
	// Inject injects the fault as step says and returns once it is over:
	// a fault that lasts is lifted by Inject itself after step.Hold. An
	// error means the fault could not be injected or lifted; the run
	// counts it and goes on.
	Inject func(ctx context.Context, step Step) error
}

// Step is one fault of a schedule.
type Step struct {
	// At is when the fault starts, from the start of the run.
	At time.Duration
	// Kind is the Fault's kind.
	Kind string
	// Target is which of the fault's targets it hits.
	Target int
	// Hold is how long a fault that lasts is held.
	Hold time.Duration
	// Param is a number in [0, 1000) for the fault to use as it likes
	// (latency, say), drawn with the rest so that replays agree.
	Param int
}

func (s Step) String() string {
	out := fmt.Sprintf("%7s %s", s.At.Round(100*time.Millisecond), s.Kind)
	if s.Target != 0 {
		out += fmt.Sprintf(" #%d", s.Target)
	}
	if s.Hold > 0 {
		out += fmt.Sprintf(" for %s", s.Hold.Round(100*time.Millisecond))
	}
	return out
}

// ScheduleOptions shape a schedule. The zero value means: 2 to 8 s between
// one fault's end and the next one's start, faults that last held 1 to 6 s.
type ScheduleOptions struct {
	MinGap, MaxGap   time.Duration
	MinHold, MaxHold time.Duration
}

func (o *ScheduleOptions) withDefaults() ScheduleOptions {
	var r ScheduleOptions
	if o != nil {
		r = *o
	}
	if r.MaxGap <= 0 {
		r.MinGap, r.MaxGap = 2*time.Second, 8*time.Second
	}
	if r.MaxHold <= 0 {
		r.MinHold, r.MaxHold = time.Second, 6*time.Second
	}
	return r
}

// NewSchedule draws the faults of a run of the given duration from seed:
// the same seed, faults and options give the same steps. Faults follow one
// another (one at a time); At assumes each restart takes no time, so the
// runner starts a step at At or as soon as the one before is over.
func NewSchedule(seed uint64, duration time.Duration, faults []Fault, o *ScheduleOptions) []Step {
	opts := o.withDefaults()
	rng := rand.New(rand.NewPCG(seed, 0x67726f756e64)) // "ground"
	total := 0
	for _, f := range faults {
		total += max(f.Weight, 1)
	}
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	var steps []Step
	at := between(opts.MinGap, opts.MaxGap)
	for total > 0 && at < duration {
		n := rng.IntN(total)
		var f Fault
		for _, f = range faults {
			if n -= max(f.Weight, 1); n < 0 {
				break
			}
		}
		s := Step{At: at, Kind: f.Kind, Target: rng.IntN(max(f.Targets, 1)), Param: rng.IntN(1000)}
		if f.Lasts {
			s.Hold = between(opts.MinHold, opts.MaxHold)
		}
		steps = append(steps, s)
		at += s.Hold + between(opts.MinGap, opts.MaxGap)
	}
	return steps
}

// Ops counts a workload's operations by kind. It is safe for concurrent
// use; the zero value is ready.
type Ops struct {
	mu sync.Mutex
	n  map[string]int
}

// Add counts one operation of the kind.
func (o *Ops) Add(kind string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[kind]++
}

// Counts returns a copy of the counts.
func (o *Ops) Counts() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]int, len(o.n))
	for k, v := range o.n {
		out[k] = v
	}
	return out
}

// Violation is one breach of an invariant.
type Violation struct {
	// Invariant names the invariant, e.g. "safety", "liveness",
	// "no data lost".
	Invariant string
	// Detail says what was seen, with names, UIDs and times.
	Detail string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// Config is one chaos run.
type Config struct {
	// Name names the workload in the summary.
	Name string
	// Seed draws the schedule; print it to replay the run.
	Seed uint64
	// Duration is how long faults are injected and the workload runs.
	Duration time.Duration
	// Faults are the kinds to draw from; Schedule shapes the draw.
	Faults   []Fault
	Schedule *ScheduleOptions
	// Workload generates load until its context ends, counting what it
	// does in ops. It must return soon after; operations in flight may
	// finish first.
	Workload func(ctx context.Context, ops *Ops) error
	// Settled returns nil once the system has converged after the faults
	// stopped; it is polled every half second for at most SettleTimeout.
	// Not settling in time is a liveness violation.
	Settled       func(ctx context.Context) error
	SettleTimeout time.Duration
	// Check checks the invariants once the system settled (or did not).
	Check func(ctx context.Context) []Violation
	// Replicas, if set, run from the start of the workload until the
	// check is done: the system under test, which must go on through the
	// settling.
	Replicas *Replicas
	// Observed, if set, adds to the result's operations what the workload
	// saw of the system (deletions, listings) once the replicas stopped.
	Observed func(ops map[string]int)
	// Logf, if set, logs the run's progress.
	Logf func(format string, args ...any)
}

// Result is what a run did and found.
type Result struct {
	Name     string
	Seed     uint64
	Duration time.Duration
	Steps    []Step
	// Faults counts the steps injected, FaultErrors the ones that failed,
	// by kind.
	Faults, FaultErrors map[string]int
	Ops                 map[string]int
	// WorkloadErr is what the workload returned.
	WorkloadErr error
	Violations  []Violation
	// Converged is how long the system took to settle after the last
	// fault was lifted; Settled says whether it did within the timeout.
	Converged time.Duration
	Settled   bool
}

// Failed reports whether the run found a violation, a fault could not be
// injected, or the workload failed.
func (r *Result) Failed() bool {
	n := 0
	for _, v := range r.FaultErrors {
		n += v
	}
	return len(r.Violations) > 0 || n > 0 || r.WorkloadErr != nil
}

// Run runs the workload while it injects the schedule drawn from
// cfg.Seed, stops the faults and the workload after cfg.Duration, waits
// for the system to settle and checks the invariants.
func Run(ctx context.Context, cfg Config) *Result {
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	r := &Result{
		Name: cfg.Name, Seed: cfg.Seed, Duration: cfg.Duration,
		Steps:  NewSchedule(cfg.Seed, cfg.Duration, cfg.Faults, cfg.Schedule),
		Faults: map[string]int{}, FaultErrors: map[string]int{},
	}
	logf("chaos %s: seed %d (replay with %s=%d), %d faults over %s", cfg.Name, cfg.Seed, SeedEnv, cfg.Seed, len(r.Steps), cfg.Duration)
	byKind := map[string]Fault{}
	for _, f := range cfg.Faults {
		byKind[f.Kind] = f
	}

	ops := &Ops{}
	if cfg.Replicas != nil {
		rctx, stopReplicas := context.WithCancel(ctx)
		wait := cfg.Replicas.Start(rctx, ops)
		defer func() {
			stopReplicas()
			wait()
			if cfg.Observed != nil {
				cfg.Observed(r.Ops)
			}
		}()
	} else if cfg.Observed != nil {
		defer func() { cfg.Observed(r.Ops) }()
	}
	wctx, stopWorkload := context.WithCancel(ctx)
	workloadDone := make(chan error, 1)
	go func() { workloadDone <- cfg.Workload(wctx, ops) }()

	start := time.Now()
	for _, s := range r.Steps {
		if wait := time.Until(start.Add(s.At)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil || time.Since(start) >= cfg.Duration {
			break
		}
		logf("chaos %s: %s", cfg.Name, s)
		r.Faults[s.Kind]++
		if err := byKind[s.Kind].Inject(ctx, s); err != nil {
			r.FaultErrors[s.Kind]++
			logf("chaos %s: %s failed: %v", cfg.Name, s.Kind, err)
		}
	}
	if wait := time.Until(start.Add(cfg.Duration)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	stopWorkload()
	r.WorkloadErr = <-workloadDone
	r.Ops = ops.Counts()
	lifted := time.Now()
	logf("chaos %s: faults and workload stopped; waiting up to %s to settle", cfg.Name, cfg.SettleTimeout)

	var last error
	for {
		if last = cfg.Settled(ctx); last == nil {
			r.Settled = true
			break
		}
		if time.Since(lifted) > cfg.SettleTimeout || ctx.Err() != nil {
			break
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	r.Converged = time.Since(lifted)
	if !r.Settled {
		r.Violations = append(r.Violations, Violation{"liveness",
			fmt.Sprintf("not settled %s after the faults stopped: %v", cfg.SettleTimeout, last)})
	}
	logf("chaos %s: settled=%v after %s; checking", cfg.Name, r.Settled, r.Converged.Round(time.Millisecond))
	r.Violations = append(r.Violations, cfg.Check(ctx)...)
	return r
}

// Report prints the run's summary table and fails t if the run failed,
// naming the seed to replay and the log of the system under test.
func Report(t testing.TB, r *Result, logPath string) {
	t.Helper()
	fmt.Println(r.Table())
	if r.Failed() {
		t.Errorf("chaos run failed; replay with %s=%d; log %s\n%s", SeedEnv, r.Seed, logPath, r.Table())
	}
}

// Table is the run's summary: faults injected by kind, operations by
// kind, violations, and the time to converge after the last fault.
func (r *Result) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos %s: seed %d (%s=%d), faults for %s\n", r.Name, r.Seed, SeedEnv, r.Seed, r.Duration)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "faults injected\tcount\tfailed")
	for _, k := range sortedKeys(r.Faults) {
		fmt.Fprintf(w, "  %s\t%d\t%d\n", k, r.Faults[k], r.FaultErrors[k])
	}
	fmt.Fprintln(w, "operations\tcount\t")
	for _, k := range sortedKeys(r.Ops) {
		fmt.Fprintf(w, "  %s\t%d\t\n", k, r.Ops[k])
	}
	fmt.Fprintf(w, "invariant violations\t%d\t\n", len(r.Violations))
	settled := "converged after the last fault"
	if !r.Settled {
		settled = "NOT converged after the last fault"
	}
	fmt.Fprintf(w, "%s\t%s\t\n", settled, r.Converged.Round(100*time.Millisecond))
	if r.WorkloadErr != nil {
		fmt.Fprintf(w, "workload error\t%v\t\n", r.WorkloadErr)
	}
	w.Flush()
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION %s\n", v)
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ShortDuration is how long the short run of a workload injects faults.
const ShortDuration = 60 * time.Second

// Plan returns the seed and duration of a workload's TestChaos from the
// environment: with CHAOS_DURATION, the long run, on CHAOS_SEED or a
// random seed; without it, the short run of ShortDuration on CHAOS_SEED or
// shortSeed, which make test runs. It skips the short run under go test
// -short, logs the seed, and fails the test on a malformed variable.
func Plan(t testing.TB, shortSeed uint64) (seed uint64, duration time.Duration) {
	t.Helper()
	duration, long, err := LongDuration()
	if err != nil {
		t.Fatal(err)
	}
	if !long && testing.Short() {
		t.Skip("the short chaos run takes a minute or two; it runs without -short (make test)")
	}
	def := shortSeed
	if !long {
		duration = ShortDuration
	} else {
		def = uint64(time.Now().UnixNano())
	}
	if seed, err = SeedFromEnv(def); err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: replay with %s=%d", seed, SeedEnv, seed)
	return seed, duration
}
