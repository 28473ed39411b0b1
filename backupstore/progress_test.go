package backupstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
)

// blockFirst returns a callback whose first call blocks until release is
// closed (or 20 s pass), and a function returning every call's argument.
func blockFirst[T any](release <-chan struct{}) (func(T), func() []T) {
	var mu sync.Mutex
	var calls []T
	first := true
	return func(v T) {
			mu.Lock()
			wait := first
			first = false
			mu.Unlock()
			if wait {
				select {
				case <-release:
				case <-time.After(20 * time.Second):
				}
			}
			mu.Lock()
			calls = append(calls, v)
			mu.Unlock()
		}, func() []T {
			mu.Lock()
			defer mu.Unlock()
			return append([]T(nil), calls...)
		}
}

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestCopySlowProgressDoesNotStallWorkers: while the first Progress call
// blocks, the workers copy every object; the calls then arrive in order,
// one per object, all before CopyBackups returns.
func TestCopySlowProgressDoesNotStallWorkers(t *testing.T) {
	src, dst := openURL(t, "mem://", nil), openURL(t, "mem://", nil)
	const n = 40
	fill(t, src, "b/", n, 10)
	release := make(chan struct{})
	progress, calls := blockFirst[backupstore.CopyProgress](release)
	type result struct {
		res *backupstore.CopyResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := backupstore.CopyBackups(context.Background(), src, dst, &backupstore.CopyOptions{Concurrency: 4, Progress: progress})
		done <- result{res, err}
	}()
	var landed int
	waitFor(func() bool {
		objs, _, _ := dst.ListPage(context.Background(), blob.FirstPageToken, 1000, nil)
		landed = len(objs)
		return landed == n
	})
	close(release)
	if landed != n {
		t.Errorf("while the first Progress call was blocked, %d of %d objects landed; want all", landed, n)
	}
	r := <-done
	if r.err != nil || r.res.Copied != n {
		t.Fatalf("CopyBackups = %+v, %v; want %d copied", r.res, r.err, n)
	}
	got := calls()
	if len(got) != n || got[len(got)-1].Copied != n {
		t.Fatalf("%d Progress calls, last %+v, when CopyBackups returned; want %d, the last with %d copied", len(got), got[len(got)-1], n, n)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Copied <= got[i-1].Copied {
			t.Errorf("call %d: %+v after %+v; want the totals in order", i, got[i], got[i-1])
		}
	}
}

// TestDeletePrefixSlowProgressDoesNotStallDeletion: while the first
// Progress call blocks, every object is deleted; the calls arrive in order,
// the last with Done, all before DeletePrefix returns.
func TestDeletePrefixSlowProgressDoesNotStallDeletion(t *testing.T) {
	b := openURL(t, "mem://", nil)
	const n = 200
	fill(t, b, "backups/p/", n, 10)
	release := make(chan struct{})
	progress, calls := blockFirst[backupstore.DeleteProgress](release)
	type result struct {
		res *backupstore.DeleteResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := backupstore.DeletePrefix(context.Background(), b, "backups/p/", &backupstore.DeleteOptions{Progress: progress})
		done <- result{res, err}
	}()
	var left int
	waitFor(func() bool {
		objs, _, _ := b.ListPage(context.Background(), blob.FirstPageToken, 1000, nil)
		left = len(objs)
		return left == 0
	})
	close(release)
	if left != 0 {
		t.Errorf("while the first Progress call was blocked, %d of %d objects were deleted; want all", n-left, n)
	}
	r := <-done
	if r.err != nil || r.res.Deleted != n {
		t.Fatalf("DeletePrefix = %+v, %v; want %d deleted", r.res, r.err, n)
	}
	got := calls()
	if len(got) == 0 || !got[len(got)-1].Done || got[len(got)-1].Deleted != n {
		t.Fatalf("Progress calls when DeletePrefix returned: %+v; want the last Done with %d deleted", got, n)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Deleted < got[i-1].Deleted || got[i].Listed < got[i-1].Listed {
			t.Errorf("call %d: %+v after %+v; want the totals in order", i, got[i], got[i-1])
		}
	}
}
