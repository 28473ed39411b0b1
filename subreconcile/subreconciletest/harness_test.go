package subreconciletest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
	"github.com/groundskeeper-io/groundskeeper/subreconcile/subreconciletest"
)

// Cache is a small custom resource: a cache with a number of replicas.
type Cache struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Spec   CacheSpec
	Status CacheStatus
}

type CacheSpec struct{ Replicas int }

type CacheStatus struct {
	Replicas    int
	Generations subreconcile.Generations
}

func (c *Cache) DeepCopy() *Cache {
	out := *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

func (c *Cache) DeepCopyObject() runtime.Object { return c.DeepCopy() }

type cacheLoop = subreconcile.Loop[struct{}]

// scaleChain adds one replica per loop and waits a simulated 10 seconds for
// it to start; UpdateStatus marks the generation reconciled when the
// replicas match.
func scaleChain() subreconcile.Config[*Cache, struct{}] {
	return subreconcile.Config[*Cache, struct{}]{
		Name: "Cache",
		Steps: []subreconcile.Named[*Cache, struct{}]{
			subreconcile.NamedFunc("CheckSpec", func(_ context.Context, c *Cache, _ cacheLoop) *subreconcile.Requeue {
				if c.Spec.Replicas < 0 {
					return subreconcile.RequeueOnError(subreconcile.Terminal(fmt.Errorf("spec.replicas: %d is negative", c.Spec.Replicas)))
				}
				return nil
			}),
			subreconcile.NamedFunc("AddReplicas", func(_ context.Context, c *Cache, loop cacheLoop) *subreconcile.Requeue {
				if c.Status.Replicas >= c.Spec.Replicas {
					return nil
				}
				c.Status.Replicas++
				loop.Acted(fmt.Sprintf("started replica %d", c.Status.Replicas))
				return subreconcile.RequeueAfter(10*time.Second, "waiting for replica to start")
			}),
			subreconcile.NamedFunc("UpdateStatus", func(_ context.Context, c *Cache, loop cacheLoop) *subreconcile.Requeue {
				if c.Status.Replicas == c.Spec.Replicas && !c.Status.Generations.IsReconciled(loop.Generation()) {
					c.Status.Generations.MarkReconciled(loop.Generation())
					loop.Acted("marked reconciled")
				}
				return nil
			}),
		},
		Generations: func(c *Cache) *subreconcile.Generations { return &c.Status.Generations },
	}
}

func newCache(replicas int) *Cache {
	return &Cache{
		ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: "web", Generation: 1},
		Spec:       CacheSpec{Replicas: replicas},
	}
}

func TestHarnessDrivesAChainLoopByLoop(t *testing.T) {
	h := subreconciletest.New(t, scaleChain())
	c := newCache(2)

	h.Run(c).
		ExpectRan("CheckSpec", "AddReplicas").
		ExpectActed("AddReplicas").
		ExpectActions("AddReplicas", "started replica 1").
		ExpectStoppedAt("AddReplicas").
		ExpectMessages("waiting for replica to start").
		ExpectRequeueAfter(10 * time.Second).
		ExpectReconciled(false).
		ExpectEvents(subreconcile.ReasonTerminatedEarly)

	h.Clock.Step(10 * time.Second)
	h.Run(c).ExpectActed("AddReplicas").ExpectActions("AddReplicas", "started replica 2")

	h.Run(c).
		ExpectRan("CheckSpec", "AddReplicas", "UpdateStatus").
		ExpectActed("UpdateStatus").
		ExpectStoppedAt("").
		ExpectNoRequeue().
		ExpectReconciled(true).
		ExpectEvents(subreconcile.ReasonComplete)

	// Nothing left to do.
	h.Run(c).ExpectActed().ExpectNoRequeue().ExpectEvents()

	c.Spec.Replicas = -1
	c.Generation = 2
	r := h.Run(c).
		ExpectActed("CheckSpec").
		ExpectError(subreconcile.ErrTerminal).
		ExpectErrorContaining(`subreconciler "CheckSpec": terminal error: spec.replicas: -1 is negative`).
		ExpectEvents(subreconcile.ReasonTerminatedEarly)
	if r.Events[0].Type != subreconcile.EventTypeWarning || r.Events[0].Object != c {
		t.Errorf("event = %+v, want a Warning about the cache", r.Events[0])
	}
}

func TestHarnessRecordsMetricsOnItsRegistry(t *testing.T) {
	h := subreconciletest.New(t, scaleChain())
	c := newCache(1)
	h.Run(c).ExpectActed("AddReplicas")
	h.Run(c).ExpectActed("UpdateStatus")

	families, err := h.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName() + labels(m)
			switch {
			case m.GetHistogram() != nil:
				got[key] = m.GetHistogram().GetSampleCount()
			case m.GetCounter() != nil:
				got[key] = uint64(m.GetCounter().GetValue())
			}
		}
	}
	want := map[string]uint64{
		"subreconcile_step_duration_seconds{chain=Cache,step=CheckSpec}":             2,
		"subreconcile_step_duration_seconds{chain=Cache,step=AddReplicas}":           2,
		"subreconcile_step_duration_seconds{chain=Cache,step=UpdateStatus}":          1,
		"subreconcile_requeues_total{chain=Cache,reason=immediate,step=AddReplicas}": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}

func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// recordingT catches the harness's complaints instead of failing the test.
type recordingT struct {
	testing.TB
	complaints []string
}

func (r *recordingT) Helper() {}
func (r *recordingT) Errorf(format string, args ...any) {
	r.complaints = append(r.complaints, fmt.Sprintf(format, args...))
}

func TestHarnessExpectationsCatchMismatches(t *testing.T) {
	rt := &recordingT{TB: t}
	h := subreconciletest.New(rt, scaleChain())
	h.Run(newCache(1)).
		ExpectActed("UpdateStatus").               // AddReplicas acted
		ExpectRan("CheckSpec").                    // two ran
		ExpectActions("AddReplicas", "whatever").  // wrong description
		ExpectActions("UpdateStatus").             // did not act
		ExpectRequeueAfter(time.Minute).           // 10s
		ExpectNoRequeue().                         // it requeues
		ExpectError(subreconcile.ErrTerminal).     // no error
		ExpectErrorContaining("boom").             // no error
		ExpectStoppedAt("").                       // stopped at AddReplicas
		ExpectMessages().                          // one message
		ExpectReconciled(true).                    // not yet
		ExpectEvents(subreconcile.ReasonComplete). // terminated early
		ExpectActed("AddReplicas")                 // right: no complaint

	want := []string{
		"steps that acted",
		"steps that ran",
		"actions of AddReplicas",
		"step UpdateStatus did not act",
		"requeue after = 10s, want 1m0s",
		"loop = (requeue after 10s, error <nil>), want neither",
		"loop error = <nil>, want one matching subreconcile: terminal error",
		`loop error = <nil>, want one containing "boom"`,
		`stopped at "AddReplicas", want ""`,
		"requeue messages",
		"reconciled = false, want true",
		"event reasons",
	}
	if len(rt.complaints) != len(want) {
		t.Fatalf("got %d complaints, want %d:\n%s", len(rt.complaints), len(want), strings.Join(rt.complaints, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(rt.complaints[i], w) {
			t.Errorf("complaint %d = %q, want it to start with %q", i, rt.complaints[i], w)
		}
	}
}

func TestHarnessKeepsTheConfigsOwnRecorder(t *testing.T) {
	var got []string
	cfg := scaleChain()
	cfg.Recorder = subreconcile.EventFunc(func(_ runtime.Object, _, reason, _ string) { got = append(got, reason) })
	h := subreconciletest.New(t, cfg)
	r := h.Run(newCache(0))
	if len(r.Events) != 0 || !cmp.Equal(got, []string{subreconcile.ReasonComplete}) {
		t.Errorf("harness events %v, own recorder %v; want the own recorder to get the completion event", r.Events, got)
	}
}

func TestHarnessFailsOnBadConfig(t *testing.T) {
	rt := &fatalT{TB: t}
	func() {
		defer func() { _ = recover() }()
		subreconciletest.New(rt, subreconcile.Config[*Cache, struct{}]{Name: "Cache"})
	}()
	if !errors.Is(rt.err, errFatal) || !strings.Contains(rt.msg, "Config.Steps is empty") {
		t.Errorf("New with no steps: fatal %q", rt.msg)
	}
}

var errFatal = errors.New("fatal")

type fatalT struct {
	testing.TB
	msg string
	err error
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	f.err = errFatal
	panic(errFatal) // stands in for runtime.Goexit
}

// rollout is the per-loop state of TestHarnessOneStepWithState.
type rollout struct{ ready int }

func TestHarnessOneStepWithState(t *testing.T) {
	ready := 0
	h := subreconciletest.New(t, subreconcile.Config[*Cache, *rollout]{
		Name: "Cache",
		Steps: []subreconcile.Named[*Cache, *rollout]{
			subreconcile.NamedFunc("WaitForReady", func(_ context.Context, c *Cache, loop subreconcile.Loop[*rollout]) *subreconcile.Requeue {
				if loop.State().ready < c.Spec.Replicas {
					return subreconcile.DelayedRequeueAfter(5*time.Second, fmt.Sprintf("%d of %d ready", loop.State().ready, c.Spec.Replicas))
				}
				return nil
			}),
		},
		NewState: func(context.Context, *Cache) (*rollout, error) { return &rollout{ready: ready}, nil },
	})
	c := newCache(2)
	h.Run(c).ExpectActed("WaitForReady").ExpectMessages("0 of 2 ready").ExpectRequeueAfter(5 * time.Second)
	ready = 2
	h.Run(c).ExpectActed().ExpectNoRequeue().ExpectReconciled(true)
}
