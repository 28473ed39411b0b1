package locking_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
)

// doLock returns dc1's lock on store, with a one-minute Duration on clk.
func doLock(t *testing.T, store locking.Backend, id string, clk clock.PassiveClock) *locking.Lock {
	t.Helper()
	l, err := locking.New(locking.Config{Backend: store, LockID: id, Duration: time.Minute, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func holder(t *testing.T, l *locking.Lock) string {
	t.Helper()
	rec, ok, err := l.Holder(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return ""
	}
	return rec.Holder
}

func TestDoRunsWhileTheLockIsHeldAndReleases(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	store := memlock.New()
	l := doLock(t, store, "dc1", clk)
	ran := false
	lease, err := l.Do(t.Context(), func(ctx context.Context, lease locking.Lease) error {
		ran = true
		if h := holder(t, l); h != "dc1" {
			t.Errorf("holder while fn runs = %q, want dc1", h)
		}
		return ctx.Err()
	}, &locking.DoOptions{Release: true})
	if err != nil || !ran || lease.Outcome != locking.OutcomeTaken {
		t.Fatalf("Do = %+v, %v (ran %v); want taken, nil, ran", lease, err, ran)
	}
	if h := holder(t, l); h != "" {
		t.Fatalf("holder after Do with Release = %q, want none", h)
	}
}

// A failed function keeps the lock: its work may be half done.
func TestDoKeepsTheLockWhenTheFunctionFails(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	l := doLock(t, memlock.New(), "dc1", clk)
	boom := errors.New("boom")
	_, err := l.Do(t.Context(), func(context.Context, locking.Lease) error { return boom }, &locking.DoOptions{Release: true})
	if !errors.Is(err, boom) || errors.Is(err, locking.ErrLeaseEnded) {
		t.Fatalf("Do = %v, want boom alone", err)
	}
	if h := holder(t, l); h != "dc1" {
		t.Fatalf("holder after a failed fn = %q, want dc1 (kept)", h)
	}
}

func TestDoDoesNotRunWhenTheLockIsHeldElsewhere(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	store := memlock.New()
	if _, err := doLock(t, store, "dc2", clk).Take(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := doLock(t, store, "dc1", clk).Do(t.Context(), func(context.Context, locking.Lease) error {
		t.Error("fn ran while dc2 holds the lock")
		return nil
	}, nil)
	var held *locking.HeldError
	if !errors.As(err, &held) || held.Holder != "dc2" || held.RequeueAfter <= 0 {
		t.Fatalf("Do = %v, want a *HeldError naming dc2 with a RequeueAfter", err)
	}
}

// The context given to fn ends when the lease ends on the lock's clock (less
// the margin), not on the wall clock, with ErrLeaseEnded as its cause; the
// function's error then carries ErrLeaseEnded, and the lock is not released.
func TestDoEndsTheContextAtTheLeaseEndOnTheInjectedClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	l := doLock(t, memlock.New(), "dc1", clk)
	_, err := l.Do(t.Context(), func(ctx context.Context, lease locking.Lease) error {
		if want := clk.Now().Add(time.Minute); !lease.End.Equal(want) {
			t.Errorf("lease.End = %s, want %s", lease.End, want)
		}
		clk.Step(49 * time.Second)
		select {
		case <-ctx.Done():
			t.Fatal("ctx ended 11 s before the lease end, with a 10 s margin")
		case <-time.After(50 * time.Millisecond):
		}
		clk.Step(time.Second) // 50 s: the end less the margin
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("ctx still live after the lease's end less the margin")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, locking.ErrLeaseEnded) {
			t.Errorf("cause = %v, want ErrLeaseEnded", cause)
		}
		return ctx.Err()
	}, &locking.DoOptions{Margin: 10 * time.Second, Release: true})
	if !errors.Is(err, locking.ErrLeaseEnded) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want ErrLeaseEnded and context.Canceled", err)
	}
	if h := holder(t, l); h != "dc1" {
		t.Fatalf("holder = %q: a lock no longer ours was released", h)
	}
}

// A function that returns nil after the lease ended did its last steps
// without the lock: Do says so.
func TestDoReportsAFunctionThatOutlivedItsLease(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	l := doLock(t, memlock.New(), "dc1", clk)
	_, err := l.Do(t.Context(), func(ctx context.Context, lease locking.Lease) error {
		clk.Step(2 * time.Minute)
		return nil // ignores ctx
	}, &locking.DoOptions{Release: true})
	if !errors.Is(err, locking.ErrLeaseEnded) || !strings.Contains(err.Error(), "not exclusive") {
		t.Fatalf("Do = %v, want ErrLeaseEnded saying the last steps were not exclusive", err)
	}
}

// lateBackend answers every transaction, then moves the clock on: a Take
// whose answer arrives after the lease it took has ended.
type lateBackend struct {
	locking.Backend
	clk  *clocktesting.FakeClock
	late time.Duration
}

func (b lateBackend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	err := b.Backend.Update(ctx, fn)
	b.clk.Step(b.late)
	return err
}

// A lease that ended before Take returned is never acted on.
func TestDoDoesNotActOnALeaseThatEndedBeforeTakeReturned(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	l := doLock(t, lateBackend{Backend: memlock.New(), clk: clk, late: 61 * time.Second}, "dc1", clk)
	lease, err := l.Do(t.Context(), func(context.Context, locking.Lease) error {
		t.Error("fn ran on a lease that had ended")
		return nil
	}, nil)
	if !errors.Is(err, locking.ErrLeaseEnded) || lease.Outcome != locking.OutcomeTaken {
		t.Fatalf("Do = %+v, %v; want the taken lease and ErrLeaseEnded", lease, err)
	}
	// Within the margin counts as ended too.
	l = doLock(t, lateBackend{Backend: memlock.New(), clk: clk, late: 55 * time.Second}, "dc1", clk)
	if _, err := l.Do(t.Context(), func(context.Context, locking.Lease) error {
		t.Error("fn ran inside the margin")
		return nil
	}, &locking.DoOptions{Margin: 10 * time.Second}); !errors.Is(err, locking.ErrLeaseEnded) {
		t.Fatalf("Do = %v, want ErrLeaseEnded", err)
	}
}

func TestDoWithLocksDisabledRunsWithoutTheBackend(t *testing.T) {
	l, err := locking.New(locking.Config{Backend: memlock.New(), LockID: "dc1", Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	lease, err := l.Do(t.Context(), func(context.Context, locking.Lease) error { ran = true; return nil }, nil)
	if err != nil || !ran || lease.Outcome != locking.OutcomeBypassed {
		t.Fatalf("Do = %+v, %v (ran %v); want bypassed, nil, ran", lease, err, ran)
	}
}

func TestDoRefusesBadOptions(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	l := doLock(t, memlock.New(), "dc1", clk)
	passive := doLock(t, memlock.New(), "dc1", clocktesting.NewFakePassiveClock(clk.Now()))
	for _, tc := range []struct {
		l    *locking.Lock
		o    *locking.DoOptions
		want string
	}{
		{l, &locking.DoOptions{Margin: -time.Second}, "DoOptions.Margin = -1s"},
		{l, &locking.DoOptions{Margin: time.Minute}, "DoOptions.Margin = 1m0s"},
		{passive, nil, "Config.Clock is a *testing.FakePassiveClock"},
	} {
		_, err := tc.l.Do(t.Context(), func(context.Context, locking.Lease) error {
			t.Errorf("fn ran with %+v", tc.o)
			return nil
		}, tc.o)
		if !errors.Is(err, locking.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Do(%+v) = %v, want ErrInvalidConfig naming %q", tc.o, err, tc.want)
		}
	}
	if h := holder(t, l); h != "" {
		t.Fatalf("holder = %q: a refused Do took the lock", h)
	}
}
