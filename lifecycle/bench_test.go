package lifecycle_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
)

// countingTransport counts API requests by verb (list and get are told apart
// by the path: a collection or one object).
type countingTransport struct {
	rt     http.RoundTripper
	mu     sync.Mutex
	counts map[string]int
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := strings.ToLower(req.Method)
	if req.Method == http.MethodGet {
		parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		switch parts[len(parts)-1] {
		case "persistentvolumeclaims", "pods":
			verb = "list"
		default:
			verb = "get"
		}
	}
	c.mu.Lock()
	c.counts[verb]++
	c.mu.Unlock()
	return c.rt.RoundTrip(req)
}

func (c *countingTransport) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

// createClaims creates claims concurrently with a client that is not counted.
func createClaims(b *testing.B, c kubernetes.Interface, ns string, names []string, ann func(i int) map[string]string) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) {
					return
				}
				_, err := c.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), newClaim(names[i], "bench", ann(i)), metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCollect10000Claims1000Expired: one collector pass over 10,000
// claims of which 1,000 have expired, against the real API server. The
// minimum number of requests is the list pages (claims, then pods) plus one
// delete per expired claim; the pass reports its requests by verb and the
// ratio to that minimum.
func BenchmarkCollect10000Claims1000Expired(b *testing.B) {
	const total, expired, pageSize = 10000, 1000, 500
	env := testenv.StartKubernetes(b)
	ns := env.Namespace
	setup := kubernetes.NewForConfigOrDie(env.Config)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(now)
	counting := &countingTransport{counts: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counting.rt = rt; return counting }
	m, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(kubernetes.NewForConfigOrDie(cfg).CoreV1()), Clock: clk, PageSize: pageSize})
	if err != nil {
		b.Fatal(err)
	}
	ann := m.Annotations()
	old := now.Add(-2 * time.Hour).Format(time.RFC3339)
	recent := now.Add(-10 * time.Minute).Format(time.RFC3339)

	// 9,000 claims that stay: half mounted, half unmounted within their TTL.
	var names []string
	for i := range total - expired {
		names = append(names, fmt.Sprintf("keep-%05d", i))
	}
	createClaims(b, setup, ns, names, func(i int) map[string]string {
		if i%2 == 0 {
			return ann.Track(fmt.Sprintf("db-%d", i), time.Hour)
		}
		return map[string]string{ann.TTLKey(): "1h", ann.PodNameKey(): fmt.Sprintf("db-%d", i), ann.LastUnmountedKey(): recent}
	})
	scope := lifecycle.Scope{Namespace: ns, Selector: labels.SelectorFromSet(map[string]string{"app": "bench"})}
	sum := map[string]int{}
	var minimum int
	b.ResetTimer()
	for iter := range b.N {
		b.StopTimer()
		names = names[:0]
		for i := range expired {
			names = append(names, fmt.Sprintf("expired-%d-%04d", iter, i))
		}
		createClaims(b, setup, ns, names, func(i int) map[string]string {
			return map[string]string{ann.TTLKey(): "1h", ann.PodNameKey(): fmt.Sprintf("gone-%d", i), ann.LastUnmountedKey(): old}
		})
		// Wait for the previous pass's claims to be gone, so every pass
		// lists exactly 10,000 claims.
		err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := setup.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == total, err
		})
		if err != nil {
			b.Fatal(err)
		}
		counting.reset()
		b.StartTimer()

		res, err := m.Collect(context.Background(), lifecycle.CollectOptions{Scope: scope})

		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if res.Listed != total || len(res.Deleted) != expired || res.RequeueAfter != 50*time.Minute {
			b.Fatalf("pass listed %d, deleted %d, requeue after %s", res.Listed, len(res.Deleted), res.RequeueAfter)
		}
		for verb, n := range counting.reset() {
			sum[verb] += n
		}
		// Claims pages, one pods page (no pods), one delete per expired claim.
		minimum += (total+pageSize-1)/pageSize + 1 + expired
		b.StartTimer()
	}
	b.StopTimer()
	requests := 0
	for verb, n := range sum {
		requests += n
		b.ReportMetric(float64(n)/float64(b.N), verb+"-requests/op")
	}
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	b.ReportMetric(float64(requests)/float64(minimum), "ratio-to-minimum")
}
