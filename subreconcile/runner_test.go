package subreconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// loopState is the per-loop state of the test chains.
type loopState struct {
	id int
}

type (
	dbStep = subreconcile.Named[*Database, *loopState]
	dbLoop = subreconcile.Loop[*loopState]
	dbFunc = func(ctx context.Context, db *Database, loop dbLoop) *subreconcile.Requeue
)

// chain builds named steps that record their calls in *calls and then run
// the given behaviour (nil: a no-op).
func chain(calls *[]string, steps ...any) []dbStep {
	var out []dbStep
	for i := 0; i < len(steps); i += 2 {
		name := steps[i].(string)
		var f dbFunc
		if steps[i+1] != nil {
			f = steps[i+1].(dbFunc)
		}
		out = append(out, subreconcile.NamedFunc(name, func(ctx context.Context, db *Database, loop dbLoop) *subreconcile.Requeue {
			*calls = append(*calls, name)
			if f == nil {
				return nil
			}
			return f(ctx, db, loop)
		}))
	}
	return out
}

func returns(r *subreconcile.Requeue) dbFunc {
	return func(context.Context, *Database, dbLoop) *subreconcile.Requeue { return r }
}

type event struct{ Type, Reason, Message string }

func eventSink(events *[]event) subreconcile.EventRecorder {
	return subreconcile.EventFunc(func(_ runtime.Object, typ, reason, msg string) {
		*events = append(*events, event{typ, reason, msg})
	})
}

var (
	errDisk   = errors.New("disk full")
	errQuorum = errors.New("no quorum")
	conflict  = apierrors.NewConflict(schema.GroupResource{Group: "example.groundskeeper.io", Resource: "databases"}, "orders", errors.New("the object has been modified"))
)

func TestRun(t *testing.T) {
	tests := []struct {
		name  string
		steps func(calls *[]string, cancel context.CancelFunc) []dbStep
		cfg   func(*subreconcile.Config[*Database, *loopState])

		wantCalls     []string
		wantAfter     time.Duration
		wantErrIs     []error
		wantErrText   []string
		wantMessages  []string
		wantStoppedAt string
		wantActed     []string
		wantReconcile bool
		wantTerminal  bool
		wantEvents    []event
	}{
		{
			name: "all steps no-op: no requeue, reconciled, one completion event",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c, "UpdateStatus", nil, "AddPods", nil, "UpdateStatusAgain", nil)
			},
			wantCalls:     []string{"UpdateStatus", "AddPods", "UpdateStatusAgain"},
			wantReconcile: true,
			wantEvents:    []event{{"Normal", "ReconciliationComplete", "Reconciled generation 4"}},
		},
		{
			name: "immediate requeue in the middle stops the rest",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"UpdateStatus", nil,
					"AddPods", returns(subreconcile.RequeueAfter(30*time.Second, "waiting for pods")),
					"ChangeCoordinators", nil)
			},
			wantCalls:     []string{"UpdateStatus", "AddPods"},
			wantAfter:     30 * time.Second,
			wantMessages:  []string{"waiting for pods"},
			wantStoppedAt: "AddPods",
			wantActed:     []string{"AddPods"},
			wantEvents:    []event{{"Normal", "ReconciliationTerminatedEarly", "AddPods: waiting for pods"}},
		},
		{
			name: "three delayed requeues: every step runs, shortest delay, all messages in order",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"ExcludeProcesses", returns(subreconcile.DelayedRequeueAfter(time.Minute, "recovery too recent")),
					"UpdatePodConfig", returns(subreconcile.DelayedRequeueAfter(10*time.Second, "sidecar unreachable")),
					"BounceProcesses", returns(subreconcile.DelayedRequeueAfter(30*time.Second, "upgrade pending")),
					"UpdateStatus", nil)
			},
			wantCalls:    []string{"ExcludeProcesses", "UpdatePodConfig", "BounceProcesses", "UpdateStatus"},
			wantAfter:    10 * time.Second,
			wantMessages: []string{"recovery too recent", "sidecar unreachable", "upgrade pending"},
			wantActed:    []string{"ExcludeProcesses", "UpdatePodConfig", "BounceProcesses"},
		},
		{
			name: "error in a delayed requeue: the rest runs, then the error is returned with the step's name",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"UpdateConfigMap", returns(subreconcile.DelayedRequeueOnError(errDisk)),
					"AddPods", returns(subreconcile.DelayedRequeueAfter(time.Second, "pods pending")),
					"UpdateStatus", nil)
			},
			wantCalls:    []string{"UpdateConfigMap", "AddPods", "UpdateStatus"},
			wantErrIs:    []error{errDisk},
			wantErrText:  []string{`subreconciler "UpdateConfigMap": disk full`},
			wantMessages: []string{"disk full", "pods pending"},
			wantActed:    []string{"UpdateConfigMap", "AddPods"},
		},
		{
			name: "two delayed errors are joined, each naming its step",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"UpdateConfigMap", returns(subreconcile.DelayedRequeueOnError(errDisk)),
					"UpdateDatabaseConfiguration", returns(subreconcile.DelayedRequeueOnError(errQuorum)))
			},
			wantCalls:    []string{"UpdateConfigMap", "UpdateDatabaseConfiguration"},
			wantErrIs:    []error{errDisk, errQuorum},
			wantErrText:  []string{`subreconciler "UpdateConfigMap": disk full`, `subreconciler "UpdateDatabaseConfiguration": no quorum`},
			wantMessages: []string{"disk full", "no quorum"},
			wantActed:    []string{"UpdateConfigMap", "UpdateDatabaseConfiguration"},
		},
		{
			name: "immediate error after a delayed requeue: stops, returns the error, keeps both messages",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"AddPods", returns(subreconcile.DelayedRequeueAfter(time.Second, "pods pending")),
					"UpdateDatabaseConfiguration", returns(subreconcile.RequeueOnError(errQuorum)),
					"UpdateStatus", nil)
			},
			wantCalls:     []string{"AddPods", "UpdateDatabaseConfiguration"},
			wantErrIs:     []error{errQuorum},
			wantErrText:   []string{`subreconciler "UpdateDatabaseConfiguration": no quorum`},
			wantMessages:  []string{"pods pending", "no quorum"},
			wantStoppedAt: "UpdateDatabaseConfiguration",
			wantActed:     []string{"AddPods", "UpdateDatabaseConfiguration"},
			wantEvents:    []event{{"Warning", "ReconciliationTerminatedEarly", "UpdateDatabaseConfiguration: no quorum"}},
		},
		{
			name: "immediate requeue after a delayed one: stops, shortest delay of both",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"AddPods", returns(subreconcile.DelayedRequeueAfter(5*time.Second, "pods pending")),
					"ChangeCoordinators", returns(subreconcile.RequeueAfter(time.Minute, "lock held elsewhere")),
					"UpdateStatus", nil)
			},
			wantCalls:     []string{"AddPods", "ChangeCoordinators"},
			wantAfter:     5 * time.Second,
			wantMessages:  []string{"pods pending", "lock held elsewhere"},
			wantStoppedAt: "ChangeCoordinators",
			wantActed:     []string{"AddPods", "ChangeCoordinators"},
			wantEvents:    []event{{"Normal", "ReconciliationTerminatedEarly", "ChangeCoordinators: lock held elsewhere"}},
		},
		{
			name: "immediate requeue without a message after a delayed one: the event speaks for the stopping step",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"AddPods", returns(subreconcile.DelayedRequeueAfter(5*time.Second, "pods pending")),
					"ChangeCoordinators", returns(subreconcile.RequeueAfter(time.Second, "")),
					"UpdateStatus", nil)
			},
			wantCalls:     []string{"AddPods", "ChangeCoordinators"},
			wantAfter:     time.Second,
			wantMessages:  []string{"pods pending"},
			wantStoppedAt: "ChangeCoordinators",
			wantActed:     []string{"AddPods", "ChangeCoordinators"},
			wantEvents:    []event{{"Normal", "ReconciliationTerminatedEarly", "ChangeCoordinators: requeue requested"}},
		},
		{
			name: "loop stopped early with the generation already marked: Reconciled reports the status",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"RemoveProcessGroups", dbFunc(func(_ context.Context, db *Database, loop dbLoop) *subreconcile.Requeue {
						db.Status.Generations.MarkReconciledWithPendingRemoval(loop.Generation())
						return subreconcile.RequeueAfter(time.Minute, "pods still terminating")
					}),
					"UpdateStatus", nil)
			},
			cfg: func(c *subreconcile.Config[*Database, *loopState]) {
				c.Generations = databaseGenerations
			},
			wantCalls:     []string{"RemoveProcessGroups"},
			wantAfter:     time.Minute,
			wantMessages:  []string{"pods still terminating"},
			wantStoppedAt: "RemoveProcessGroups",
			wantActed:     []string{"RemoveProcessGroups"},
			wantReconcile: true,
			wantEvents:    []event{{"Normal", "ReconciliationTerminatedEarly", "RemoveProcessGroups: pods still terminating"}},
		},
		{
			name: "terminal error stops the chain even when delayed, and asks for no retry",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"CheckClientCompatibility", returns(subreconcile.DelayedRequeueOnError(subreconcile.Terminal(errors.New("version 6.2 is not supported")))),
					"AddPods", nil)
			},
			wantCalls:     []string{"CheckClientCompatibility"},
			wantErrIs:     []error{subreconcile.ErrTerminal},
			wantErrText:   []string{`subreconciler "CheckClientCompatibility": terminal error: version 6.2 is not supported`},
			wantMessages:  []string{"terminal error: version 6.2 is not supported"},
			wantStoppedAt: "CheckClientCompatibility",
			wantActed:     []string{"CheckClientCompatibility"},
			wantTerminal:  true,
			wantEvents:    []event{{"Warning", "ReconciliationTerminatedEarly", "CheckClientCompatibility: terminal error: version 6.2 is not supported"}},
		},
		{
			name: "a step that panics is an error naming the step, and the rest does not run",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"UpdateStatus", nil,
					"ChooseRemovals", dbFunc(func(context.Context, *Database, dbLoop) *subreconcile.Requeue {
						groups := map[string]*Database{}
						_ = groups["missing"].Spec.Replicas // nil pointer dereference
						return nil
					}),
					"ExcludeProcesses", nil)
			},
			wantCalls:     []string{"UpdateStatus", "ChooseRemovals"},
			wantErrIs:     []error{subreconcile.ErrPanic},
			wantErrText:   []string{`subreconciler "ChooseRemovals": panic: runtime error: invalid memory address or nil pointer dereference`},
			wantMessages:  []string{"panic: runtime error: invalid memory address or nil pointer dereference"},
			wantStoppedAt: "ChooseRemovals",
			wantActed:     []string{"ChooseRemovals"},
			wantEvents:    []event{{"Warning", "ReconciliationTerminatedEarly", "ChooseRemovals: panic: runtime error: invalid memory address or nil pointer dereference"}},
		},
		{
			name: "context cancelled by a step: the next step does not start",
			steps: func(c *[]string, cancel context.CancelFunc) []dbStep {
				return chain(c,
					"UpdateStatus", dbFunc(func(context.Context, *Database, dbLoop) *subreconcile.Requeue {
						cancel()
						return nil
					}),
					"AddPods", nil)
			},
			wantCalls:   []string{"UpdateStatus"},
			wantErrIs:   []error{context.Canceled},
			wantErrText: []string{`subreconcile: loop stopped before subreconciler "AddPods": context canceled`},
		},
		{
			name: "optimistic-concurrency conflict is a requeue after the conflict delay, not an error",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"UpdateStatus", returns(subreconcile.RequeueOnError(conflict)),
					"AddPods", nil)
			},
			wantCalls:     []string{"UpdateStatus"},
			wantAfter:     subreconcile.DefaultConflictDelay,
			wantMessages:  []string{conflict.Error()},
			wantStoppedAt: "UpdateStatus",
			wantActed:     []string{"UpdateStatus"},
			wantEvents:    []event{{"Normal", "ReconciliationTerminatedEarly", "UpdateStatus: " + conflict.Error()}},
		},
		{
			name: "conflict with a negative ConflictDelay is an ordinary error",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c, "UpdateStatus", returns(subreconcile.RequeueOnError(conflict)))
			},
			cfg:           func(c *subreconcile.Config[*Database, *loopState]) { c.ConflictDelay = -1 },
			wantCalls:     []string{"UpdateStatus"},
			wantErrIs:     []error{conflict},
			wantErrText:   []string{`subreconciler "UpdateStatus": Operation cannot be fulfilled`},
			wantMessages:  []string{conflict.Error()},
			wantStoppedAt: "UpdateStatus",
			wantActed:     []string{"UpdateStatus"},
			wantEvents:    []event{{"Warning", "ReconciliationTerminatedEarly", "UpdateStatus: " + conflict.Error()}},
		},
		{
			name: "delayed conflict with its own delay keeps that delay",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"UpdateLabels", returns(&subreconcile.Requeue{Err: conflict, Delay: 2 * time.Second, Delayed: true}),
					"UpdateStatus", nil)
			},
			wantCalls:    []string{"UpdateLabels", "UpdateStatus"},
			wantAfter:    2 * time.Second,
			wantMessages: []string{conflict.Error()},
			wantActed:    []string{"UpdateLabels"},
		},
		{
			name: "a conflict marked terminal is terminal",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c, "UpdateStatus", returns(subreconcile.RequeueOnError(subreconcile.Terminal(conflict))), "AddPods", nil)
			},
			wantCalls:     []string{"UpdateStatus"},
			wantErrIs:     []error{subreconcile.ErrTerminal, conflict},
			wantMessages:  []string{"terminal error: " + conflict.Error()},
			wantStoppedAt: "UpdateStatus",
			wantActed:     []string{"UpdateStatus"},
			wantTerminal:  true,
			wantEvents:    []event{{"Warning", "ReconciliationTerminatedEarly", "UpdateStatus: terminal error: " + conflict.Error()}},
		},
		{
			name: "zero delay becomes the minimum delay",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c, "GenerateInitialClusterFile", returns(subreconcile.RequeueAfter(0, "cluster file written")))
			},
			wantCalls:     []string{"GenerateInitialClusterFile"},
			wantAfter:     subreconcile.DefaultMinDelay,
			wantMessages:  []string{"cluster file written"},
			wantStoppedAt: "GenerateInitialClusterFile",
			wantActed:     []string{"GenerateInitialClusterFile"},
			wantEvents:    []event{{"Normal", "ReconciliationTerminatedEarly", "GenerateInitialClusterFile: cluster file written"}},
		},
		{
			name: "configured minimum delay",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c, "AddPods", returns(subreconcile.DelayedRequeueAfter(0, "soon")))
			},
			cfg:          func(c *subreconcile.Config[*Database, *loopState]) { c.MinDelay = 2 * time.Second },
			wantCalls:    []string{"AddPods"},
			wantAfter:    2 * time.Second,
			wantMessages: []string{"soon"},
			wantActed:    []string{"AddPods"},
		},
		{
			name: "a step that only acted is reported and does not requeue",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"AddPVCs", dbFunc(func(_ context.Context, _ *Database, loop dbLoop) *subreconcile.Requeue {
						loop.Acted("created pvc orders-storage-1")
						return nil
					}),
					"AddPods", nil)
			},
			wantCalls:     []string{"AddPVCs", "AddPods"},
			wantActed:     []string{"AddPVCs"},
			wantReconcile: true,
			wantEvents:    []event{{"Normal", "ReconciliationComplete", "Reconciled generation 4"}},
		},
		{
			name: "generation not reconciled after the chain: requeue after the default delay",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c, "UpdateStatus", nil)
			},
			cfg: func(c *subreconcile.Config[*Database, *loopState]) {
				c.Generations = databaseGenerations
			},
			wantCalls:    []string{"UpdateStatus"},
			wantAfter:    subreconcile.DefaultNotReconciledDelay,
			wantMessages: []string{"generation 4 is not reconciled yet (reconciled=0)"},
		},
		{
			name: "generation not reconciled, check turned off: no requeue",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c, "UpdateStatus", nil)
			},
			cfg: func(c *subreconcile.Config[*Database, *loopState]) {
				c.Generations = databaseGenerations
				c.NotReconciledDelay = -1
			},
			wantCalls: []string{"UpdateStatus"},
		},
		{
			name: "generation not reconciled but a step asked for a delay: that delay wins",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c, "AddPods", returns(subreconcile.DelayedRequeueAfter(time.Minute, "pods pending")))
			},
			cfg: func(c *subreconcile.Config[*Database, *loopState]) {
				c.Generations = databaseGenerations
			},
			wantCalls:    []string{"AddPods"},
			wantAfter:    time.Minute,
			wantMessages: []string{"pods pending"},
			wantActed:    []string{"AddPods"},
		},
		{
			name: "final UpdateStatus marks the generation reconciled: completion event",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c, "UpdateStatus", dbFunc(func(_ context.Context, db *Database, loop dbLoop) *subreconcile.Requeue {
					db.Status.Generations.MarkReconciled(loop.Generation())
					return nil
				}))
			},
			cfg: func(c *subreconcile.Config[*Database, *loopState]) {
				c.Generations = databaseGenerations
			},
			wantCalls:     []string{"UpdateStatus"},
			wantReconcile: true,
			wantEvents:    []event{{"Normal", "ReconciliationComplete", "Reconciled generation 4"}},
		},
		{
			name: "reconciled with pending removal: reconciled and still requeued, as documented",
			steps: func(c *[]string, _ context.CancelFunc) []dbStep {
				return chain(c,
					"RemoveProcessGroups", dbFunc(func(_ context.Context, db *Database, loop dbLoop) *subreconcile.Requeue {
						db.Status.Generations.MarkReconciledWithPendingRemoval(loop.Generation())
						return subreconcile.DelayedRequeueAfter(time.Minute, "pods still terminating")
					}),
					"UpdateStatus", nil)
			},
			cfg: func(c *subreconcile.Config[*Database, *loopState]) {
				c.Generations = databaseGenerations
			},
			wantCalls:     []string{"RemoveProcessGroups", "UpdateStatus"},
			wantAfter:     time.Minute,
			wantMessages:  []string{"pods still terminating"},
			wantActed:     []string{"RemoveProcessGroups"},
			wantReconcile: true,
			wantEvents:    []event{{"Normal", "ReconciliationComplete", "Reconciled generation 4 (removals still pending)"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var calls []string
			var events []event
			cfg := subreconcile.Config[*Database, *loopState]{
				Name:     "Database",
				Steps:    tt.steps(&calls, cancel),
				Recorder: eventSink(&events),
				Clock:    clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)),
			}
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			r, err := subreconcile.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			out := r.Run(ctx, newDatabase(4))

			if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
				t.Errorf("steps called (-want +got):\n%s", diff)
			}
			if out.Ran != len(tt.wantCalls) {
				t.Errorf("Ran = %d, want %d", out.Ran, len(tt.wantCalls))
			}
			if out.RequeueAfter != tt.wantAfter {
				t.Errorf("RequeueAfter = %v, want %v", out.RequeueAfter, tt.wantAfter)
			}
			if len(tt.wantErrIs) == 0 && out.Err != nil {
				t.Errorf("Err = %v, want nil", out.Err)
			}
			for _, target := range tt.wantErrIs {
				if !errors.Is(out.Err, target) {
					t.Errorf("Err = %v, want errors.Is(%v)", out.Err, target)
				}
			}
			for _, text := range tt.wantErrText {
				if out.Err == nil || !strings.Contains(out.Err.Error(), text) {
					t.Errorf("Err = %v, want it to contain %q", out.Err, text)
				}
			}
			if diff := cmp.Diff(tt.wantMessages, out.Messages); diff != "" {
				t.Errorf("Messages (-want +got):\n%s", diff)
			}
			if out.StoppedAt != tt.wantStoppedAt {
				t.Errorf("StoppedAt = %q, want %q", out.StoppedAt, tt.wantStoppedAt)
			}
			var acted []string
			for _, a := range out.Acted {
				acted = append(acted, a.Name)
			}
			if diff := cmp.Diff(tt.wantActed, acted); diff != "" {
				t.Errorf("Acted (-want +got):\n%s", diff)
			}
			if out.Reconciled != tt.wantReconcile {
				t.Errorf("Reconciled = %v, want %v", out.Reconciled, tt.wantReconcile)
			}
			if out.Terminal() != tt.wantTerminal {
				t.Errorf("Terminal() = %v, want %v", out.Terminal(), tt.wantTerminal)
			}
			if diff := cmp.Diff(tt.wantEvents, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}

			// The (duration, error) pair agrees with the outcome.
			after, err := out.Result()
			if err != out.Err {
				t.Errorf("Result() error = %v, want %v", err, out.Err)
			}
			if out.Err != nil && after != 0 {
				t.Errorf("Result() = %v with an error, want 0", after)
			}
			if out.Err == nil && after != tt.wantAfter {
				t.Errorf("Result() = %v, want %v", after, tt.wantAfter)
			}
			wantRequeue := tt.wantAfter > 0 || (out.Err != nil && !tt.wantTerminal)
			if out.Requeue() != wantRequeue {
				t.Errorf("Requeue() = %v, want %v", out.Requeue(), wantRequeue)
			}
		})
	}
}

func TestRunCompletionEventOnlyOnTransition(t *testing.T) {
	var events []event
	r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name: "Database",
		Steps: []dbStep{subreconcile.NamedFunc("UpdateStatus", func(_ context.Context, db *Database, loop dbLoop) *subreconcile.Requeue {
			db.Status.Generations.MarkReconciled(loop.Generation())
			return nil
		})},
		Generations: databaseGenerations,
		Recorder:    eventSink(&events),
	})
	if err != nil {
		t.Fatal(err)
	}
	db := newDatabase(2)
	for range 3 {
		if out := r.Run(t.Context(), db); !out.Reconciled || out.Requeue() {
			t.Fatalf("loop: Reconciled=%v Requeue=%v, want reconciled without requeue", out.Reconciled, out.Requeue())
		}
	}
	db.Generation = 3
	r.Run(t.Context(), db)
	want := []event{
		{"Normal", "ReconciliationComplete", "Reconciled generation 2"},
		{"Normal", "ReconciliationComplete", "Reconciled generation 3"},
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestRunState(t *testing.T) {
	for _, tt := range []struct {
		name      string
		fresh     bool
		wantIDs   []int
		wantBuilt int
	}{
		{name: "cached: built once per loop, every step sees the same state", wantIDs: []int{1, 1, 1}, wantBuilt: 1},
		{name: "caching off: built before every step", fresh: true, wantIDs: []int{1, 2, 3}, wantBuilt: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			built := 0
			var seen []int
			see := func(_ context.Context, _ *Database, loop dbLoop) *subreconcile.Requeue {
				seen = append(seen, loop.State().id)
				return nil
			}
			r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
				Name:  "Database",
				Steps: []dbStep{subreconcile.NamedFunc("A", see), subreconcile.NamedFunc("B", see), subreconcile.NamedFunc("C", see)},
				NewState: func(context.Context, *Database) (*loopState, error) {
					built++
					return &loopState{id: built}, nil
				},
				FreshStatePerStep: tt.fresh,
			})
			if err != nil {
				t.Fatal(err)
			}
			if out := r.Run(t.Context(), newDatabase(1)); out.Err != nil {
				t.Fatal(out.Err)
			}
			if diff := cmp.Diff(tt.wantIDs, seen); diff != "" {
				t.Errorf("state seen by steps (-want +got):\n%s", diff)
			}
			if built != tt.wantBuilt {
				t.Errorf("NewState called %d times, want %d", built, tt.wantBuilt)
			}
		})
	}
}

func TestRunStateError(t *testing.T) {
	errStatus := errors.New("status unavailable")
	for _, tt := range []struct {
		name      string
		fresh     bool
		wantCalls []string
		wantText  string
	}{
		{name: "cached state fails: no step runs", wantText: "subreconcile: building loop state: status unavailable"},
		{name: "fresh state fails before the second step", fresh: true, wantCalls: []string{"A"},
			wantText: `subreconciler "B": building state: status unavailable`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			var events []event
			n := 0
			r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
				Name:  "Database",
				Steps: chain(&calls, "A", nil, "B", nil),
				NewState: func(context.Context, *Database) (*loopState, error) {
					n++
					if tt.fresh && n == 1 {
						return &loopState{}, nil
					}
					return nil, errStatus
				},
				FreshStatePerStep: tt.fresh,
				Recorder:          eventSink(&events),
			})
			if err != nil {
				t.Fatal(err)
			}
			out := r.Run(t.Context(), newDatabase(1))
			if !errors.Is(out.Err, errStatus) || out.Err.Error() != tt.wantText {
				t.Errorf("Err = %v, want %q", out.Err, tt.wantText)
			}
			if diff := cmp.Diff(tt.wantCalls, calls); diff != "" {
				t.Errorf("steps called (-want +got):\n%s", diff)
			}
			if len(events) != 1 || events[0].Reason != subreconcile.ReasonTerminatedEarly || events[0].Type != "Warning" {
				t.Errorf("events = %v, want one Warning %s", events, subreconcile.ReasonTerminatedEarly)
			}
		})
	}
}

func TestRunHandsEveryStepTheNormalizedSpec(t *testing.T) {
	var seen []DatabaseSpec
	look := func(_ context.Context, db *Database, _ dbLoop) *subreconcile.Requeue {
		spec := db.Spec
		spec.Labels = maps.Clone(db.Spec.Labels)
		seen = append(seen, spec)
		// A careless step changes the spec and the status.
		db.Spec.Replicas = 99
		db.Spec.Labels["tampered"] = "yes"
		db.Status.Replicas++
		return nil
	}
	r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name:  "Database",
		Steps: []dbStep{subreconcile.NamedFunc("A", look), subreconcile.NamedFunc("B", look)},
		Normalize: func(db *Database) error {
			if db.Spec.Version == "" {
				return errors.New("spec.version is required")
			}
			db.Spec.Labels = map[string]string{"app": "db"}
			return nil
		},
		RestoreSpec: func(db, normalized *Database) {
			db.Spec = normalized.Spec
			db.Spec.Labels = maps.Clone(normalized.Spec.Labels)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	db := newDatabase(1)
	if out := r.Run(t.Context(), db); out.Err != nil {
		t.Fatal(out.Err)
	}
	want := DatabaseSpec{Replicas: 3, Version: "7.3", Labels: map[string]string{"app": "db"}}
	if diff := cmp.Diff([]DatabaseSpec{want, want}, seen); diff != "" {
		t.Errorf("spec seen by steps (-want +got):\n%s", diff)
	}
	if db.Status.Replicas != 2 {
		t.Errorf("status.replicas = %d, want 2: status changes must carry over between steps", db.Status.Replicas)
	}

	bad := newDatabase(1)
	bad.Spec.Version = ""
	out := r.Run(t.Context(), bad)
	if out.Err == nil || out.Err.Error() != "subreconcile: normalizing: spec.version is required" || out.Ran != 0 {
		t.Errorf("Run(invalid) = Err %v, Ran %d; want the normalize error and no step run", out.Err, out.Ran)
	}
}

// logLine is one JSON line written by funcr.
type logLine map[string]any

func captureLogs(t *testing.T, verbosity int) (context.Context, *[]logLine) {
	var lines []logLine
	logger := funcr.NewJSON(func(obj string) {
		var l logLine
		if err := json.Unmarshal([]byte(obj), &l); err != nil {
			t.Errorf("log line %q: %v", obj, err)
		}
		lines = append(lines, l)
	}, funcr.Options{Verbosity: verbosity})
	return logr.NewContext(t.Context(), logger), &lines
}

func TestRunLogsOneLinePerStepThatDidSomething(t *testing.T) {
	ctx, lines := captureLogs(t, 0)
	var calls []string
	r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name: "Database",
		Steps: chain(&calls,
			"UpdateStatus", nil,
			"AddPVCs", dbFunc(func(_ context.Context, _ *Database, loop dbLoop) *subreconcile.Requeue {
				loop.Logger().Info("creating claim", "claim", "orders-storage-1")
				loop.Acted("created orders-storage-1")
				return nil
			}),
			"AddPods", nil,
			"UpdatePodConfig", returns(subreconcile.DelayedRequeueOnError(errDisk)),
			"ChangeCoordinators", returns(subreconcile.RequeueAfter(time.Second, "lock busy")),
			"UpdateStatusAgain", nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := r.Run(ctx, newDatabase(1))

	type summary struct{ Msg, Step string }
	var got []summary
	trace := out.TraceID.String()
	for _, l := range *lines {
		if l["traceID"] != trace {
			t.Errorf("log line %v: traceID = %v, want %v", l, l["traceID"], trace)
		}
		if l["chain"] != "Database" {
			t.Errorf("log line %v: chain = %v, want Database", l, l["chain"])
		}
		step, _ := l["subreconciler"].(string)
		got = append(got, summary{l["msg"].(string), step})
	}
	want := []summary{
		{"creating claim", "AddPVCs"},
		{"Subreconciler acted", "AddPVCs"},
		{"Subreconciler failed", "UpdatePodConfig"},
		{"Subreconciler requested requeue", "ChangeCoordinators"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
	if a := (*lines)[1]["actions"]; fmt.Sprint(a) != "[created orders-storage-1]" {
		t.Errorf("actions logged = %v", a)
	}
}

func TestRunTraceIDDiffersPerLoop(t *testing.T) {
	r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name:  "Database",
		Steps: []dbStep{subreconcile.NamedFunc("A", func(context.Context, *Database, dbLoop) *subreconcile.Requeue { return nil })},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.Run(t.Context(), newDatabase(1)), r.Run(t.Context(), newDatabase(1))
	if a.TraceID == b.TraceID {
		t.Errorf("two loops share trace ID %v", a.TraceID)
	}
	if s := a.TraceID.String(); len(s) != 16 || strings.Trim(s, "0123456789abcdef") != "" {
		t.Errorf("TraceID.String() = %q, want 16 hex digits", s)
	}
	if got := subreconcile.TraceID(0xabc).String(); got != "0000000000000abc" {
		t.Errorf("TraceID(0xabc).String() = %q", got)
	}
}

func TestRunStepDurationsUseTheInjectedClock(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	slow := func(d time.Duration) dbFunc {
		return func(_ context.Context, _ *Database, loop dbLoop) *subreconcile.Requeue {
			clk.SetTime(loop.Clock().Now().Add(d))
			loop.Acted("waited")
			return nil
		}
	}
	var calls []string
	r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name:  "Database",
		Steps: chain(&calls, "A", slow(3*time.Second), "B", slow(250*time.Millisecond)),
		Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	out := r.Run(t.Context(), newDatabase(1))
	var got []time.Duration
	for _, a := range out.Acted {
		got = append(got, a.Duration)
	}
	if diff := cmp.Diff([]time.Duration{3 * time.Second, 250 * time.Millisecond}, got); diff != "" {
		t.Errorf("step durations (-want +got):\n%s", diff)
	}
}

func TestRunConcurrentLoops(t *testing.T) {
	r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name: "Database",
		Steps: []dbStep{
			subreconcile.NamedFunc("A", func(_ context.Context, db *Database, loop dbLoop) *subreconcile.Requeue {
				loop.Acted(db.Name)
				return nil
			}),
			subreconcile.NamedFunc("B", func(_ context.Context, db *Database, loop dbLoop) *subreconcile.Requeue {
				loop.Acted(db.Name + " again")
				return nil
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for i := range 8 {
		go func() {
			var err error
			for range 200 {
				db := newDatabase(1)
				db.Name = fmt.Sprintf("db-%d", i)
				out := r.Run(context.Background(), db)
				if len(out.Acted) != 2 || out.Acted[0].Actions[0] != db.Name || out.Acted[1].Actions[0] != db.Name+" again" || len(out.Acted[1].Actions) != 1 {
					err = fmt.Errorf("loop over %s reported %+v", db.Name, out.Acted)
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	noop := subreconcile.NamedFunc("A", func(context.Context, *Database, dbLoop) *subreconcile.Requeue { return nil })
	for _, tt := range []struct {
		name string
		cfg  subreconcile.Config[*Database, *loopState]
		want string
	}{
		{"no name", subreconcile.Config[*Database, *loopState]{Steps: []dbStep{noop}}, "subreconcile: invalid configuration: Config.Name is empty"},
		{"no steps", subreconcile.Config[*Database, *loopState]{Name: "Database"}, "subreconcile: invalid configuration: Config.Steps is empty"},
		{"unnamed step", subreconcile.Config[*Database, *loopState]{Name: "Database", Steps: []dbStep{noop, {Step: noop.Step}}},
			"subreconcile: invalid configuration: Config.Steps[1].Name is empty"},
		{"nil step", subreconcile.Config[*Database, *loopState]{Name: "Database", Steps: []dbStep{{Name: "AddPods"}}},
			`subreconcile: invalid configuration: Config.Steps[0].Step ("AddPods") is nil`},
		{"nil func", subreconcile.Config[*Database, *loopState]{Name: "Database", Steps: []dbStep{{Name: "AddPods", Step: subreconcile.Func[*Database, *loopState](nil)}}},
			`subreconcile: invalid configuration: Config.Steps[0].Step ("AddPods") is a nil Func`},
		{"negative minimum delay", subreconcile.Config[*Database, *loopState]{Name: "Database", Steps: []dbStep{noop}, MinDelay: -time.Second},
			"subreconcile: invalid configuration: Config.MinDelay = -1s: must not be negative (a requeue must never become no requeue)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := subreconcile.New(tt.cfg)
			if err == nil || err.Error() != tt.want {
				t.Errorf("New() = %v, %v; want error %q", r, err, tt.want)
			}
			// Every configuration error wraps ErrInvalidConfig: the nil
			// Func and the negative MinDelay did not.
			if !errors.Is(err, subreconcile.ErrInvalidConfig) {
				t.Errorf("New() error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

func TestZeroLoopIsUsable(t *testing.T) {
	var loop subreconcile.Loop[*loopState]
	loop.Acted("nothing to record into")
	loop.Logger().Info("discarded")
	if loop.Clock() == nil || loop.State() != nil || loop.Step() != "" {
		t.Errorf("zero Loop: Clock %v, State %v, Step %q", loop.Clock(), loop.State(), loop.Step())
	}
}

func TestTerminal(t *testing.T) {
	if subreconcile.Terminal(nil) != nil {
		t.Error("Terminal(nil) != nil")
	}
	err := subreconcile.Terminal(errDisk)
	if !errors.Is(err, subreconcile.ErrTerminal) || !errors.Is(err, errDisk) || !subreconcile.IsTerminal(fmt.Errorf("wrapped: %w", err)) {
		t.Errorf("Terminal(errDisk) = %v: does not match ErrTerminal and errDisk", err)
	}
	if subreconcile.IsTerminal(errDisk) {
		t.Error("IsTerminal(errDisk) = true")
	}
}

// A join is terminal only when every part is: a terminal error joined with
// a retryable one was terminal before, so the retryable failure was never
// retried (Enqueue forgot the key).
func TestJoinedErrorIsTerminalOnlyWhenEveryPartIs(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"terminal joined with retryable", errors.Join(subreconcile.Terminal(errDisk), errQuorum), false},
		{"retryable joined with terminal", errors.Join(errQuorum, subreconcile.Terminal(errDisk)), false},
		{"two terminal parts", errors.Join(subreconcile.Terminal(errDisk), subreconcile.Terminal(errQuorum)), true},
		{"a wrapped join", fmt.Errorf("step: %w", errors.Join(subreconcile.Terminal(errDisk), errQuorum)), false},
		{"a join of wrapped terminal parts", errors.Join(fmt.Errorf("a: %w", subreconcile.Terminal(errDisk)), subreconcile.Terminal(errQuorum)), true},
		{"several %w, one retryable", fmt.Errorf("%w and %w", subreconcile.Terminal(errDisk), errQuorum), false},
		{"terminal wrapping a join", subreconcile.Terminal(errors.Join(errDisk, errQuorum)), true},
		{"ErrTerminal itself", subreconcile.ErrTerminal, true},
	} {
		if got := subreconcile.IsTerminal(tc.err); got != tc.want {
			t.Errorf("%s: IsTerminal(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
		if got := (subreconcile.Outcome{Err: tc.err}).Terminal(); got != tc.want {
			t.Errorf("%s: Outcome.Terminal() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPanicWithErrorValueUnwraps(t *testing.T) {
	r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name: "Database",
		Steps: []dbStep{subreconcile.NamedFunc("A", func(context.Context, *Database, dbLoop) *subreconcile.Requeue {
			panic(errQuorum)
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := r.Run(t.Context(), newDatabase(1))
	if !errors.Is(out.Err, subreconcile.ErrPanic) || !errors.Is(out.Err, errQuorum) {
		t.Errorf("Err = %v, want ErrPanic wrapping errQuorum", out.Err)
	}
}
