package kubestore_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
)

// counter counts the API requests of the controller's client.
type counter struct {
	rt            http.RoundTripper
	writes, lists *atomic.Int64
}

func (c counter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		c.writes.Add(1)
	case http.MethodGet:
		if r.URL.Query().Get("watch") == "" {
			c.lists.Add(1)
		}
	}
	return c.rt.RoundTrip(r)
}

// BenchmarkThroughput runs 1,000 tasks across 20 targets with a no-op
// executor and ttlSecondsAfterFinished 0 against the real API server, and
// reports tasks per second and API writes per task. The minimum is 3 writes
// per task: Pending → InProgress and InProgress → Succeeded (the status
// writes of the states it passes through; Pending is the state it is created
// in), and the delete. Creating the tasks, and waiting until they are older
// than Config.Settle, is not timed.
func BenchmarkThroughput(b *testing.B) {
	const tasks, targets, minWrites = 1000, 20, 3
	k := startKube(b)
	var writes, lists atomic.Int64
	cfg := rest.CopyConfig(k.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return counter{rt, &writes, &lists} }
	s := k.store(b, cfg)
	creator := k.store(b, nil)
	zero := int32(0)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var wg sync.WaitGroup
		work := make(chan int)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range work {
					tk := task(fmt.Sprintf("bench-%d-%04d", i, j), "onDemandSnapshot", fullSnapshot, fmt.Sprintf("etcd-%02d", j%targets))
					tk.Spec.TTLSecondsAfterFinished = &zero
					if _, err := k.create(context.Background(), creator, tk); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for j := range tasks {
			work <- j
		}
		close(work)
		wg.Wait()
		time.Sleep(opstask.DefaultSettle + time.Second)
		writes.Store(0)
		lists.Store(0)
		c, err := opstask.New(opstask.Config{Store: s, MaxConcurrent: targets, Handlers: []opstask.Handler{{
			Name: "onDemandSnapshot", AllowDuplicates: true,
			Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil }),
		}}})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		for {
			list, err := k.dyn.Resource(opstasktest.Resource).Namespace(k.Namespace).List(context.Background(), metav1.ListOptions{Limit: 1})
			if err != nil {
				b.Fatal(err)
			}
			if len(list.Items) == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		total += time.Since(start)
		b.StopTimer()
		cancel()
		<-done
	}
	perTask := float64(writes.Load()) / tasks // writes of the last iteration
	b.ReportMetric(total.Seconds()/float64(b.N), "s/1000tasks")
	b.ReportMetric(float64(tasks*b.N)/total.Seconds(), "tasks/s")
	b.ReportMetric(perTask, "writes/task")
	b.ReportMetric(perTask/minWrites, "writes/minimum")
	b.ReportMetric(float64(lists.Load())/tasks, "lists/task")
}
