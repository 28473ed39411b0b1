package subreconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// The runner's narrow interfaces are satisfied by client-go's own types.
var (
	_ subreconcile.EventRecorder               = record.EventRecorder(nil)
	_ subreconcile.Queue[string]               = workqueue.TypedRateLimitingInterface[string](nil)
	_ subreconcile.Step[*Database, *loopState] = subreconcile.Func[*Database, *loopState](nil)
	_ subreconcile.Object[*Database]           = (*Database)(nil)
	_ subreconcile.EventRecorder               = subreconcile.EventFunc(nil)
)

func TestEventsReachAClientGoRecorder(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	r, err := subreconcile.New(subreconcile.Config[*Database, *loopState]{
		Name: "Database",
		Steps: []dbStep{subreconcile.NamedFunc("AddPods", func(context.Context, *Database, dbLoop) *subreconcile.Requeue {
			return subreconcile.RequeueAfter(time.Second, "waiting for pods")
		})},
		Recorder: rec,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Run(t.Context(), newDatabase(1))
	select {
	case got := <-rec.Events:
		if want := "Normal ReconciliationTerminatedEarly AddPods: waiting for pods"; got != want {
			t.Errorf("event = %q, want %q", got, want)
		}
	default:
		t.Error("no event recorded")
	}
}

// TestEnqueue drives a real client-go rate-limited workqueue with outcomes.
func TestEnqueue(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Hour, time.Hour),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk},
	)
	defer q.ShutDown()
	const key = "shop/orders"

	// A plain error backs off through the rate limiter.
	subreconcile.Enqueue(q, key, subreconcile.Outcome{Err: errDisk})
	if n := q.NumRequeues(key); n != 1 {
		t.Fatalf("after an error: NumRequeues = %d, want 1", n)
	}
	// A terminal error forgets the key and does not add it.
	subreconcile.Enqueue(q, key, subreconcile.Outcome{Err: subreconcile.Terminal(errDisk)})
	if n := q.NumRequeues(key); n != 0 {
		t.Errorf("after a terminal error: NumRequeues = %d, want 0", n)
	}
	// A requeue delay forgets the backoff and adds the key after the delay.
	subreconcile.Enqueue(q, "shop/cart", subreconcile.Outcome{RequeueAfter: 30 * time.Second})
	if q.Len() != 0 {
		t.Fatalf("queue length %d before the delay passed, want 0", q.Len())
	}
	clk.Step(30 * time.Second)
	deadline := time.After(5 * time.Second)
	for q.Len() == 0 {
		select {
		case <-deadline:
			t.Fatal("key not added after the requeue delay")
		case <-time.After(time.Millisecond):
		}
	}
	if item, _ := q.Get(); item != "shop/cart" {
		t.Errorf("queued %q, want shop/cart", item)
	} else {
		q.Done(item)
	}
	// Success forgets.
	subreconcile.Enqueue(q, key, subreconcile.Outcome{Err: errQuorum})
	subreconcile.Enqueue(q, key, subreconcile.Outcome{})
	if n := q.NumRequeues(key); n != 0 {
		t.Errorf("after success: NumRequeues = %d, want 0", n)
	}
	if !errors.Is(subreconcile.Outcome{Err: errQuorum}.Err, errQuorum) {
		t.Error("outcome error lost")
	}
}
