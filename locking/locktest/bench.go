package locktest

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// RunBenchmarks measures a backend, reporting for each benchmark the
// transactions per operation ("txn/op") next to the time:
//
//   - TakeExtend: an uncontended instance extending its lock; also reports
//     the median latency of one Take ("p50-ns").
//   - TakeRelease: one instance taking and releasing.
//   - TakeRelease8: 8 contenders taking and releasing; an operation is one
//     successful take+release cycle, so ns/op is the inverse of the cycle
//     throughput, and "attempts/op" counts refused takes too.
//
// newBackend is called once per benchmark.
func RunBenchmarks(b *testing.B, newBackend func(b *testing.B) locking.Backend) {
	b.Run("TakeExtend", func(b *testing.B) { benchTakeExtend(b, Counting(newBackend(b))) })
	b.Run("TakeRelease", func(b *testing.B) { benchTakeRelease(b, Counting(newBackend(b))) })
	b.Run("TakeRelease8", func(b *testing.B) { benchTakeRelease8(b, Counting(newBackend(b))) })
}

// benchTakeExtend measures an uncontended holder extending its lock.
func benchTakeExtend(b *testing.B, backend *CountingBackend) {
	l := benchLock(b, backend, "dc1")
	ctx := b.Context()
	if _, err := l.Take(ctx); err != nil {
		b.Fatal(err)
	}
	// Latency is wall time, so this reads the real clock; the lock itself
	// runs on a fake one.
	wall := clock.RealClock{}
	lat := make([]time.Duration, 0, 1<<16)
	start := backend.Transactions()
	for b.Loop() {
		t0 := wall.Now()
		lease, err := l.Take(ctx)
		if len(lat) < cap(lat) {
			lat = append(lat, wall.Since(t0))
		}
		if err != nil || lease.Outcome != locking.OutcomeExtended {
			b.Fatalf("Take = %+v, %v; want Extended", lease, err)
		}
	}
	b.StopTimer()
	reportTxn(b, backend.Transactions()-start)
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	}
}

// benchTakeRelease measures one instance taking and releasing.
func benchTakeRelease(b *testing.B, backend *CountingBackend) {
	l := benchLock(b, backend, "dc1")
	ctx := b.Context()
	start := backend.Transactions()
	for b.Loop() {
		if lease, err := l.Take(ctx); err != nil || lease.Outcome != locking.OutcomeTaken {
			b.Fatalf("Take = %+v, %v; want Taken", lease, err)
		}
		if _, _, err := l.Release(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportTxn(b, backend.Transactions()-start)
}

// benchTakeRelease8 measures 8 contenders taking and releasing.
func benchTakeRelease8(b *testing.B, backend *CountingBackend) {
	const contenders = 8
	ctx := b.Context()
	var ids, attempts atomic.Int64
	b.SetParallelism(max(1, contenders/runtime.GOMAXPROCS(0)))
	start := backend.Transactions()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		l := benchLock(b, backend, fmt.Sprintf("contender-%d", ids.Add(1)))
		for pb.Next() {
			for {
				attempts.Add(1)
				_, err := l.Take(ctx)
				if err == nil {
					break
				}
				if !errors.Is(err, locking.ErrLocked) && !errors.Is(err, locking.ErrConflict) {
					b.Error(err)
					return
				}
				runtime.Gosched()
			}
			if _, _, err := l.Release(ctx, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	reportTxn(b, backend.Transactions()-start)
	b.ReportMetric(float64(attempts.Load())/float64(b.N), "attempts/op")
}

// benchLock is on a clock that never moves, so no lock expires mid-run.
func benchLock(b *testing.B, backend locking.Backend, id string) *locking.Lock {
	l, err := locking.New(locking.Config{Backend: backend, LockID: id, Prefix: locking.DefaultPrefix + "/locktest/" + b.Name(),
		Clock: clocktesting.NewFakeClock(epoch)})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func reportTxn(b *testing.B, n int64) {
	b.ReportMetric(float64(n)/float64(b.N), "txn/op")
}
