package kubecmd

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A replica whose controller fails steps down at once, releases the Lease
// and returns the controller's error; one whose context ends returns nil
// after its controller returned.
func TestLeading(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	boom := errors.New("boom")
	start := time.Now()
	err := Leading(ctx, k.Config, k.Namespace, "failing", func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Leading = %v, want %v", err, boom)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Leading returned %s after its function failed", d)
	}
	lease, err := k.Client.CoordinationV1().Leases(k.Namespace).Get(ctx, "failing", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("Lease still held by %q", *h)
	}

	runCtx, stop := context.WithCancel(ctx)
	returned := false
	err = Leading(runCtx, k.Config, k.Namespace, "running", func(ctx context.Context) error {
		stop()
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // cleanup after the context ended
		returned = true
		return nil
	})
	if err != nil || !returned {
		t.Errorf("Leading = %v, function returned: %v; want nil after the function returned", err, returned)
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// When the API server stops answering the leader's Lease requests (client-go
// has no request timeout by default), the leader's work is canceled within
// the renew deadline of the last renewal that succeeded, before the lease
// (15s) runs out for the other replicas, and Leading reports the loss.
func TestLeadingHungRenewalCancelsTheWorkBeforeTheLeaseRunsOut(t *testing.T) {
	k := testenv.StartKubernetes(t)
	cfg := rest.CopyConfig(k.Config)
	var (
		hang      atomic.Bool
		mu        sync.Mutex
		lastWrite time.Time // start of the last Lease write that succeeded
	)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if !strings.Contains(r.URL.Path, "/leases") {
				return rt.RoundTrip(r)
			}
			if hang.Load() {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			start := time.Now()
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.StatusCode < 300 && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
				mu.Lock()
				lastWrite = start
				mu.Unlock()
			}
			return resp, err
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	leading := make(chan struct{})
	stopped := make(chan time.Time, 1)
	returned := make(chan error, 1)
	go func() {
		returned <- Leading(ctx, cfg, k.Namespace, "hung", func(ctx context.Context) error {
			close(leading)
			<-ctx.Done()
			stopped <- time.Now()
			return nil
		})
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("not leading after 30s")
	}
	hang.Store(true)
	var at time.Time
	select {
	case at = <-stopped:
	case <-time.After(60 * time.Second):
		t.Fatal("the leader's work still runs 60s after its Lease requests started hanging")
	}
	mu.Lock()
	since := at.Sub(lastWrite)
	mu.Unlock()
	if since >= 15*time.Second {
		t.Errorf("the leader's work was canceled %s after the start of its last successful Lease write, not before the lease of 15s ran out: another replica could lead meanwhile", since.Round(time.Millisecond))
	}
	hang.Store(false)
	if err := <-returned; err == nil {
		t.Error("Leading returned nil after losing the Lease, want an error")
	}
}
