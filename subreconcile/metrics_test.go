package subreconcile_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

func TestNewMetrics(t *testing.T) {
	if _, err := subreconcile.NewMetrics(subreconcile.MetricsConfig{}); err == nil ||
		err.Error() != "subreconcile: invalid configuration: MetricsConfig.Registerer is nil" {
		t.Errorf("NewMetrics without registerer: %v", err)
	}

	// Two controllers in one process, each with its metrics on the
	// manager's registry, share the collectors.
	reg := prometheus.NewRegistry()
	first, err := subreconcile.NewMetrics(subreconcile.MetricsConfig{Registerer: reg, Namespace: "fdb"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := subreconcile.NewMetrics(subreconcile.MetricsConfig{Registerer: reg, Namespace: "fdb"})
	if err != nil {
		t.Fatalf("registering twice on one registry: %v, want the first's collectors shared", err)
	}
	for i, m := range []*subreconcile.Metrics{first, second} {
		runner, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
			Name: fmt.Sprintf("Chain%d", i),
			Steps: []dbStep{subreconcile.NamedFunc("S", func(context.Context, *Database, dbLoop) *subreconcile.Requeue {
				return subreconcile.RequeueAfter(0, "x")
			})},
			Metrics: m,
		})
		if err != nil {
			t.Fatal(err)
		}
		runner.Run(t.Context(), newDatabase(1))
	}
	if n := testutil.CollectAndCount(reg, "fdb_subreconcile_requeues_total"); n != 2 {
		t.Errorf("%d requeue series on the shared registry, want 2 (one per chain)", n)
	}

	// A metric of the same name with other labels is refused.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "fdb", Subsystem: "subreconcile", Name: "step_duration_seconds",
		Help: "Time taken by one step of a reconcile loop.",
	}, []string{"controller"}))
	_, err = subreconcile.NewMetrics(subreconcile.MetricsConfig{Registerer: other, Namespace: "fdb"})
	if err == nil || !strings.Contains(err.Error(), "registering step duration histogram") {
		t.Errorf("registering beside a histogram of other labels: %v, want a registration error", err)
	}
}

// TestMetricsCountRequeuesByKind checks the counter labels for every kind of
// requeue, and that nothing lands on the global registry.
func TestMetricsCountRequeuesByKind(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := subreconcile.NewMetrics(subreconcile.MetricsConfig{Registerer: reg, Namespace: "fdb"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(r *subreconcile.Requeue) {
		t.Helper()
		runner, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
			Name:    "Database",
			Steps:   []dbStep{subreconcile.NamedFunc("S", func(context.Context, *Database, dbLoop) *subreconcile.Requeue { return r })},
			Metrics: m,
		})
		if err != nil {
			t.Fatal(err)
		}
		runner.Run(t.Context(), newDatabase(1))
	}
	run(subreconcile.RequeueAfter(0, "x"))
	run(subreconcile.DelayedRequeueAfter(0, "x"))
	run(subreconcile.DelayedRequeueAfter(0, "x"))
	run(subreconcile.RequeueOnError(conflict))
	run(subreconcile.RequeueOnError(errDisk))
	run(subreconcile.DelayedRequeueOnError(errDisk))
	run(subreconcile.RequeueOnError(subreconcile.Terminal(errDisk)))
	panicky, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name:    "Database",
		Steps:   []dbStep{subreconcile.NamedFunc("S", func(context.Context, *Database, dbLoop) *subreconcile.Requeue { panic("boom") })},
		Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	panicky.Run(t.Context(), newDatabase(1))

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	var observations uint64
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			switch f.GetName() {
			case "fdb_subreconcile_requeues_total":
				kind := ""
				for _, l := range metric.GetLabel() {
					if l.GetName() == "reason" {
						kind = l.GetValue()
					}
				}
				got[kind] = metric.GetCounter().GetValue()
			case "fdb_subreconcile_step_duration_seconds":
				observations += metric.GetHistogram().GetSampleCount()
			}
		}
	}
	want := map[string]float64{
		subreconcile.RequeueImmediate: 1,
		subreconcile.RequeueDelayed:   2,
		subreconcile.RequeueConflict:  1,
		subreconcile.RequeueError:     2,
		subreconcile.RequeueTerminal:  1,
		subreconcile.RequeuePanic:     1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("requeues{kind=%s} = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if observations != 8 {
		t.Errorf("step duration observations = %d, want 8", observations)
	}

	global, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range global {
		if strings.Contains(f.GetName(), "subreconcile") {
			t.Errorf("metric %s registered on the global registry", f.GetName())
		}
	}
}

// A bad MetricsConfig is refused by NewMetrics, wrapping ErrInvalidConfig and
// naming the field and value. Before, buckets out of order made the first
// observation panic inside a reconcile loop.
func TestNewMetricsRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  subreconcile.MetricsConfig
		want string
	}{
		{"buckets out of order", subreconcile.MetricsConfig{Buckets: []float64{1, 0.5}}, "MetricsConfig.Buckets = [1 0.5]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Registerer = prometheus.NewRegistry()
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("panic: %v", p)
					}
				}()
				var m *subreconcile.Metrics
				if m, err = subreconcile.NewMetrics(tc.cfg); err == nil {
					runStepOnce(t, m)
				}
			}()
			if !errors.Is(err, subreconcile.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewMetrics = %v, want ErrInvalidConfig naming %s", err, tc.want)
			}
		})
	}
}

// runStepOnce runs a one-step chain that observes m.
func runStepOnce(t *testing.T, m *subreconcile.Metrics) {
	t.Helper()
	r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name:    "Database",
		Steps:   []dbStep{subreconcile.NamedFunc("A", func(context.Context, *Database, dbLoop) *subreconcile.Requeue { return nil })},
		Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Run(context.Background(), &Database{})
}
