package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// NewManager returns a controller-runtime manager on the control plane, for
// a test to add its controllers to and then start with [StartManager]. Its
// client reads through a cache of k.Namespace only, scheme must hold every
// type the test's controllers read, and it serves no metrics or probes, so
// that the managers of parallel tests do not fight over ports. Controller
// names are not checked for uniqueness across managers (controller-runtime
// checks them process-wide, which refuses a test run twice with -count).
// It logs to the test ([Logger]), so that a reconcile error shows in the
// test's output. Each option function, if any, adjusts the options last.
func (k *Kubernetes) NewManager(t testing.TB, scheme *runtime.Scheme, opts ...func(*manager.Options)) manager.Manager {
	t.Helper()
	o := manager.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{k.Namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:                 Logger(t),
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := manager.New(k.Config, o)
	if err != nil {
		t.Fatalf("testenv: new manager: %v", err)
	}
	return mgr
}

// StartManager starts mgr, waits until the informers it has started so far
// have synced, and stops it when the test ends, failing the test if Start
// returned an error. Informers start on first use: a test that reads a type
// before any controller watches it may ask for its informer first
// (mgr.GetCache().GetInformer).
func StartManager(t testing.TB, mgr manager.Manager) {
	t.Helper()
	// Runnables that take their logger from the context get the
	// manager's, not controller-runtime's global one.
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), mgr.GetLogger()))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("testenv: manager: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("testenv: manager did not stop within a minute")
		}
	})
	syncCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("testenv: manager cache did not sync within a minute")
	}
}

// Logger returns a logger that writes to t.Log, with timestamps, until the
// test ends, and drops what comes later: a manager may log after its Start
// returned, and logging to a finished test is a data race. Managers made
// by [Kubernetes.NewManager] log to it.
//
// [Main] also makes controller-runtime's global logger (log.Log, which it
// uses wherever a context carries no logger) write to the loggers Logger
// returned for the tests still running, unless a test sets that logger
// itself (ctrl.SetLogger): without one, controller-runtime prints a
// stack trace ("log.SetLogger(...) was never called") and drops its logs.
func Logger(t testing.TB) logr.Logger {
	g := &testLogGate{}
	l := logr.New(testLogSink{LogSink: testr.NewWithInterface(t, testr.Options{LogTimestamp: true}).GetSink(), gate: g})
	liveLogs.add(g, l)
	t.Cleanup(func() {
		liveLogs.remove(g)
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
	})
	return l
}

type testLogGate struct {
	mu     sync.RWMutex
	closed bool
}

// testLogSink is a LogSink that writes until its gate closes.
type testLogSink struct {
	logr.LogSink
	gate *testLogGate
}

func (s testLogSink) Info(level int, msg string, kv ...any) {
	s.gate.mu.RLock()
	defer s.gate.mu.RUnlock()
	if !s.gate.closed {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s testLogSink) Error(err error, msg string, kv ...any) {
	s.gate.mu.RLock()
	defer s.gate.mu.RUnlock()
	if !s.gate.closed {
		s.LogSink.Error(err, msg, kv...)
	}
}

func (s testLogSink) WithValues(kv ...any) logr.LogSink {
	return testLogSink{LogSink: s.LogSink.WithValues(kv...), gate: s.gate}
}

func (s testLogSink) WithName(name string) logr.LogSink {
	return testLogSink{LogSink: s.LogSink.WithName(name), gate: s.gate}
}

// liveLogs are the loggers of the tests that are running, which
// controller-runtime's global logger writes to (see Main).
var liveLogs = &logSet{loggers: map[*testLogGate]logr.Logger{}}

type logSet struct {
	mu      sync.Mutex
	loggers map[*testLogGate]logr.Logger
}

func (s *logSet) add(g *testLogGate, l logr.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loggers[g] = l
}

func (s *logSet) remove(g *testLogGate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.loggers, g)
}

func (s *logSet) each(f func(logr.Logger)) {
	s.mu.Lock()
	ls := make([]logr.Logger, 0, len(s.loggers))
	for _, l := range s.loggers {
		ls = append(ls, l)
	}
	s.mu.Unlock()
	for _, l := range ls {
		f(l)
	}
}

// liveSink is controller-runtime's global logger under Main: each record
// goes to every running test's Logger.
type liveSink struct {
	name string
	kv   []any
}

func (liveSink) Init(logr.RuntimeInfo) {}

func (liveSink) Enabled(level int) bool { return level <= 0 }

func (s liveSink) logger(l logr.Logger) logr.Logger {
	if s.name != "" {
		l = l.WithName(s.name)
	}
	return l.WithValues(s.kv...)
}

func (s liveSink) Info(level int, msg string, kv ...any) {
	liveLogs.each(func(l logr.Logger) { s.logger(l).V(level).Info(msg, kv...) })
}

func (s liveSink) Error(err error, msg string, kv ...any) {
	liveLogs.each(func(l logr.Logger) { s.logger(l).Error(err, msg, kv...) })
}

func (s liveSink) WithValues(kv ...any) logr.LogSink {
	return liveSink{name: s.name, kv: append(s.kv[:len(s.kv):len(s.kv)], kv...)}
}

func (s liveSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return liveSink{name: name, kv: s.kv}
}

// setGlobalLogger makes controller-runtime's global logger write to the
// running tests' loggers. Main calls it before any test runs, so that a
// test that sets its own wins.
func setGlobalLogger() { ctrllog.SetLogger(logr.New(liveSink{})) }
