package replicatest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// recorder is a testr.TestingT that keeps what is logged.
type recorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *recorder) Helper() {}

func (r *recorder) Log(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, fmt.Sprint(args...))
}

// Lines logged before the test's cleanup reach the test, with the names and
// values given; lines logged after it are dropped.
func TestLoggerDropsLinesAfterTheTest(t *testing.T) {
	var w recorder
	var cleanup func()
	log := newLogger(&w, func(f func()) { cleanup = f }).WithName("replica").WithValues("k", "v")
	log.Info("while the test runs")
	log.Error(errors.New("boom"), "an error while the test runs")
	cleanup()
	log.Info("after the test")
	log.Error(errors.New("late"), "after the test")
	if len(w.lines) != 2 || !strings.Contains(w.lines[0], "while the test runs") || !strings.Contains(w.lines[0], "replica") ||
		!strings.Contains(w.lines[1], "boom") {
		t.Errorf("logged %q; want the two lines logged while the test ran, and nothing after", w.lines)
	}
}

func TestOptions(t *testing.T) {
	var o manager.Options
	Options(Logger(t).WithName("replica-0"))(&o)
	if o.Controller.SkipNameValidation == nil || !*o.Controller.SkipNameValidation || o.Metrics.BindAddress != "0" || o.HealthProbeBindAddress != "0" || o.Logger.GetSink() == nil {
		t.Errorf("options %+v: want name validation skipped, metrics and probes off, a logger", o)
	}
}
