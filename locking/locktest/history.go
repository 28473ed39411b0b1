package locktest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// DurationEnv names the environment variable that sets how long the
// mutual-exclusion tests hammer a backend (a Go duration, e.g. "20s").
// HammerDuration reads it.
const DurationEnv = "LOCKTEST_HAMMER_DURATION"

// HammerDuration returns the duration set in DurationEnv, or def if it is
// unset. Tests pass a short default (5 s, so that `make test` stays quick
// while every run still records thousands of operations); benchmarks pass
// the 20 s.
func HammerDuration(def time.Duration) (time.Duration, error) {
	v := os.Getenv(DurationEnv)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration", DurationEnv, v)
	}
	return d, nil
}

// HammerOptions configures Hammer.
type HammerOptions struct {
	// Prefix is the lock's key prefix (locking.Options.Prefix).
	Prefix string
	// Contenders is the number of instances, each in its own goroutine:
	// 8 if zero.
	Contenders int
	// Duration is how long they hammer the lock: 5 s if zero.
	Duration time.Duration
	// LeaseDuration is the lock's duration on the lock clock: 2 s if zero.
	LeaseDuration time.Duration
	// Speedup makes the lock clock run this many times faster than real
	// time, so leases expire and are taken over within a short run: 10 if
	// zero (a 2 s lease lasts 0.2 s).
	Speedup int
	// Origin is the real time at which the lock clock reads the suite's
	// epoch. Processes hammering one backend must share it; the current
	// time if zero.
	Origin time.Time
	// OpTimeout bounds each operation: 5 s if zero.
	OpTimeout time.Duration
	// IDPrefix is prepended to the contenders' lock IDs, and FirstClient is
	// the first contender's client number in the history, so that the
	// histories of several processes can be merged.
	IDPrefix    string
	FirstClient int
	// Seed seeds the contenders' choices; a seed from the time if zero.
	Seed uint64
}

func (o *HammerOptions) defaults() {
	if o.Contenders == 0 {
		o.Contenders = 8
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Second
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 2 * time.Second
	}
	if o.Speedup == 0 {
		o.Speedup = 10
	}
	if o.Origin.IsZero() {
		o.Origin = clock.RealClock{}.Now()
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 5 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = uint64(clock.RealClock{}.Now().UnixNano())
	}
}

// Op is one operation in a recorded history: a Take, Release or Holder by
// one contender, when it was called and returned (real time, Unix
// nanoseconds, comparable across processes on one machine), the lock-clock
// time its decision used, and what it returned.
type Op struct {
	Client int    `json:"client"`
	Kind   string `json:"kind"` // "take", "release" or "holder"
	ID     string `json:"id"`
	// Lease is the lock's duration, in nanoseconds.
	Lease int64 `json:"lease"`
	// Now is the lock-clock time (Unix nanoseconds) of the last reading the
	// operation took, which is the one its final attempt decided on.
	Now    int64 `json:"now"`
	Call   int64 `json:"call"`
	Return int64 `json:"return"` // math.MaxInt64 when the outcome is unknown

	// Result is "ok", or the error's class: "locked", "notheld",
	// "conflict", "unavailable" (nothing committed) or "unknown" (may have
	// committed).
	Result   string `json:"result"`
	Outcome  string `json:"outcome,omitempty"` // Take: Taken, Extended, TakenOver
	Present  bool   `json:"present,omitempty"` // Holder: a record exists
	Holder   string `json:"holder,omitempty"`  // the record returned or refused on
	Start    int64  `json:"start,omitempty"`   // Unix seconds
	End      int64  `json:"end,omitempty"`     // Unix seconds
	Previous string `json:"previous,omitempty"`
	Err      string `json:"err,omitempty"`
}

// History is a recorded history and a summary of it.
type History struct {
	Ops []Op `json:"ops"`
}

// Summary counts the operations by kind and result, and the take-overs.
func (h *History) Summary() string {
	counts := map[string]int{}
	for _, op := range h.Ops {
		counts[op.Kind+"/"+op.Result]++
		if op.Outcome != "" {
			counts["outcome/"+op.Outcome]++
		}
	}
	return fmt.Sprintf("%d operations: %v", len(h.Ops), counts)
}

// Count returns how many operations have the given kind and result ("" for
// any).
func (h *History) Count(kind, result string) int {
	n := 0
	for _, op := range h.Ops {
		if (kind == "" || op.Kind == kind) && (result == "" || op.Result == result) {
			n++
		}
	}
	return n
}

// scaledClock is the lock clock: the suite's epoch at origin, running
// speedup times faster than real time. It records its last reading.
type scaledClock struct {
	origin  time.Time
	speedup int
	last    atomic.Int64
}

func (c *scaledClock) Now() time.Time {
	now := epoch.Add(clock.RealClock{}.Since(c.origin) * time.Duration(c.speedup))
	c.last.Store(now.UnixNano())
	return now
}

func (c *scaledClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Hammer has o.Contenders instances take, extend, release and read the lock
// under o.Prefix at random for o.Duration, and records every operation. One
// take in twenty is followed by a stall longer than the lease, as in a long
// GC pause, so that leases expire and are taken over. The lock clock runs o.Speedup times faster
// than real time.
//
// Errors that a backend may return under load or faults are recorded as
// results (see Op.Result); any other error stops the run and is returned
// with the history so far. Check the history with CheckHistory.
func Hammer(ctx context.Context, backend locking.Backend, o HammerOptions) (*History, error) {
	o.defaults()
	wall := clock.RealClock{}
	deadline := wall.Now().Add(o.Duration)
	var (
		mu   sync.Mutex
		ops  []Op
		wg   sync.WaitGroup
		errs = make(chan error, o.Contenders)
	)
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range o.Contenders {
		clk := &scaledClock{origin: o.Origin, speedup: o.Speedup}
		id := fmt.Sprintf("%scontender-%d", o.IDPrefix, i)
		l, err := locking.New(locking.Config{Backend: backend, LockID: id, Prefix: o.Prefix, Clock: clk, Duration: o.LeaseDuration})
		if err != nil {
			return nil, err
		}
		rng := rand.New(rand.NewPCG(o.Seed, uint64(o.FirstClient+i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []Op
			holding := false
			defer func() {
				mu.Lock()
				ops = append(ops, mine...)
				mu.Unlock()
			}()
			for stop.Err() == nil && wall.Now().Before(deadline) {
				op := Op{Client: o.FirstClient + i, ID: id, Lease: int64(o.LeaseDuration)}
				clk.last.Store(0)
				opCtx, opCancel := context.WithTimeout(stop, o.OpTimeout)
				op.Call = wall.Now().UnixNano()
				var err error
				// A holder mostly extends or releases; the others mostly try
				// to take. Every kind of operation comes from both, so that
				// refusals are exercised too.
				r := rng.IntN(100)
				if !holding {
					r = []int{0, 0, 0, 0, 0, 0, 0, 0, 60, 90}[r%10]
				}
				err = hammerOp(opCtx, l, r, &op)
				op.Return = wall.Now().UnixNano()
				opCancel()
				op.Now = clk.last.Load()
				switch {
				case op.Kind == "take":
					holding = err == nil
				case op.Kind == "release" && err == nil:
					holding = false
				}
				if err := Classify(&op, err); err != nil {
					if stop.Err() != nil {
						return // canceled: not the backend's fault, and not recorded
					}
					errs <- fmt.Errorf("%s: %s: %w", id, op.Kind, err)
					cancel()
					return
				}
				mine = append(mine, op)
				select {
				case <-stop.Done():
				case <-wall.After(o.pause(rng, &op, holding)):
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	h := &History{Ops: ops}
	return h, errors.Join(collect(errs)...)
}

// pause is how long a contender waits after op: up to 2 ms (4 ms while
// it does not hold the lock: contenders back off a little more than
// holders), and after one successful take in twenty a stall past the
// lease, as a holder in a long GC pause.
func (o *HammerOptions) pause(rng *rand.Rand, op *Op, holding bool) time.Duration {
	pause := time.Duration(rng.IntN(2000)) * time.Microsecond
	if !holding {
		pause *= 2
	}
	if op.Kind == "take" && op.Result == "ok" && rng.IntN(100) < 5 {
		pause = o.LeaseDuration/time.Duration(o.Speedup) + time.Duration(rng.IntN(200))*time.Millisecond
	}
	return pause
}

// Classify sets op.Result (and the record a refusal names, and Return for
// an unknown outcome) from err, what a Take, Release or Holder returned, or
// what one Backend.Update of theirs returned; it returns err if it is not
// one a backend may return under load or faults. Recorders of histories
// other than Hammer's (a chaos workload's backend wrapper) use it, so that
// every history is classified alike.
func Classify(op *Op, err error) error {
	var held *locking.HeldError
	switch {
	case err == nil:
		op.Result = "ok"
		return nil
	case errors.Is(err, locking.ErrUnknownResult):
		op.Result = "unknown"
		op.Return = math.MaxInt64
	case errors.As(err, &held) && errors.Is(err, locking.ErrLocked):
		op.Result = "locked"
		op.Holder, op.Start, op.End = held.Holder, held.Start.Unix(), held.End.Unix()
	case errors.As(err, &held) && errors.Is(err, locking.ErrNotHeld):
		op.Result = "notheld"
		op.Holder, op.Start, op.End = held.Holder, held.Start.Unix(), held.End.Unix()
	case errors.Is(err, locking.ErrConflict):
		op.Result = "conflict"
	case errors.Is(err, locking.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		// Nothing was committed: a failed read, or a commit never sent.
		op.Result = "unavailable"
	default:
		return err
	}
	op.Err = err.Error()
	return nil
}

// hammerOp does one operation of Hammer's on l, chosen by r (0-99: take
// below 45, release below 85, else read the holder), and records its kind
// and outcome in op.
func hammerOp(ctx context.Context, l *locking.Lock, r int, op *Op) error {
	switch {
	case r < 45:
		op.Kind = "take"
		lease, err := l.Take(ctx)
		if err == nil {
			op.Outcome = lease.Outcome.String()
			op.Holder, op.Start, op.End, op.Previous = lease.Holder, lease.Start.Unix(), lease.End.Unix(), lease.Previous
		}
		return err
	case r < 85:
		op.Kind = "release"
		_, _, err := l.Release(ctx, nil)
		return err
	default:
		op.Kind = "holder"
		rec, present, err := l.Holder(ctx)
		op.Present = present
		if err == nil && present {
			op.Holder, op.Start, op.End = rec.Holder, rec.Start.Unix(), rec.End.Unix()
		}
		return err
	}
}
