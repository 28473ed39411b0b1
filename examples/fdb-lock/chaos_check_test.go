package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
)

// The invariants of the fdb-lock workload.
//
// What the package promises (locking's doc.go, "What it does not
// guarantee"): the lock is a lease judged by wall clocks; a contender takes
// a lock over once its end second has passed by its own clock, plus
// ClockSkewTolerance; a holder acts only until its Lease's End (the step's
// context ends there); so mutual exclusion holds while every pair of clocks
// differs by at most the tolerance. Here every replica runs in one process
// on one clock and the tolerance is zero, so the promise is strict: two
// instances' global operations never overlap at all, and an operation
// ends by the end second of a lease its replica took (a holder stops at
// End, a contender takes over no earlier than End + 1 s). What is not
// promised: replicas of one instance share its lock ID, so the lock cannot
// keep them apart (leader election is no fence); their overlaps are
// counted, not reported.
const (
	invLinearizable = "lock linearizable" // porcupine over every transaction on the store
	invExclusion    = "mutual exclusion"  // no two instances' global operations at once
	invValidLock    = "lock valid"        // an operation runs within a lease its replica holds
	invLiveness     = "liveness"          // every change asked is done within the bound
)

// porcupineTimeout bounds the linearizability check.
const porcupineTimeout = 60 * time.Second

// check holds the recorded history and the final state against the
// invariants.
func (g *lockWorkload) check(ctx context.Context) []chaos.Violation {
	var out []chaos.Violation
	add := func(inv, format string, args ...any) {
		out = append(out, chaos.Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
	g.h.mu.Lock()
	ops := slices.Clone(g.h.ops)
	steps := slices.Clone(g.h.steps)
	concurrent := g.h.concurrent
	g.h.mu.Unlock()

	// (a) The store's history of the lock is linearizable: some order of
	// the transactions, each between its call and its return, explains
	// every result by the lock's sequential specification (locktest's
	// model): no two holders, no lost write, no stale read, across
	// restarts of the store.
	if concurrent > 0 {
		add(invLinearizable, "%d transactions overlapped on one replica: their clock readings cannot be told apart, the history is not checkable", concurrent)
	}
	res := locktest.CheckHistory(&locktest.History{Ops: ops}, porcupineTimeout)
	switch res.Result {
	case porcupine.Illegal:
		path := filepath.Join(os.TempDir(), "fdb-lock-chaos-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".html")
		if err := res.Visualize(path); err != nil {
			path = "(not written: " + err.Error() + ")"
		}
		add(invLinearizable, "the history of %d transactions is not linearizable: porcupine's view in %s", len(ops), path)
	case porcupine.Unknown:
		add(invLinearizable, "the linearizability check of %d transactions was inconclusive after %s", len(ops), porcupineTimeout)
	}

	// (b) Mutual exclusion: no two instances' operations overlap.
	slices.SortFunc(steps, func(a, b step) int { return a.start.Compare(b.start) })
	for i, a := range steps {
		for _, b := range steps[i+1:] {
			if !b.start.Before(a.end) {
				break
			}
			if b.id != a.id {
				add(invExclusion, "%s %q [%s, %s] overlaps %s %q [%s, %s]", a.replica, a.operation, ts(a.start), ts(a.end), b.replica, b.operation, ts(b.start), ts(b.end))
			}
		}
	}

	// (c) Each operation runs within a lease its replica holds: the last
	// take the replica started before the operation did is a successful
	// one that returned first (the step's own), the operation ended by that
	// lease's end second, and no other instance's take committed
	// between the two for certain (invoked after ours returned, returned
	// before the operation ended).
	for _, s := range steps {
		var take *locktest.Op
		for i := range ops {
			op := &ops[i]
			if op.Client == s.client && op.Kind == "take" && op.Call <= s.start.UnixNano() && (take == nil || op.Call > take.Call) {
				take = op
			}
		}
		switch {
		case take == nil:
			add(invValidLock, "%s %q [%s, %s] ran without taking the lock in the store", s.replica, s.operation, ts(s.start), ts(s.end))
			continue
		case take.Result != "ok" || take.Return > s.start.UnixNano():
			add(invValidLock, "%s %q [%s, %s] ran after its take failed (%s: %s)", s.replica, s.operation, ts(s.start), ts(s.end), take.Result, take.Err)
			continue
		}
		if valid := time.Unix(take.End+1, 0); s.end.After(valid) {
			add(invValidLock, "%s %q [%s, %s] outlived its lease, valid until %s", s.replica, s.operation, ts(s.start), ts(s.end), ts(valid))
		}
		for _, op := range ops {
			if op.ID != s.id && op.Kind == "take" && op.Result == "ok" && op.Call > take.Return && op.Return < s.end.UnixNano() {
				add(invValidLock, "%s %q [%s, %s] on the lease it took at %s, while %s took the lock (%s, at %s)", s.replica, s.operation, ts(s.start), ts(s.end),
					ts(time.Unix(0, take.Return)), op.ID, op.Outcome, ts(time.Unix(0, op.Return)))
			}
		}
	}

	// (d) Liveness: every change the generator asked is done, read fresh
	// once the system settled (or the settle timeout, the bound, passed).
	var pending []string
	err := chaos.Retry(func(ctx context.Context) (err error) {
		pending, err = g.pending(ctx)
		return err
	})
	if err != nil {
		add(invLiveness, "cannot read the final state: %v", err)
	}
	g.mu.Lock()
	stopped := g.stopped
	g.mu.Unlock()
	for _, p := range pending {
		add(invLiveness, "%s; not done %s after the generator stopped at %s", p, time.Since(stopped).Round(time.Second), ts(stopped))
	}
	return out
}

// observed adds to ops what the ground truth shows: transactions by kind
// and result, take-overs, global operations, and overlaps of one
// instance's replicas (allowed).
func (g *lockWorkload) observed(ops map[string]int) {
	g.h.mu.Lock()
	defer g.h.mu.Unlock()
	for _, op := range g.h.ops {
		ops["observed: lock "+op.Kind+" "+op.Result]++
		if op.Outcome == "TakenOver" {
			ops["observed: lock taken over"]++
		}
	}
	ops["observed: lock transactions with an unclassified error"] = g.h.unclassified
	steps := slices.Clone(g.h.steps)
	slices.SortFunc(steps, func(a, b step) int { return a.start.Compare(b.start) })
	for i, a := range steps {
		kind := "done"
		if a.err != nil {
			kind = "cut short"
		}
		ops["observed: global operations "+kind]++
		for _, b := range steps[i+1:] {
			if !b.start.Before(a.end) {
				break
			}
			if b.id == a.id && b.replica != a.replica {
				ops["observed: overlapping operations of one instance's replicas"]++
			}
		}
	}
	for _, s := range steps {
		if s.err == nil {
			ops["observed: global operations done by "+s.id]++
		}
	}
}
