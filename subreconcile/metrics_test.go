package subreconcile_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

func TestNewMetrics(t *testing.T) {
	if _, err := subreconcile.NewMetrics(subreconcile.MetricsConfig{}); err == nil ||
		err.Error() != "subreconcile: invalid configuration: MetricsConfig.Registerer is nil" {
		t.Errorf("NewMetrics without registerer: %v", err)
	}

	reg := prometheus.NewRegistry()
	if _, err := subreconcile.NewMetrics(subreconcile.MetricsConfig{Registerer: reg, Namespace: "fdb"}); err != nil {
		t.Fatal(err)
	}
	_, err := subreconcile.NewMetrics(subreconcile.MetricsConfig{Registerer: reg, Namespace: "fdb"})
	if err == nil || !strings.Contains(err.Error(), "registering step duration histogram") {
		t.Errorf("registering twice on one registry: %v, want a registration error", err)
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
