package lockstep_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/lockstep"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
	"github.com/groundskeeper-io/groundskeeper/subreconcile/subreconciletest"
)

// A ConfigMap stands in for a database resource: data "want" is its spec,
// data "have" its status, and the global step brings have to want.
type db = *corev1.ConfigMap

func newDB(want, have string) db {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orders", Generation: 1},
		Data: map[string]string{"want": want, "have": have}}
}

func pending(d db) bool { return d.Data["want"] != d.Data["have"] }

// instance is one operator instance: its chain over a lock shared with the
// others through one backend and one clock.
type instance struct {
	h     *subreconciletest.Harness[db, *lockstep.State]
	acted []string
}

func newInstance(t *testing.T, id string, backend locking.Backend, clk *clocktesting.FakeClock, disabled bool, deny []locking.DenyListEntry) *instance {
	t.Helper()
	in := &instance{}
	o := &lockstep.Options{DeniedRetry: 5 * time.Minute, TimeLayout: time.TimeOnly}
	act := func(_ context.Context, d db, _ locking.Lease) (string, error) {
		did := fmt.Sprintf("set %s", d.Data["want"])
		in.acted = append(in.acted, did)
		d.Data["have"] = d.Data["want"]
		return did, nil
	}
	in.h = subreconciletest.New(t, subreconcile.Config[db, *lockstep.State]{
		Name:  "Database",
		Clock: clk,
		Steps: []subreconcile.Named[db, *lockstep.State]{
			lockstep.DenyList[db, *lockstep.State]("UpdateLockConfiguration", func(db) []locking.DenyListEntry { return deny }),
			lockstep.Global[db, *lockstep.State]("Reconfigure", pending, act, o),
			lockstep.Global[db, *lockstep.State]("Bounce", func(d db) bool { return d.Data["bounce"] != "" },
				func(_ context.Context, d db, _ locking.Lease) (string, error) {
					delete(d.Data, "bounce")
					in.acted = append(in.acted, "bounced")
					return "bounced", nil
				}, o),
			lockstep.Release[db, *lockstep.State]("ReleaseLock"),
		},
		NewState: lockstep.NewStates(locking.Config{Backend: backend, LockID: id, Clock: clk},
			func(db) bool { return disabled }),
	})
	return in
}

func holder(t *testing.T, backend locking.Backend, clk *clocktesting.FakeClock) string {
	t.Helper()
	l, err := locking.New(locking.Config{Backend: backend, LockID: "observer", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, err := l.Holder(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return ""
	}
	return rec.Holder
}

func TestGlobalStepsTakeTheLockOnceAndReleaseIt(t *testing.T) {
	clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
	backend := memlock.New()
	dc1 := newInstance(t, "dc1", backend, clk, false, nil)
	dc1.h.Run(newDB("7.3", "7.1")).
		ExpectActed("Reconfigure", "ReleaseLock").
		ExpectActions("Reconfigure", "took the global lock until 00:10:00", "set 7.3").
		ExpectActions("ReleaseLock", "released the global lock").
		ExpectNoRequeue()
	if h := holder(t, backend, clk); h != "" {
		t.Errorf("lock held by %q after the loop, want released", h)
	}
}

func TestNothingPendingTakesNoLock(t *testing.T) {
	clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
	backend := memlock.New()
	dc1 := newInstance(t, "dc1", backend, clk, false, nil)
	// The guard under test: with nothing to do, an instance must not
	// take the global lock from the others.
	dc1.h.Run(newDB("7.3", "7.3")).ExpectActed().ExpectNoRequeue()
	if h := holder(t, backend, clk); h != "" {
		t.Errorf("lock taken by %q with nothing to do", h)
	}
}

func TestHeldElsewhereRequeuesUntilTakeOver(t *testing.T) {
	clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
	backend := memlock.New()
	// dc1 takes the lock and dies before releasing it.
	other, err := locking.New(locking.Config{Backend: backend, LockID: "dc1", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Take(context.Background()); err != nil {
		t.Fatal(err)
	}
	dc2 := newInstance(t, "dc2", backend, clk, false, nil)
	d := newDB("7.3", "7.1")
	// The requeue is immediate: the chain stops at the first global step.
	r := dc2.h.Run(d).ExpectActed("Reconfigure").
		ExpectMessages("dc1 holds the global lock until 00:10:00")
	if len(dc2.acted) != 0 {
		t.Fatalf("dc2 acted without the lock: %q", dc2.acted)
	}
	after, _ := r.Result()
	if after <= 10*time.Minute-time.Second || after > 11*time.Minute {
		t.Errorf("requeue after %v, want about the 10 minutes until dc1's lock may be taken over", after)
	}
	clk.Step(after)
	dc2.h.Run(d).ExpectActed("Reconfigure", "ReleaseLock").
		ExpectActions("Reconfigure", "took the global lock over from dc1, until 00:20:01", "set 7.3").
		ExpectNoRequeue()
}

func TestDeniedInstanceDoesNotAct(t *testing.T) {
	clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
	backend := memlock.New()
	dc2 := newInstance(t, "dc2", backend, clk, false, []locking.DenyListEntry{{ID: "dc1"}})
	dc2.h.Run(newDB("7.3", "7.3")).ExpectActed("UpdateLockConfiguration").
		ExpectActions("UpdateLockConfiguration", "deny list is now [dc1]")
	dc1 := newInstance(t, "dc1", backend, clk, false, nil)
	r := dc1.h.Run(newDB("7.3", "7.1")).ExpectActed("Reconfigure").
		ExpectMessages("dc1 is on the deny list: no global operations")
	if after, _ := r.Result(); after != 5*time.Minute {
		t.Errorf("requeue after %v, want Options.DeniedRetry", after)
	}
	if len(dc1.acted) != 0 {
		t.Fatalf("denied dc1 acted: %q", dc1.acted)
	}
	// Allowed again, it acts.
	newInstance(t, "dc2", backend, clk, false, []locking.DenyListEntry{{ID: "dc1", Allow: true}}).h.
		Run(newDB("7.3", "7.3")).ExpectActions("UpdateLockConfiguration", "deny list is now []")
	dc1.h.Run(newDB("7.3", "7.1")).ExpectActed("Reconfigure", "ReleaseLock")
}

func TestDisabledLocksActWithoutTheLockAndSaySoOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
	backend := memlock.New()
	other, err := locking.New(locking.Config{Backend: backend, LockID: "dc1", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Take(context.Background()); err != nil {
		t.Fatal(err)
	}
	dc2 := newInstance(t, "dc2", backend, clk, true, []locking.DenyListEntry{{ID: "dc1"}})
	d := newDB("7.3", "7.1")
	d.Data["bounce"] = "yes"
	dc2.h.Run(d).
		ExpectActed("Reconfigure", "Bounce").
		ExpectActions("Reconfigure", "locks are disabled: acting without the global lock", "set 7.3").
		ExpectActions("Bounce", "bounced").
		ExpectNoRequeue()
	if h := holder(t, backend, clk); h != "dc1" {
		t.Errorf("holder %q, want dc1's record untouched by a disabled lock", h)
	}
}

// lateBackend answers a transaction only after the fake clock moved on by
// hang: a Take that returns after its lease ran out.
type lateBackend struct {
	locking.Backend
	clk  *clocktesting.FakeClock
	hang time.Duration
}

func (b lateBackend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	err := b.Backend.Update(ctx, fn)
	b.clk.Step(b.hang)
	return err
}

// A step never acts on a lease that ended before Take returned (the
// regression that the fdb-lock example found with an injected clock).
func TestGlobalStepNeverActsOnALockThatRanOut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hang    time.Duration
		wantAct bool
	}{
		{"take returns within the lock's duration", time.Minute, true},
		{"take returns after the lock ran out", locking.DefaultDuration + time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
			dc1 := newInstance(t, "dc1", lateBackend{memlock.New(), clk, tc.hang}, clk, false, nil)
			d := newDB("7.3", "7.1")
			r := dc1.h.Run(d)
			if acted := len(dc1.acted) > 0; acted != tc.wantAct {
				t.Fatalf("acted %v (%q), want %v", acted, dc1.acted, tc.wantAct)
			}
			if tc.wantAct {
				return
			}
			if d.Data["have"] != "7.1" {
				t.Errorf("have = %q, want unchanged 7.1", d.Data["have"])
			}
			msgs := strings.Join(r.Messages, "\n")
			if !strings.Contains(msgs, "the global lock ran out at 00:10:00 before dc1 could act") {
				t.Errorf("messages %q, want the lock's end said", msgs)
			}
		})
	}
}

// A lock lost before the release (taken over after it ran out) is recorded
// and not retried: nothing of ours is left to release.
func TestReleaseOfALostLock(t *testing.T) {
	clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
	backend := memlock.New()
	var thief *locking.Lock
	act := func(ctx context.Context, d db, _ locking.Lease) (string, error) {
		// The step outlives its lease in real work only; here the lock
		// is taken over between the step and the release.
		d.Data["have"] = d.Data["want"]
		return "set", nil
	}
	h := subreconciletest.New(t, subreconcile.Config[db, *lockstep.State]{
		Name:  "Database",
		Clock: clk,
		Steps: []subreconcile.Named[db, *lockstep.State]{
			lockstep.Global[db, *lockstep.State]("Reconfigure", pending, act, nil),
			subreconcile.NamedFunc("Stall", func(ctx context.Context, _ db, _ subreconcile.Loop[*lockstep.State]) *subreconcile.Requeue {
				clk.Step(locking.DefaultDuration + time.Minute)
				if _, err := thief.Take(ctx); err != nil {
					return subreconcile.RequeueOnError(err)
				}
				return nil
			}),
			lockstep.Release[db, *lockstep.State]("ReleaseLock"),
		},
		NewState: func(context.Context, db) (*lockstep.State, error) {
			l, err := locking.New(locking.Config{Backend: backend, LockID: "dc1", Clock: clk})
			return lockstep.NewState(l), err
		},
	})
	var err error
	if thief, err = locking.New(locking.Config{Backend: backend, LockID: "dc2", Clock: clk}); err != nil {
		t.Fatal(err)
	}
	r := h.Run(newDB("7.3", "7.1")).ExpectNoRequeue()
	acts := strings.Join(r.ActedNames(), ",")
	if !strings.Contains(acts, "ReleaseLock") {
		t.Fatalf("acted %s, want ReleaseLock to record the lost lock", acts)
	}
	if got := holder(t, backend, clk); got != "dc2" {
		t.Errorf("holder %q, want dc2's lock left alone", got)
	}
	if _, _, err := thief.Release(context.Background(), nil); err != nil && !errors.Is(err, locking.ErrNotHeld) {
		t.Fatal(err)
	}
}

// marginChain is one instance's chain with one global step, with opts, over
// backend; act is the step's work.
func marginChain(t *testing.T, backend locking.Backend, clk *clocktesting.FakeClock, opts *lockstep.Options, act lockstep.Act[db]) *subreconciletest.Harness[db, *lockstep.State] {
	t.Helper()
	return subreconciletest.New(t, subreconcile.Config[db, *lockstep.State]{
		Name:  "Database",
		Clock: clk,
		Steps: []subreconcile.Named[db, *lockstep.State]{
			lockstep.Global[db, *lockstep.State]("Reconfigure", pending, act, opts),
			lockstep.Release[db, *lockstep.State]("ReleaseLock"),
		},
		NewState: lockstep.NewStates(locking.Config{Backend: backend, LockID: "dc1", Clock: clk}, func(db) bool { return false }),
	})
}

// Options.Margin is Lock.Do's margin: a Take that returns with less than
// the margin left is not acted on, and Act's context ends the margin before
// the lease's End, for instances that add no clock-skew tolerance.
func TestGlobalStepKeepsItsMargin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		margin  time.Duration
		wantAct bool
	}{
		{"one minute left, no margin", 0, true},
		{"one minute left, a margin of two", 2 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
			backend := lateBackend{memlock.New(), clk, locking.DefaultDuration - time.Minute}
			acted := false
			h := marginChain(t, backend, clk, &lockstep.Options{TimeLayout: time.TimeOnly, Margin: tc.margin},
				func(context.Context, db, locking.Lease) (string, error) { acted = true; return "set", nil })
			r := h.Run(newDB("7.3", "7.1"))
			if acted != tc.wantAct {
				t.Fatalf("acted %v, want %v (messages %q)", acted, tc.wantAct, r.Messages)
			}
			if !tc.wantAct {
				r.ExpectMessages("the global lock ran out at 00:10:00 (less a margin of 2m0s) before dc1 could act")
			}
		})
	}

	// Act's context ends two minutes before the lease does.
	clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
	var cause error
	h := marginChain(t, memlock.New(), clk, &lockstep.Options{Margin: 2 * time.Minute},
		func(ctx context.Context, _ db, lease locking.Lease) (string, error) {
			clk.Step(lease.End.Sub(clk.Now()) - 2*time.Minute)
			select {
			case <-ctx.Done():
				cause = context.Cause(ctx)
			case <-time.After(10 * time.Second): // a bound on a failure, not a wait for success
				t.Error("Act's context did not end at the lease's End less the margin")
			}
			return "", cause
		})
	h.Run(newDB("7.3", "7.1")).ExpectError(locking.ErrLeaseEnded).ExpectErrorContaining("less a margin of 2m0s")
	if !errors.Is(cause, locking.ErrLeaseEnded) {
		t.Errorf("Act's context ended with %v, want a cause wrapping ErrLeaseEnded", cause)
	}
}

// A margin that is negative, or not shorter than the lock's Duration, is a
// terminal error naming the field and its value, before any lock is taken.
func TestGlobalStepRejectsABadMargin(t *testing.T) {
	for _, tc := range []struct {
		margin time.Duration
		want   string
	}{
		{-time.Second, "lockstep.Options.Margin = -1s: must not be negative"},
		{locking.DefaultDuration, "lockstep.Options.Margin = 10m0s: must be shorter than the lock's Duration (10m0s)"},
	} {
		clk := clocktesting.NewFakeClock(subreconciletest.Epoch)
		backend := memlock.New()
		acted := false
		h := marginChain(t, backend, clk, &lockstep.Options{Margin: tc.margin},
			func(context.Context, db, locking.Lease) (string, error) { acted = true; return "set", nil })
		r := h.Run(newDB("7.3", "7.1")).ExpectError(locking.ErrInvalidConfig).ExpectErrorContaining(tc.want)
		if !r.Terminal() {
			t.Errorf("margin %s: outcome %v, want a terminal error", tc.margin, r.Err)
		}
		if acted {
			t.Errorf("margin %s: Act ran", tc.margin)
		}
		if h := holder(t, backend, clk); h != "" {
			t.Errorf("margin %s: lock taken by %q", tc.margin, h)
		}
	}
}
