package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// The invariants of the etcd-opstask workload, as opstask's doc.go states
// them for executors that return promptly when their context is canceled
// (the recorder's do: they wait on it) and processes that are not paused.
const (
	// invExclusive: no two executions of one task overlap in time. The
	// lease makes this strict: a holder's executor is canceled 2/3 of
	// LeaseDuration after the start of its last confirmed write, and
	// another controller takes over only LeaseDuration after it saw that
	// write's result; a killed replica's executor ends with its context.
	invExclusive = "no task executed twice at once"
	// invFIFO: of two tasks of one target, the later in queue order
	// (creationTimestamp, then name) never starts before the earlier one
	// finished: its executions all ended, and it reached its final state.
	// A task the generator deleted while it ran is no exception: it is
	// held until its executor has returned (doc.go).
	invFIFO = "FIFO per target"
	// invCleanup: no two cleanups of one task overlap, and none overlaps
	// an execution of it.
	invCleanup = "cleanup at most once at a time"
	// invLiveness: every task reaches a final state within the bound
	// after the faults stopped (or after its creation, if later), and a
	// task whose TTL ran out is deleted within the bound after that.
	invLiveness = "liveness"
	// invKept: every task the generator did not delete exists with its
	// UID, or was deleted by a controller once finished and its TTL ran
	// out; no controller ever sends the delete of an unfinished task, or
	// of one whose TTL has not run out; every deletion the audit saw was
	// the generator's or a controller's.
	invKept = "no task lost"
)

func ts(t time.Time) string { return t.Format("15:04:05.000") }

// check compares what the recorders and the audit saw, and what exists
// now, with the ground truth.
func (g *opsWorkload) check(ctx context.Context) []chaos.Violation {
	var out []chaos.Violation
	add := func(inv, format string, args ...any) {
		out = append(out, chaos.Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
	var live map[string]api.EtcdOpsTask
	err := chaos.Retry(func(ctx context.Context) (err error) {
		live, err = g.finalState(ctx)
		return err
	})
	if err != nil {
		add(invKept, "cannot read the final state: %v", err)
		return out
	}
	finalRead := time.Now()
	execs, cleanups, deletes := g.hist.snapshot()
	execsOf, cleanupsOf := map[string][]span{}, map[string][]span{}
	for _, s := range execs {
		execsOf[s.uid] = append(execsOf[s.uid], s)
	}
	for _, s := range cleanups {
		cleanupsOf[s.uid] = append(cleanupsOf[s.uid], s)
	}
	deletesOf := map[string][]storeDelete{}
	for _, d := range deletes {
		deletesOf[d.task.UID] = append(deletesOf[d.task.UID], d)
	}

	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	// final is a task's final status: in the final read, or as a
	// controller deleted it. ok is false when neither is known.
	final := func(t *taskTruth) (opstask.Status, bool) {
		if o, ok := live[t.name]; ok && string(o.UID) == string(t.uid) {
			return o.Status, o.Status.State.Finished()
		}
		for _, d := range deletesOf[string(t.uid)] {
			if d.err == nil {
				return d.task.Status, d.task.State().Finished()
			}
		}
		return opstask.Status{}, false
	}

	// (a) No task executed twice at once. One violation per task: a
	// broken claim makes many pairs overlap.
	for _, name := range g.truth.order {
		t := g.truth.tasks[name]
		if n, first := overlaps(sortSpans(execsOf[string(t.uid)]), finalRead); n > 0 {
			add(invExclusive, "task %s: %d pairs of executions overlap; the first: %s", name, n, first)
		}
	}

	// (b) FIFO per target.
	byTarget := map[string][]*taskTruth{}
	for _, name := range g.truth.order {
		if t := g.truth.tasks[name]; t.uid != "" {
			byTarget[t.target] = append(byTarget[t.target], t)
		}
	}
	for _, target := range opsTargets {
		q := byTarget[target]
		sort.SliceStable(q, func(i, j int) bool {
			if !q[i].created.Equal(q[j].created) {
				return q[i].created.Before(q[j].created)
			}
			return q[i].name < q[j].name
		})
		for i, a := range q {
			aStatus, aFinished := final(a)
			for _, b := range q[i+1:] {
				bs := sortSpans(execsOf[string(b.uid)])
				if len(bs) == 0 {
					continue
				}
				first := bs[0]
				for _, x := range sortSpans(execsOf[string(a.uid)]) {
					if end := x.endOr(finalRead); first.start.Before(end) {
						add(invFIFO, "target %s: %s (created %s) started by %s, before the earlier %s (created %s) ended its %s", target, b.name, ts(b.created), first.String(), a.name, ts(a.created), x.String())
						break
					}
				}
				if len(execsOf[string(a.uid)]) == 0 && aFinished && aStatus.LastTransitionTime != nil {
					if ltt := aStatus.LastTransitionTime.Time; ltt.After(first.start) {
						add(invFIFO, "target %s: %s started by %s, before the earlier %s became %s in the second of %s", target, b.name, first.String(), a.name, aStatus.State, ts(ltt))
					}
				}
			}
		}
	}

	// (c) Cleanup at most once at a time, and never during an execution.
	for _, name := range g.truth.order {
		t := g.truth.tasks[name]
		cs := sortSpans(cleanupsOf[string(t.uid)])
		if n, first := overlaps(cs, finalRead); n > 0 {
			add(invCleanup, "task %s: %d pairs of cleanups overlap; the first: %s", name, n, first)
		}
		for _, a := range cs {
			for _, x := range execsOf[string(t.uid)] {
				if a.start.Before(x.endOr(finalRead)) && x.start.Before(a.endOr(finalRead)) {
					add(invCleanup, "task %s: cleanup %s overlaps execution %s", name, a.String(), x.String())
				}
			}
		}
	}

	// (d) Liveness and (e) no task lost.
	stopped := g.truth.stopped
	deadline := func(from time.Time) time.Time {
		if from.Before(stopped) {
			from = stopped
		}
		return from.Add(g.o.bound)
	}
	for _, name := range g.truth.order {
		t := g.truth.tasks[name]
		if t.uid == "" {
			continue
		}
		o, present := live[name]
		if !t.deleteSent.IsZero() {
			// Deleted by the generator: a running task is held until its
			// executor returned, and must then go.
			if present && string(o.UID) == string(t.uid) && finalRead.After(deadline(t.deleteDone)) {
				add(invLiveness, "task %s, deleted at %s, still exists at %s (deletionTimestamp %v, finalizers %v); the bound was %s",
					name, ts(t.deleteDone), ts(finalRead), o.DeletionTimestamp, o.Finalizers, ts(deadline(t.deleteDone)))
			}
			continue
		}
		status, finished := final(t)
		switch {
		case present && string(o.UID) != string(t.uid):
			add(invKept, "task %s has uid %s, not its own %s", name, o.UID, t.uid)
		case !present && len(deletesOf[string(t.uid)]) == 0:
			add(invKept, "task %s (uid %s, created %s) is gone, and no controller deleted it", name, t.uid, ts(t.created))
		case present && !finished && finalRead.After(deadline(t.created)):
			add(invLiveness, "task %s (created %s) is still %s at %s; the bound was %s", name, ts(t.created), (&opstask.Task{Status: o.Status}).State(), ts(finalRead), ts(deadline(t.created)))
		case finished && status.LastTransitionTime.Truncate(time.Second).After(deadline(t.created)):
			add(invLiveness, "task %s (created %s) became %s at %s, after the bound %s", name, ts(t.created), status.State, ts(status.LastTransitionTime.Time), ts(deadline(t.created)))
		case present && t.plan.ttl < 3600 && finalRead.After(deadline(expiry(status, t.plan.ttl))):
			add(invLiveness, "task %s expired at %s and still exists at %s", name, ts(expiry(status, t.plan.ttl)), ts(finalRead))
		}
	}
	for _, d := range deletes {
		ttl := int32(3600)
		if d.task.Spec.TTLSecondsAfterFinished != nil {
			ttl = *d.task.Spec.TTLSecondsAfterFinished
		}
		switch e := expiry(d.task.Status, ttl); {
		case !d.task.State().Finished():
			add(invKept, "replica %s sent the delete of task %s at %s while it was %s (error: %v)", d.replica, d.task.Name, ts(d.at), d.task.State(), d.err)
		case d.at.Before(e):
			add(invKept, "replica %s sent the delete of task %s at %s, before its TTL ran out at %s", d.replica, d.task.Name, ts(d.at), ts(e))
		}
	}
	for _, del := range g.audit.Deletions() {
		t := g.truth.tasks[del.Name]
		switch {
		case t == nil || string(t.uid) != string(del.UID):
			add(invKept, "task %s (uid %s), which the generator did not create, was deleted by %s", del.Name, del.UID, ts(del.Seen))
		case !t.deleteSent.IsZero() && !del.Seen.Before(t.deleteSent):
		default:
			sent := false
			for _, d := range deletesOf[string(t.uid)] {
				sent = sent || !d.at.After(del.Seen)
			}
			if !sent {
				add(invKept, "task %s (uid %s) was deleted by %s, by neither the generator nor a controller", t.name, t.uid, ts(del.Seen))
			}
		}
	}
	return out
}

// overlaps counts the pairs of spans (sorted by start) that overlap, and
// describes the first.
func overlaps(ss []span, now time.Time) (n int, first string) {
	for i, a := range ss {
		for _, b := range ss[i+1:] {
			if b.start.Before(a.endOr(now)) {
				if n == 0 {
					first = fmt.Sprintf("%s and %s overlap by %s", a.String(), b.String(), a.endOr(now).Sub(b.start).Round(time.Millisecond))
				}
				n++
			}
		}
	}
	return n, first
}

// sortSpans returns the spans sorted by start.
func sortSpans(ss []span) []span {
	out := append([]span(nil), ss...)
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// observed adds to ops what the recorders and the final state show.
func (g *opsWorkload) observed(ctx context.Context, ops map[string]int) {
	execs, cleanups, deletes := g.hist.snapshot()
	ops["observed: executions"] = len(execs)
	ops["observed: executions resumed after a takeover"] = 0
	for _, s := range execs {
		if s.resumed {
			ops["observed: executions resumed after a takeover"]++
		}
		if s.end.IsZero() {
			ops["observed: executions never returned"]++
		}
	}
	ops["observed: cleanups"] = len(cleanups)
	for _, d := range deletes {
		if d.err == nil {
			ops["observed: tasks deleted after their TTL"]++
			ops["observed: tasks "+strings.ToLower(string(d.task.State()))]++
		}
	}
	live, err := g.finalState(ctx)
	if err != nil {
		return
	}
	for _, o := range live {
		ops["observed: tasks "+strings.ToLower(string(o.Status.State))]++
	}
}
