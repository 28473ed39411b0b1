package crt_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	corev1 "k8s.io/api/core/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

func TestTerminal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		terminal bool
	}{
		{"nil stays nil", nil, false},
		{"an invalid policy is not retried", fmt.Errorf("sync: %w", lifecycle.ErrInvalidPolicy), true},
		{"a conflicting controller waits for a person", &lifecycle.ConflictError{Claim: "ns/data"}, true},
		{"an unsafe prefix is not retried", fmt.Errorf("delete: %w", backupstore.ErrUnsafePrefix), true},
		{"an invalid task spec is not retried", opstask.ErrInvalidSpec, true},
		{"a bad retention duration is not retried", retention.ErrInvalidDuration, true},
		{"a missing Secret may appear: retried", backupstore.ErrSecretNotFound, false},
		{"a held lock is retried", locking.ErrLocked, false},
		{"a stale owner reference goes with the garbage collector: retried", lifecycle.ErrStaleOwnerReference, false},
		{"any other error is retried", errors.New("connection refused"), false},
		{"a span the retention package refuses is not retried", fmt.Errorf("parse: %w", &retention.SpanError{Input: "x"}), true},
		{"an expiry the store cannot do is not retried", fmt.Errorf("expire: %w", backupstore.ErrExpiryUnsupported), true},
		{"a lifecycle configuration over the rule limit is not retried", backupstore.ErrTooManyRules, true},
		{"a transaction used after its Update is a bug: not retried", locking.ErrTxnDone, true},
		{"a join of terminal errors is terminal", errors.Join(lifecycle.ErrInvalidInput, &lifecycle.ConflictError{Claim: "ns/data-1"}), true},
		{"a join of a terminal error and a retryable one is retried", errors.Join(&lifecycle.ConflictError{Claim: "ns/data-0"}, errors.New("connection refused")), false},
		{"a join nested in a wrapper is judged by every part", fmt.Errorf("sync: %w", errors.Join(opstask.ErrInvalidSpec, fmt.Errorf("x: %w", errors.Join(retention.ErrInvalidPolicy, locking.ErrLocked)))), false},
		{"several %w are a join", fmt.Errorf("%w: %w", lifecycle.ErrInvalidInput, errors.New("EOF")), false},
		{"several terminal %w are terminal", fmt.Errorf("%w: %w", lifecycle.ErrInvalidInput, retention.ErrInvalidDuration), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := crt.Terminal(tc.err)
			if tc.err == nil {
				if got != nil {
					t.Fatalf("Terminal(nil) = %v", got)
				}
				return
			}
			if isTerminal := errors.Is(got, reconcile.TerminalError(nil)); isTerminal != tc.terminal {
				t.Errorf("Terminal(%v) terminal = %v, want %v", tc.err, isTerminal, tc.terminal)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("Terminal(%v) = %v: the cause is lost", tc.err, got)
			}
			if again := crt.Terminal(got); again != got {
				t.Errorf("Terminal twice wraps twice: %v", again)
			}
		})
	}
}

func TestEventsNameTheReasonAsAction(t *testing.T) {
	fake := events.NewFakeRecorder(1)
	crt.Events(fake).Event(&corev1.Pod{}, corev1.EventTypeWarning, lifecycle.ReasonConflictingController, "claim data has another controller")
	if got, want := <-fake.Events, "Warning ConflictingController claim data has another controller"; got != want {
		t.Errorf("event %q, want %q", got, want)
	}
}

func TestResult(t *testing.T) {
	gr := schema.GroupResource{Resource: "persistentvolumeclaims"}
	for _, tc := range []struct {
		name     string
		after    time.Duration
		err      error
		want     reconcile.Result
		wantErr  bool
		terminal bool
	}{
		{"success requeues when asked", time.Minute, nil, reconcile.Result{RequeueAfter: time.Minute}, false, false},
		{"success without a requeue", 0, nil, reconcile.Result{}, false, false},
		{"a conflict from a stale cache is a quiet requeue", time.Minute,
			fmt.Errorf("patch: %w", apierrors.NewConflict(gr, "data-0", errors.New("changed"))),
			reconcile.Result{RequeueAfter: subreconcile.DefaultConflictDelay}, false, false},
		{"AlreadyExists from a stale cache is a quiet requeue", 0,
			apierrors.NewAlreadyExists(gr, "data-0"),
			reconcile.Result{RequeueAfter: subreconcile.DefaultConflictDelay}, false, false},
		{"a retryable error is returned", time.Minute, errors.New("connection refused"), reconcile.Result{}, true, false},
		{"a conflict requeues no later than asked", time.Second,
			apierrors.NewConflict(gr, "data-0", errors.New("changed")),
			reconcile.Result{RequeueAfter: time.Second}, false, false},
		{"a do-not-retry error is terminal", 0, fmt.Errorf("scope: %w", lifecycle.ErrInvalidPolicy), reconcile.Result{}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := crt.Result(context.Background(), tc.after, tc.err)
			if got != tc.want {
				t.Errorf("Result = %+v, want %+v", got, tc.want)
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want an error: %t", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, tc.err) {
				t.Errorf("error %v does not wrap %v", err, tc.err)
			}
			if isTerminal := errors.Is(err, reconcile.TerminalError(nil)); isTerminal != tc.terminal {
				t.Errorf("terminal = %t, want %t", isTerminal, tc.terminal)
			}
		})
	}
}

// A join is terminal, or a quiet requeue, only when every part is: what
// SyncOwner returns for a conflicting controller on one claim and a 503 on
// another must be retried, and a stale-cache 409 joined with a 403 must be
// an error, not a requeue logged at V(1).
func TestJoinedErrorsAreJudgedByEveryPart(t *testing.T) {
	gr := schema.GroupResource{Resource: "persistentvolumeclaims"}
	conflicting := fmt.Errorf("lifecycle: sync claim ns/data-0: %w", &lifecycle.ConflictError{Claim: "ns/data-0"})
	unavailable := fmt.Errorf("lifecycle: patch claim ns/data-1: %w", apierrors.NewServiceUnavailable("etcd leader changed"))
	stale := fmt.Errorf("lifecycle: patch claim ns/data-0: %w", apierrors.NewConflict(gr, "data-0", errors.New("changed")))
	forbidden := fmt.Errorf("lifecycle: patch claim ns/data-1: %w", apierrors.NewForbidden(gr, "data-1", errors.New("no patch")))
	for _, tc := range []struct {
		name     string
		err      error
		want     reconcile.Result
		terminal bool
	}{
		{"a conflicting controller joined with a 503 is retried", errors.Join(conflicting, unavailable), reconcile.Result{}, false},
		{"a 503 joined with a conflicting controller is retried", errors.Join(unavailable, conflicting), reconcile.Result{}, false},
		{"a stale-cache 409 joined with a 403 is an error", errors.Join(stale, forbidden), reconcile.Result{}, false},
		{"a stale-cache 409 joined with a conflicting controller is an error", errors.Join(stale, conflicting), reconcile.Result{}, false},
		{"two conflicting controllers are terminal", errors.Join(conflicting, conflicting), reconcile.Result{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := crt.Result(context.Background(), time.Minute, tc.err)
			if got != tc.want {
				t.Errorf("Result = %+v, want %+v", got, tc.want)
			}
			if err == nil {
				t.Fatalf("Result(%v): no error: the failed part is neither logged nor retried", tc.err)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v does not wrap %v", err, tc.err)
			}
			if isTerminal := errors.Is(err, reconcile.TerminalError(nil)); isTerminal != tc.terminal {
				t.Errorf("terminal = %t, want %t", isTerminal, tc.terminal)
			}
			if crt.IsStale(tc.err) {
				t.Errorf("IsStale(%v) = true", tc.err)
			}
		})
	}
	if !crt.IsStale(errors.Join(stale, fmt.Errorf("create: %w", apierrors.NewAlreadyExists(gr, "data-2")))) {
		t.Error("a join of stale-cache errors only is not stale")
	}
}

// The global lock held by another instance is no fault: a quiet requeue at
// the time the holder's lock runs out. Losing the lock (ErrNotHeld) is not
// that: it is an error, retried.
func TestResultRequeuesWhileTheLockIsHeldElsewhere(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	store := memlock.New()
	lock := func(id string) *locking.Lock {
		l, err := locking.New(locking.Config{Backend: store, LockID: id, Duration: time.Minute, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if _, err := lock("dc2").Take(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := lock("dc1").Do(ctx, func(context.Context, locking.Lease) error {
		t.Error("fn ran while dc2 holds the lock")
		return nil
	}, nil)
	var held *locking.HeldError
	if !errors.As(err, &held) || held.RequeueAfter < time.Minute {
		t.Fatalf("Do = %v, want a *HeldError with a RequeueAfter of a minute or more", err)
	}
	got, rerr := crt.Result(ctx, 0, fmt.Errorf("reconfigure: %w", err))
	if rerr != nil || got.RequeueAfter != held.RequeueAfter {
		t.Fatalf("Result(held) = %+v, %v; want a requeue after %s and no error", got, rerr, held.RequeueAfter)
	}
	if got, rerr := crt.Result(ctx, 10*time.Second, err); rerr != nil || got.RequeueAfter != 10*time.Second {
		t.Fatalf("Result(held, asked 10s) = %+v, %v; want the sooner 10s", got, rerr)
	}
	if got, rerr := crt.Result(ctx, 0, errors.Join(err, errors.New("connection refused"))); rerr == nil || got.RequeueAfter != 0 {
		t.Fatalf("Result(held joined with another error) = %+v, %v; want the error", got, rerr)
	}
	_, _, err = lock("dc1").Release(ctx, nil)
	if got, rerr := crt.Result(ctx, 0, err); !errors.Is(rerr, locking.ErrNotHeld) || got.RequeueAfter != 0 {
		t.Fatalf("Result(ErrNotHeld) = %+v, %v; want the error, retried", got, rerr)
	}
}

// A join whose every part is a quiet requeue (the lock held elsewhere, a
// stale cache) is a quiet requeue itself, at the earliest of its parts'
// times: each part alone would be no fault, and neither is the whole.
func TestResultJoinOfQuietRequeuesRequeuesAtTheEarliest(t *testing.T) {
	ctx := context.Background()
	gr := schema.GroupResource{Resource: "persistentvolumeclaims"}
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	store := memlock.New()
	lock := func(id string) *locking.Lock {
		l, err := locking.New(locking.Config{Backend: store, LockID: id, Duration: time.Minute, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if _, err := lock("dc2").Take(ctx); err != nil {
		t.Fatal(err)
	}
	heldErr := func() (time.Duration, error) {
		t.Helper()
		_, err := lock("dc1").Do(ctx, func(context.Context, locking.Lease) error {
			t.Error("fn ran while dc2 holds the lock")
			return nil
		}, nil)
		var held *locking.HeldError
		if !errors.As(err, &held) {
			t.Fatalf("Do = %v, want a *HeldError", err)
		}
		return held.RequeueAfter, fmt.Errorf("reconfigure: %w", err)
	}
	long, heldLong := heldErr()
	clk.Step(30 * time.Second)
	short, heldShort := heldErr()
	if short >= long || short <= subreconcile.DefaultConflictDelay {
		t.Fatalf("requeue times %s and %s: want %s < the second < the first", long, short, subreconcile.DefaultConflictDelay)
	}
	stale := fmt.Errorf("patch claim ns/data-0: %w", apierrors.NewConflict(gr, "data-0", errors.New("changed")))
	for _, tc := range []struct {
		name  string
		after time.Duration
		err   error
		want  time.Duration
	}{
		{"the lock held joined with a stale-cache conflict", 0, errors.Join(heldLong, stale), subreconcile.DefaultConflictDelay},
		{"a stale-cache conflict joined with the lock held", 0, errors.Join(stale, heldLong), subreconcile.DefaultConflictDelay},
		{"the lock held twice: the sooner end", 0, errors.Join(heldLong, heldShort), short},
		{"the same in several %w", 0, fmt.Errorf("%w; %w", heldShort, heldLong), short},
		{"a nested join", 0, fmt.Errorf("sync: %w", errors.Join(heldLong, fmt.Errorf("x: %w", errors.Join(heldShort, stale)))), subreconcile.DefaultConflictDelay},
		{"no later than asked", time.Second, errors.Join(heldLong, stale), time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := crt.Result(ctx, tc.after, tc.err)
			if err != nil || got.RequeueAfter != tc.want {
				t.Fatalf("Result(%v) = %+v, %v; want a quiet requeue after %s", tc.err, got, err, tc.want)
			}
		})
	}
	// A part that is neither makes the whole an ordinary error.
	forbidden := apierrors.NewForbidden(gr, "data-1", errors.New("no patch"))
	for _, err := range []error{errors.Join(heldLong, stale, forbidden), errors.Join(heldShort, errors.Join(stale, forbidden))} {
		if got, rerr := crt.Result(ctx, 0, err); rerr == nil || got.RequeueAfter != 0 {
			t.Errorf("Result(%v) = %+v, %v; want the error", err, got, rerr)
		}
	}
}
