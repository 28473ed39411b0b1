// Package replicatest runs replicas of an example's controller-runtime
// manager side by side in one test process, as separate pods would run
// them.
package replicatest

import (
	"fmt"
	"net"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

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

// CrashOptions is Options for a replica that a chaos test kills: it does
// not release its Lease when stopped (a crash would not), and it waits at
// most 2 s for its runnables to stop.
func CrashOptions(log logr.Logger) func(*manager.Options) {
	return func(o *manager.Options) {
		Options(log)(o)
		o.LeaderElectionReleaseOnCancel = false
		o.GracefulShutdownTimeout = ptr.To(2 * time.Second)
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

// Leader waits until one of mgrs is elected leader, and returns its index.
// It fails t after 30 s.
func Leader(t testing.TB, mgrs ...manager.Manager) int {
	t.Helper()
	cases := make([]reflect.SelectCase, 0, len(mgrs)+1)
	for _, m := range mgrs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.Elected())})
	}
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(30 * time.Second))})
	i, _, _ := reflect.Select(cases)
	if i == len(mgrs) {
		t.Fatal("no replica was elected within 30s")
	}
	return i
}

// FreeAddr returns a loopback address whose port was free a moment ago,
// for a replica's probes or metrics.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// WaitReady waits until url answers 200, as a kubelet's readiness probe
// would see it. It fails t after 2 minutes.
func WaitReady(t testing.TB, url string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%s", resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 2 minutes: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
