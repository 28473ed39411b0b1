package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	goruntime "runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/internal/benchcurve"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// requestCounter counts the API requests of a client by kind: writes,
// LISTs (a GET of a collection), GETs of one object. Watches are not
// counted.
type requestCounter struct {
	rt                  http.RoundTripper
	writes, lists, gets *atomic.Int64
}

func (c requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		c.writes.Add(1)
	case http.MethodGet:
		if r.URL.Query().Get("watch") == "" {
			if strings.HasSuffix(r.URL.Path, "/"+opstasktest.Resource.Resource) {
				c.lists.Add(1)
			} else {
				c.gets.Add(1)
			}
		}
	}
	return c.rt.RoundTrip(r)
}

// listOnly hides the store's Informer: the controller lists every task on
// every Sync, as it did before it kept a copy.
type listOnly struct{ opstask.Store }

func (s listOnly) Watch(ctx context.Context, notify func()) error {
	return s.Store.(opstask.Watcher).Watch(ctx, notify)
}

// BenchmarkTaskRetained is the opstask curve of issue 28 on the real API
// server: 100 pending tasks over 20 targets, with a no-op executor and
// ttlSecondsAfterFinished 0, run while 100, 1,000, 10,000 or 50,000 finished
// tasks (TTL one hour) are retained in the namespace. It reports tasks per
// second and API requests per task; the minimum is 3 writes a task (claim,
// finish, delete), and the hold (kubestore's finalizer) adds 2. "list each
// sync" is the controller before the watch-fed copy, measured up to 10,000
// retained tasks. The time is from the first claim of a pending task to
// the deletion of the last: the controller's start (which lists every
// task) is paid once a process and is
// reported apart in the notes, with the time taken to create the tasks.
func BenchmarkTaskRetained(b *testing.B) {
	const pending, targets = 100, 20
	ctrllog.SetLogger(logr.Discard())
	curve := &benchcurve.Curve{Name: "opstask-retained", Item: "task", Size: "finished tasks retained"}
	for _, retained := range benchcurve.Sizes(100, 1_000, 10_000, 50_000) {
		for _, series := range []string{"watch-fed copy", "list each sync"} {
			if series == "list each sync" && retained > 10_000 {
				continue
			}
			b.Run(fmt.Sprintf("%s/retained=%d", strings.ReplaceAll(series, " ", "-"), retained), func(b *testing.B) {
				for range b.N {
					p := runRetained(b, curve, series == "list each sync", retained, pending, targets)
					p.Series = series
					curve.Add(b, p)
					b.ReportMetric(float64(pending)/p.Seconds, "tasks/s")
					b.ReportMetric(float64(p.Requests)/pending, "requests/task")
				}
			})
		}
	}
	if small, ok := curve.Find("watch-fed copy", 100); ok {
		if big, ok := curve.Find("watch-fed copy", 50_000); ok {
			curve.Note("target: tasks/s at 50,000 retained within 2x of the rate at 100: %.1f vs %.1f tasks/s (%.2fx)",
				pending/big.Seconds, pending/small.Seconds, big.Seconds/small.Seconds)
		}
	}
	curve.Note("minimum: 3 writes a task (claim, finish, delete); the hold adds 2 (finalizer on, off): the status subresource cannot carry a finalizer")
	curve.Write(b)
}

// runRetained measures one size. The benchmark's own ns/op includes the
// setup, which takes seconds, so that the framework runs it once.
// benchPending labels the pending tasks, which the benchmark watches.
const benchPending = "bench.groundskeeper.io/pending"

func runRetained(b *testing.B, curve *benchcurve.Curve, list bool, retained, pending, targets int) benchcurve.Point {
	env := testenv.StartKubernetes(b)
	ctx := context.Background()
	var writes, lists, gets atomic.Int64
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 5000, 5000
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return requestCounter{rt, &writes, &lists, &gets} }
	counted := *env
	counted.Config = cfg
	mgr := newTaskManager(b, &counted)
	creator := newTaskManager(b, env)
	cli := creator.GetClient()

	// The retained tasks, finished now with a TTL of an hour, and the
	// pending ones, created 32 at a time.
	start := time.Now()
	hour := int32(3600)
	zero := int32(0)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				task := &opstask.Task{Name: fmt.Sprintf("done-%06d", i), Spec: opstask.Spec{
					Config: map[string]json.RawMessage{"snapshot": json.RawMessage(`{}`)},
					Target: fmt.Sprintf("etcd-%02d", i%targets), TTLSecondsAfterFinished: &hour}}
				if i >= retained {
					task.Name = fmt.Sprintf("pending-%06d", i-retained)
					task.Spec.TTLSecondsAfterFinished = &zero
				}
				u := testTask(env.Namespace, task)
				if i >= retained {
					u.SetLabels(map[string]string{benchPending: "true"})
				}
				if err := cli.Create(ctx, u); err != nil {
					b.Error(err)
					continue
				}
				if i >= retained {
					continue
				}
				now := time.Now()
				st := opstask.Status{}
				for _, s := range []opstask.TaskState{opstask.TaskStateInProgress, opstask.TaskStateSucceeded} {
					if err := st.Transition(s, now, "bench", "retained"); err != nil {
						b.Error(err)
					}
				}
				status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
				if err != nil {
					b.Error(err)
					continue
				}
				u.Object["status"] = status
				if err := cli.Status().Update(ctx, u); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range retained + pending {
		work <- i
	}
	close(work)
	wg.Wait()
	created := time.Since(start)
	if b.Failed() {
		b.FailNow()
	}
	runManager(b, mgr)
	// The benchmark sees the pending tasks claimed and gone by a watch of
	// their label, on a client of its own: an informer of the task kind
	// (the manager's cache) would hold every retained task whole in this
	// process and count in the heap that the curve measures.
	watched, err := client.NewWithWatch(env.Config, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		b.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	w, err := watched.Watch(wctx, &opstasktest.TestTaskList{}, client.InNamespace(env.Namespace), client.MatchingLabels{benchPending: "true"})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	start = time.Now()
	var gone atomic.Int64
	done := make(chan struct{})
	var firstClaim atomic.Int64 // unix nanoseconds
	go func() {
		for ev := range w.ResultChan() {
			t, ok := ev.Object.(*opstasktest.TestTask)
			switch {
			case !ok:
				// An error event: the watch ends, and the wait below says so.
			case ev.Type == watch.Modified && t.Status.State == opstask.TaskStateInProgress:
				firstClaim.CompareAndSwap(0, time.Now().UnixNano())
			case ev.Type == watch.Deleted:
				if gone.Add(1) == int64(pending) {
					close(done)
				}
			}
		}
	}()
	// Older than Settle: the wait for it is not the controller's work.
	time.Sleep(time.Until(start.Add(opstask.DefaultSettle + time.Second)))
	writes.Store(0)
	lists.Store(0)
	gets.Store(0)

	taskCfg := opstask.Config{MaxConcurrent: targets, Handlers: []opstask.Handler{{
		Name: "snapshot", AllowDuplicates: true,
		Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil }),
	}}}
	opts := &tasks.Options{TargetField: opstasktest.TargetField, Namespace: env.Namespace}
	if list {
		s, err := tasks.NewStore(mgr, &opstasktest.TestTask{}, opts)
		if err != nil {
			b.Fatal(err)
		}
		taskCfg.Store = listOnly{s}
	}
	heap := benchcurve.StartHeap()
	// The peak counts garbage not yet collected (the collector lets the
	// heap grow to twice what is live before it runs). What the run kept is
	// the live heap after a collection, noted apart.
	goruntime.GC()
	live0 := liveHeap()
	start = time.Now()
	if err := (&tasks.Controller{Object: &opstasktest.TestTask{}, Config: taskCfg, Options: opts}).SetupWithManager(mgr); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("%d of %d pending tasks done after 10 minutes", gone.Load(), pending)
	}
	end := time.Now()
	peak, alloc := heap.Stop()
	goruntime.GC()
	kept := float64(liveHeap()-min(live0, liveHeap())) / (1 << 20)
	// The controller's start (its store's list, finished tasks decoded by
	// reference, or the first list of a Sync) is reported apart: it is paid
	// once a process, not for each event. Its LIST requests are counted
	// (2,000 tasks a page); the benchmark's own watch is not.
	first := time.Unix(0, firstClaim.Load())
	startup, elapsed := first.Sub(start), end.Sub(first)
	if list {
		curve.Note("list each sync, %d retained: %.2f writes, %.2f LISTs, %.2f GETs a task; controller start to first claim %.2f s", retained,
			float64(writes.Load())/float64(pending), float64(lists.Load())/float64(pending), float64(gets.Load())/float64(pending), startup.Seconds())
	} else {
		curve.Note("watch-fed copy, %d retained: live heap kept after the run (after a GC) %.1f MiB", retained, kept)
		curve.Note("watch-fed copy, %d retained: %.2f writes, %.2f LISTs, %.2f GETs a task; controller start to first claim %.2f s; setup: %d tasks created in %.1f s", retained,
			float64(writes.Load())/float64(pending), float64(lists.Load())/float64(pending), float64(gets.Load())/float64(pending),
			startup.Seconds(), retained+pending, created.Seconds())
	}
	return benchcurve.Point{Size: retained, Items: pending, Seconds: elapsed.Seconds(),
		Requests: writes.Load() + lists.Load() + gets.Load(), PeakHeap: peak, AllocBytes: alloc}
}

// runManager starts mgr until the benchmark ends, without waiting for its
// cache: the curve times the controller's start (the informer's replay)
// itself.
func runManager(tb testing.TB, mgr manager.Manager) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Error(err)
		}
	})
}

// liveHeap returns the bytes of the heap's objects (live, after a GC).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
