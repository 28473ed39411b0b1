package subreconciletest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// Epoch is the fake clock's starting time.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Harness runs one chain in a test.
type Harness[T subreconcile.Object[T], S any] struct {
	// Runner is the runner under test.
	Runner *subreconcile.Runner[T, S]
	// Clock is the runner's clock unless the Config brought its own; step
	// it to simulate time passing between loops.
	Clock *clocktesting.FakeClock
	// Events records the runner's events unless the Config brought its own
	// recorder; Run moves each loop's events into Result.Events.
	Events *Events
	// Registry holds the runner's metrics unless the Config brought its own
	// Metrics.
	Registry *prometheus.Registry

	t testing.TB
}

// New builds a runner from cfg, filling in what the Config leaves nil: the
// clock (a fake one at Epoch), the event recorder (h.Events) and the metrics
// (on h.Registry). An invalid Config fails the test.
func New[T subreconcile.Object[T], S any](t testing.TB, cfg subreconcile.Config[T, S]) *Harness[T, S] {
	t.Helper()
	h := &Harness[T, S]{
		Clock:    clocktesting.NewFakeClock(Epoch),
		Events:   &Events{},
		Registry: prometheus.NewRegistry(),
		t:        t,
	}
	if cfg.Clock == nil {
		cfg.Clock = h.Clock
	}
	if cfg.Recorder == nil {
		cfg.Recorder = h.Events
	}
	if cfg.Metrics == nil {
		m, err := subreconcile.NewMetrics(subreconcile.MetricsConfig{Registerer: h.Registry})
		if err != nil {
			t.Fatalf("subreconciletest: %v", err)
		}
		cfg.Metrics = m
	}
	r, err := subreconcile.New(cfg)
	if err != nil {
		t.Fatalf("subreconciletest: %v", err)
	}
	h.Runner = r
	return h
}

// Run runs one loop over obj, logging to the test, and returns what happened.
func (h *Harness[T, S]) Run(obj T) Result {
	h.t.Helper()
	ctx := logr.NewContext(h.t.Context(), testr.NewWithInterface(h.t, testr.Options{}))
	h.Events.Take() // only this loop's events
	out := h.Runner.Run(ctx, obj)
	names := h.Runner.Steps()
	return Result{
		Outcome: out,
		Ran:     names[:out.Ran],
		Events:  h.Events.Take(),
		t:       h.t,
	}
}

// Result is one loop's outcome plus what the harness observed.
type Result struct {
	subreconcile.Outcome

	// Ran lists the steps that were started, in order.
	Ran []string
	// Events lists the events recorded during the loop, when the harness
	// records them.
	Events []Event

	t testing.TB
}

// ActedNames returns the names of the steps that acted or asked for a
// requeue, in order.
func (r Result) ActedNames() []string {
	names := []string{}
	for _, a := range r.Acted {
		names = append(names, a.Name)
	}
	return names
}

// ExpectActed checks that exactly these steps acted or asked for a requeue,
// in this order. No names means no step did anything.
func (r Result) ExpectActed(names ...string) Result {
	r.t.Helper()
	if names == nil {
		names = []string{}
	}
	if diff := cmp.Diff(names, r.ActedNames()); diff != "" {
		r.t.Errorf("steps that acted (-want +got):\n%s", diff)
	}
	return r
}

// ExpectRan checks that exactly these steps were started, in this order.
func (r Result) ExpectRan(names ...string) Result {
	r.t.Helper()
	if names == nil {
		names = []string{}
	}
	if diff := cmp.Diff(names, r.Ran); diff != "" {
		r.t.Errorf("steps that ran (-want +got):\n%s", diff)
	}
	return r
}

// ExpectActions checks the Loop.Acted descriptions of step name (the first
// report of that name).
func (r Result) ExpectActions(name string, actions ...string) Result {
	r.t.Helper()
	for _, a := range r.Acted {
		if a.Name == name {
			if diff := cmp.Diff(actions, a.Actions); diff != "" {
				r.t.Errorf("actions of %s (-want +got):\n%s", name, diff)
			}
			return r
		}
	}
	r.t.Errorf("step %s did not act; acted: %v", name, r.ActedNames())
	return r
}

// ExpectRequeueAfter checks that the loop ended without error and asks to be
// requeued after d.
func (r Result) ExpectRequeueAfter(d time.Duration) Result {
	r.t.Helper()
	if r.Err != nil {
		r.t.Errorf("loop error = %v, want a requeue after %v", r.Err, d)
	} else if r.RequeueAfter != d {
		r.t.Errorf("requeue after = %v, want %v (messages: %q)", r.RequeueAfter, d, r.Messages)
	}
	return r
}

// ExpectNoRequeue checks that the loop ended without error or requeue.
func (r Result) ExpectNoRequeue() Result {
	r.t.Helper()
	if r.Err != nil || r.RequeueAfter != 0 {
		r.t.Errorf("loop = (requeue after %v, error %v), want neither (messages: %q)", r.RequeueAfter, r.Err, r.Messages)
	}
	return r
}

// ExpectError checks that the loop's error matches target with errors.Is.
func (r Result) ExpectError(target error) Result {
	r.t.Helper()
	if !errors.Is(r.Err, target) {
		r.t.Errorf("loop error = %v, want one matching %v", r.Err, target)
	}
	return r
}

// ExpectErrorContaining checks that the loop's error text contains substr,
// for the step name the runner wraps errors with.
func (r Result) ExpectErrorContaining(substr string) Result {
	r.t.Helper()
	if r.Err == nil || !strings.Contains(r.Err.Error(), substr) {
		r.t.Errorf("loop error = %v, want one containing %q", r.Err, substr)
	}
	return r
}

// ExpectStoppedAt checks which step ended the loop early; "" means the whole
// chain ran.
func (r Result) ExpectStoppedAt(name string) Result {
	r.t.Helper()
	if r.StoppedAt != name {
		r.t.Errorf("stopped at %q, want %q", r.StoppedAt, name)
	}
	return r
}

// ExpectMessages checks the requeue messages, in step order.
func (r Result) ExpectMessages(messages ...string) Result {
	r.t.Helper()
	if diff := cmp.Diff(messages, r.Messages); diff != "" {
		r.t.Errorf("requeue messages (-want +got):\n%s", diff)
	}
	return r
}

// ExpectReconciled checks Outcome.Reconciled.
func (r Result) ExpectReconciled(want bool) Result {
	r.t.Helper()
	if r.Reconciled != want {
		r.t.Errorf("reconciled = %v, want %v", r.Reconciled, want)
	}
	return r
}

// ExpectEvents checks the events recorded during the loop by reason, in
// order; see Events for the full events.
func (r Result) ExpectEvents(reasons ...string) Result {
	r.t.Helper()
	got := []string{}
	for _, e := range r.Events {
		got = append(got, e.Reason)
	}
	if reasons == nil {
		reasons = []string{}
	}
	if diff := cmp.Diff(reasons, got); diff != "" {
		r.t.Errorf("event reasons (-want +got):\n%s", diff)
	}
	return r
}

// Event is one recorded event.
type Event struct {
	Type, Reason, Message string
	// Object is the resource the event is about, as passed to the
	// recorder.
	Object runtime.Object
}

func (e Event) String() string { return fmt.Sprintf("%s %s %s", e.Type, e.Reason, e.Message) }

// Events is an event recorder that keeps what it is given. It is safe for
// concurrent use.
type Events struct {
	mu     sync.Mutex
	events []Event
}

var _ subreconcile.EventRecorder = (*Events)(nil)

// Event records an event.
func (e *Events) Event(object runtime.Object, eventtype, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, Event{Type: eventtype, Reason: reason, Message: message, Object: object})
}

// Take returns the events recorded so far and forgets them.
func (e *Events) Take() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.events
	e.events = nil
	return out
}
