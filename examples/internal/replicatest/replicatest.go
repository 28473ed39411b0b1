// Package replicatest runs replicas of an example's controller-runtime
// manager side by side in one test process, as separate pods would run
// them.
package replicatest

import (
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Options returns the adjustment of the manager options of one test
// replica (pass it to kubecmd.Flags.NewManager): controller names are not
// checked for uniqueness (several managers run in one process), metrics and
// probes are off, and the manager logs to log, usually
// Logger(t).WithName(replica).
func Options(log logr.Logger) func(*manager.Options) {
	return func(o *manager.Options) {
		o.Controller.SkipNameValidation = ptr.To(true)
		o.Metrics.BindAddress = "0"
		o.HealthProbeBindAddress = "0"
		o.Logger = log
	}
}

// Logger returns a logger that writes to t (with timestamps, V(1) included)
// until the test's cleanup, and drops what comes later: a manager may log
// after its Start returned (its stop procedure drains errors on a goroutine
// of its own), and logging to a finished test is a data race.
func Logger(t testing.TB) logr.Logger { return newLogger(t, t.Cleanup) }

// newLogger is Logger writing to w, closed by the function given to
// cleanup.
func newLogger(w testr.TestingT, cleanup func(func())) logr.Logger {
	g := &gate{}
	cleanup(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
	})
	return logr.New(sink{LogSink: testr.NewWithInterface(w, testr.Options{LogTimestamp: true, Verbosity: 1}).GetSink(), gate: g})
}

type gate struct {
	mu     sync.RWMutex
	closed bool
}

type sink struct {
	logr.LogSink
	gate *gate
}

func (s sink) Info(level int, msg string, kv ...any) {
	s.gate.mu.RLock()
	defer s.gate.mu.RUnlock()
	if !s.gate.closed {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s sink) Error(err error, msg string, kv ...any) {
	s.gate.mu.RLock()
	defer s.gate.mu.RUnlock()
	if !s.gate.closed {
		s.LogSink.Error(err, msg, kv...)
	}
}

func (s sink) WithValues(kv ...any) logr.LogSink {
	return sink{LogSink: s.LogSink.WithValues(kv...), gate: s.gate}
}

func (s sink) WithName(name string) logr.LogSink {
	return sink{LogSink: s.LogSink.WithName(name), gate: s.gate}
}
