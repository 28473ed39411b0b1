package lifecycle_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/internal/benchcurve"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// BenchmarkCollectCurve is the Collect curve of issue 28 on the real API
// server: one pass over 1,000, 10,000 and 50,000 claims of which 10% have
// expired (the others: half mounted, half unmounted within their TTL), in a
// namespace each. The minimum number of requests is the claim list's pages
// (500 claims each), one pods page and one delete per expired claim.
// Creating the claims is not timed (the note says how long it took).
func BenchmarkCollectCurve(b *testing.B) {
	const pageSize = 500
	curve := &benchcurve.Curve{Name: "collect", Item: "claim"}
	for _, total := range benchcurve.Sizes(1_000, 10_000, 50_000) {
		b.Run(fmt.Sprintf("claims=%d", total), func(b *testing.B) {
			expired := total / 10
			env := testenv.StartKubernetes(b)
			setup := kubernetes.NewForConfigOrDie(env.Config)
			now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			counting := &countingTransport{counts: map[string]int{}}
			cfg := rest.CopyConfig(env.Config)
			cfg.QPS, cfg.Burst = 5000, 5000
			cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counting.rt = rt; return counting }
			m, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(kubernetes.NewForConfigOrDie(cfg).CoreV1()),
				Clock: testingclock.NewFakeClock(now), PageSize: pageSize})
			if err != nil {
				b.Fatal(err)
			}
			ann := m.Annotations()
			old := now.Add(-2 * time.Hour).Format(time.RFC3339)
			recent := now.Add(-10 * time.Minute).Format(time.RFC3339)
			names := make([]string, total)
			for i := range names {
				names[i] = fmt.Sprintf("claim-%06d", i)
			}
			start := time.Now()
			createClaims(b, setup, env.Namespace, names, func(i int) map[string]string {
				switch {
				case i < expired:
					return map[string]string{ann.TTLKey(): "1h", ann.PodNameKey(): fmt.Sprintf("gone-%d", i), ann.LastUnmountedKey(): old}
				case i%2 == 0:
					return ann.Track(fmt.Sprintf("db-%d", i), time.Hour)
				default:
					return map[string]string{ann.TTLKey(): "1h", ann.PodNameKey(): fmt.Sprintf("db-%d", i), ann.LastUnmountedKey(): recent}
				}
			})
			curve.Note("%d claims created in %.1f s", total, time.Since(start).Seconds())
			scope := lifecycle.Scope{Namespace: env.Namespace, Selector: labels.SelectorFromSet(map[string]string{"app": "bench"})}
			counting.reset()
			heap := benchcurve.StartHeap()
			start = time.Now()
			res, err := m.Collect(context.Background(), lifecycle.CollectOptions{Scope: scope})
			elapsed := time.Since(start)
			peak, alloc := heap.Stop()
			if err != nil {
				b.Fatal(err)
			}
			if res.Listed != total || len(res.Deleted) != expired {
				b.Fatalf("pass listed %d, deleted %d; want %d, %d", res.Listed, len(res.Deleted), total, expired)
			}
			requests := 0
			for _, n := range counting.reset() {
				requests += n
			}
			minimum := (total+pageSize-1)/pageSize + 1 + expired
			curve.Add(b, benchcurve.Point{Series: "groundskeeper", Size: total, Seconds: elapsed.Seconds(),
				Requests: int64(requests), PeakHeap: peak, AllocBytes: alloc})
			curve.Note("%d claims: %d requests, minimum %d: ratio %.3f", total, requests, minimum, float64(requests)/float64(minimum))
			b.ReportMetric(float64(requests)/float64(minimum), "ratio-to-minimum")
			b.ReportMetric(elapsed.Seconds()/float64(total)*1e6, "us/claim")
		})
	}
	if small, ok := curve.Find("groundskeeper", 1_000); ok {
		if big, ok := curve.Find("groundskeeper", 50_000); ok {
			curve.Note("target: time per claim at 50,000 within 1.5x of 1,000: %.1f vs %.1f µs (%.2fx)",
				big.Seconds/50_000*1e6, small.Seconds/1_000*1e6, (big.Seconds/50_000)/(small.Seconds/1_000))
		}
	}
	curve.Note("physical limit: one DELETE per expired claim (the API server has no batch delete with preconditions) and the LIST pages")
	curve.Write(b)
}
