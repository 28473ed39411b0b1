package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/testenv"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// Replicas runs N replicas of a controller, each replaced when it is
// killed or exits, as a Deployment's pods are.
type Replicas struct {
	// N is how many replicas run at once.
	N int
	// Config returns the API server config of replica slot i and the
	// proxy it goes through (nil: none, and Kill cannot cut it off).
	Config func(i int) (*rest.Config, *faultproxy.Proxy)
	// Run runs one replica until ctx ends or it fails. A replica that
	// may be killed must not release what a crash would not (its Lease).
	Run func(ctx context.Context, cfg *rest.Config, i int) error
	// Log logs replicas that exit.
	Log logr.Logger

	mu    sync.Mutex
	slots []*slot
}

type slot struct {
	i      int
	cancel context.CancelFunc
	exited chan struct{}
	killed bool
}

// Start runs the replicas until ctx ends, counting replacements in ops;
// the returned function waits until they are all stopped.
func (r *Replicas) Start(ctx context.Context, ops *Ops) (wait func()) {
	var wg sync.WaitGroup
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.N {
		s := &slot{i: i}
		r.slots = append(r.slots, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.run(ctx, s, ops)
		}()
	}
	return wg.Wait
}

func (r *Replicas) run(ctx context.Context, s *slot, ops *Ops) {
	cfg, _ := r.Config(s.i)
	for ctx.Err() == nil {
		rctx, cancel := context.WithCancel(ctx)
		exited := make(chan struct{})
		r.mu.Lock()
		s.cancel, s.exited, s.killed = cancel, exited, false
		r.mu.Unlock()
		err := r.Run(rctx, rest.CopyConfig(cfg), s.i)
		cancel()
		close(exited)
		r.mu.Lock()
		killed := s.killed
		r.mu.Unlock()
		switch {
		case ctx.Err() != nil:
			return
		case killed:
			ops.Add("replica replaced after kill")
		default:
			r.Log.Info("replica exited; starting another", "slot", s.i, "error", err)
			ops.Add("replica restarted after exit")
			time.Sleep(time.Second)
		}
	}
}

// Kill stops replica i as SIGKILL would, as far as the API server and the
// stores can tell: its connections are cut first and refused, so that
// nothing it does afterwards reaches them, and it releases nothing. An
// in-process replica's goroutines end with its context, not at once; a
// replica run by [Process] gets a real SIGKILL. Its slot then starts a new
// replica.
func (r *Replicas) Kill(i int) error {
	r.mu.Lock()
	if i >= len(r.slots) || r.slots[i].cancel == nil {
		r.mu.Unlock()
		return fmt.Errorf("chaos: replica %d is not running", i)
	}
	s := r.slots[i]
	s.killed = true
	cancel, exited := s.cancel, s.exited
	r.mu.Unlock()
	if _, proxy := r.Config(i); proxy != nil {
		proxy.SetRefuse(true)
		proxy.Reset()
		defer proxy.Heal()
	}
	cancel()
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("chaos: replica %d did not stop within 30 s", i)
	}
}

// FileLogger logs to a file in the temporary directory that outlives a
// failed test, so that the run can be read afterwards, and is removed when
// t passes; name and seed name the file. It logs at V(1).
func FileLogger(t testing.TB, name string, seed uint64) (logr.Logger, string, error) {
	f, err := os.CreateTemp("", fmt.Sprintf("%s-chaos-%d-*.log", name, seed))
	if err != nil {
		return logr.Discard(), "", err
	}
	t.Cleanup(func() {
		if !t.Failed() {
			// Loggers that outlive t (klog's) write on to the unlinked file.
			os.Remove(f.Name())
		}
	})
	var mu sync.Mutex
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(f, time.Now().Format("15:04:05.000"), prefix, args)
	}, funcr.Options{Verbosity: 1})
	return log, f.Name(), nil
}

// ReplicaProxies starts n fault proxies to k's API server, one per replica
// slot, and returns them with the Replicas.Config that routes slot i
// through proxy i.
func ReplicaProxies(t testing.TB, k *testenv.IsolatedKubernetes, n int) ([]*faultproxy.Proxy, func(i int) (*rest.Config, *faultproxy.Proxy)) {
	addr := strings.TrimPrefix(k.Config.Host, "https://")
	proxies := make([]*faultproxy.Proxy, n)
	for i := range proxies {
		proxies[i] = faultproxy.Start(t, addr)
	}
	return proxies, func(i int) (*rest.Config, *faultproxy.Proxy) { return k.ConfigVia(proxies[i]), proxies[i] }
}
