package subreconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// chainLength is the length of the FoundationDB operator's cluster chain.
const chainLength = 25

func noopChain() []dbStep {
	steps := make([]dbStep, chainLength)
	for i := range steps {
		steps[i] = subreconcile.NamedFunc(fmt.Sprintf("Step%02d", i), func(context.Context, *Database, dbLoop) *subreconcile.Requeue {
			return nil
		})
	}
	return steps
}

// benchRunners are the configurations measured: the bare runner (real and
// fake clock), and one with
// metrics, generation tracking, events and an enabled logger (which a no-op
// step never writes to).
func benchRunners(tb testing.TB) []struct {
	name string
	r    *subreconcile.Runner[*Database, *loopState]
	ctx  context.Context
} {
	bare, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{Name: "Database", Steps: noopChain()})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := subreconcile.NewMetrics(subreconcile.MetricsConfig{Registerer: prometheus.NewRegistry()})
	if err != nil {
		tb.Fatal(err)
	}
	state := &loopState{}
	full, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name:        "Database",
		Steps:       noopChain(),
		Metrics:     m,
		Generations: databaseGenerations,
		NewState:    func(context.Context, *Database) (*loopState, error) { return state, nil },
		Recorder:    subreconcile.EventFunc(func(_ runtime.Object, _, _, _ string) {}),
	})
	if err != nil {
		tb.Fatal(err)
	}
	fakeClock, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name:  "Database",
		Steps: noopChain(),
		Clock: clocktesting.NewFakePassiveClock(time.Unix(0, 0)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	logged := logr.NewContext(context.Background(), funcr.New(func(string, string) {}, funcr.Options{}))
	return []struct {
		name string
		r    *subreconcile.Runner[*Database, *loopState]
		ctx  context.Context
	}{
		{"bare", bare, context.Background()},
		// The real clock costs one read per step; on some virtual machines
		// that read alone is over 100ns. The fake clock shows the runner's
		// own share.
		{"bare-fakeclock", fakeClock, context.Background()},
		{"metrics+logger+generations", full, logged},
	}
}

// reconciledDatabase is already reconciled, so a no-op loop records no
// completion event and needs no requeue.
func reconciledDatabase() *Database {
	db := newDatabase(7)
	db.Status.Generations.MarkReconciled(7)
	return db
}

// BenchmarkRunNoop measures the runner's own overhead: a loop over 25 steps
// that all have nothing to do.
func BenchmarkRunNoop(b *testing.B) {
	for _, bc := range benchRunners(b) {
		b.Run(bc.name, func(b *testing.B) {
			db := reconciledDatabase()
			b.ReportAllocs()
			cpu0, cpuOK := processCPUTime()
			for b.Loop() {
				if out := bc.r.Run(bc.ctx, db); out.Err != nil || out.Requeue() {
					b.Fatalf("no-op loop: %+v", out)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/chainLength, "ns/step")
			// On a shared machine wall time per step depends on the other
			// load; process CPU time per step does much less.
			if cpu1, ok := processCPUTime(); ok && cpuOK {
				b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N)/chainLength, "cpu-ns/step")
			}
		})
	}
}
