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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	corev1 "k8s.io/api/core/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/locking"
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
