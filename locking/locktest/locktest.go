package locktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/internal/tuple"
	"github.com/groundskeeper-io/groundskeeper/locking"
)

// epoch is the fake clocks' starting time: 2023-11-14T22:13:20Z.
var epoch = time.Unix(1700000000, 0)

// env is one subtest's world: a backend, a prefix and a shared fake clock.
type env struct {
	t       *testing.T
	ctx     context.Context
	backend locking.Backend
	prefix  string
	clock   *clocktesting.FakeClock
}

func newEnv(t *testing.T, newBackend func(t *testing.T) locking.Backend) *env {
	t.Helper()
	b := newBackend(t)
	if b == nil {
		t.Fatal("newBackend returned nil")
	}
	e := &env{
		t:       t,
		ctx:     t.Context(),
		backend: b,
		prefix:  locking.DefaultPrefix + "/locktest/" + t.Name(),
		clock:   clocktesting.NewFakeClock(epoch),
	}
	// Leave a shared server as we found it, so that the suite can run again
	// (-count) against the same one. t.Context is already canceled here.
	t.Cleanup(func() {
		err := b.Update(context.Background(), func(tx locking.Txn) error {
			return tx.ClearPrefix([]byte(e.prefix + "/"))
		})
		if err != nil {
			t.Errorf("cleaning up %q: %v", e.prefix, err)
		}
	})
	return e
}

// lock returns the Lock of instance id on the environment's backend and
// prefix, on the shared clock unless cfg sets one.
func (e *env) lock(id string, cfg *locking.Config) *locking.Lock {
	e.t.Helper()
	var o locking.Config
	if cfg != nil {
		o = *cfg
	}
	o.Backend, o.LockID, o.Prefix = e.backend, id, e.prefix
	if o.Clock == nil {
		o.Clock = e.clock
	}
	l, err := locking.New(o)
	if err != nil {
		e.t.Fatalf("locking.New(%q): %v", id, err)
	}
	return l
}

func (e *env) key(suffix string) []byte { return []byte(e.prefix + "/" + suffix) }

// raw reads a key through the backend.
func (e *env) raw(key []byte) ([]byte, bool) {
	e.t.Helper()
	var v []byte
	var ok bool
	err := e.backend.Update(e.ctx, func(tx locking.Txn) error {
		var err error
		v, ok, err = tx.Get(e.ctx, key)
		return err
	})
	if err != nil {
		e.t.Fatalf("reading %q: %v", key, err)
	}
	return v, ok
}

// put writes a key through the backend.
func (e *env) put(key, value []byte) {
	e.t.Helper()
	err := e.backend.Update(e.ctx, func(tx locking.Txn) error { return tx.Set(key, value) })
	if err != nil {
		e.t.Fatalf("writing %q: %v", key, err)
	}
}

// recordBytes is the FoundationDB operator's lock value.
func recordBytes(t *testing.T, id string, start, end int64) []byte {
	t.Helper()
	b, err := tuple.Tuple{id, start, end}.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantRecord checks the stored lock value byte for byte.
func (e *env) wantRecord(id string, start, end time.Time) {
	e.t.Helper()
	got, ok := e.raw(e.key("global"))
	want := recordBytes(e.t, id, start.Unix(), end.Unix())
	if !ok || !bytes.Equal(got, want) {
		e.t.Fatalf("stored lock value = %q (present %v), want %q (tuple{%q, %d, %d})",
			got, ok, want, id, start.Unix(), end.Unix())
	}
}

func (e *env) wantNoRecord() {
	e.t.Helper()
	if v, ok := e.raw(e.key("global")); ok {
		e.t.Fatalf("lock key holds %q, want it absent", v)
	}
}

func (e *env) take(l *locking.Lock) locking.Lease {
	e.t.Helper()
	lease, err := l.Take(e.ctx)
	if err != nil {
		e.t.Fatalf("Take by %q: %v", l.ID(), err)
	}
	return lease
}

// wantLocked checks that err is ErrLocked from holder with the given end and
// returns the *HeldError.
func wantLocked(t *testing.T, err error, holder string, end time.Time) *locking.HeldError {
	t.Helper()
	if !errors.Is(err, locking.ErrLocked) {
		t.Fatalf("error = %v, want ErrLocked", err)
	}
	var held *locking.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("error %v is not a *locking.HeldError", err)
	}
	if held.Holder != holder || !held.End.Equal(end) {
		t.Fatalf("HeldError holder %q end %s, want %q %s", held.Holder, held.End, holder, end)
	}
	return held
}

// Run runs the conformance suite. newBackend is called once per subtest and
// must return a backend in which the subtest's prefix is empty; it may
// register cleanups on t. Each subtest clears its prefix when it ends.
func Run(t *testing.T, newBackend func(t *testing.T) locking.Backend) {
	t.Run("Backend", func(t *testing.T) { runBackend(t, newBackend) })
	t.Run("Take", func(t *testing.T) { runTake(t, newBackend) })
	t.Run("Release", func(t *testing.T) { runRelease(t, newBackend) })
	t.Run("DenyList", func(t *testing.T) { runDenyList(t, newBackend) })
	t.Run("Corrupt", func(t *testing.T) { runCorrupt(t, newBackend) })
	t.Run("Upgrades", func(t *testing.T) { runUpgrades(t, newBackend) })
	t.Run("Disabled", func(t *testing.T) { runDisabled(t, newBackend) })
	t.Run("Concurrency", func(t *testing.T) { runConcurrency(t, newBackend) })
}

// newBackendFunc is the suite's constructor of a backend (see [Run]).
type newBackendFunc = func(t *testing.T) locking.Backend

// suiteCase is one subtest of the suite.
type suiteCase struct {
	name string
	run  func(t *testing.T, newBackend newBackendFunc)
}

// runCases runs each case as a subtest of t.
func runCases(t *testing.T, newBackend newBackendFunc, cases []suiteCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newBackend) })
	}
}

// runBackend checks the Backend contract (transactions, reads of own
// writes, prefixes, conflicts).
func runBackend(t *testing.T, newBackend newBackendFunc) {
	runCases(t, newBackend, backendCases)
}

// backendCases are runBackend's subtests, in the order a reader takes them.
var backendCases = []suiteCase{
	{"reads see own writes and commits are durable", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		k := e.key("k\x00\xff")
		err := e.backend.Update(e.ctx, func(tx locking.Txn) error {
			if _, ok, err := tx.Get(e.ctx, k); err != nil || ok {
				return fmt.Errorf("Get of a fresh key = ok %v, %v; want absent", ok, err)
			}
			if err := tx.Set(k, []byte("v1")); err != nil {
				return err
			}
			if v, ok, err := tx.Get(e.ctx, k); err != nil || !ok || string(v) != "v1" {
				return fmt.Errorf("Get after Set = %q, %v, %v; want v1", v, ok, err)
			}
			if err := tx.Clear(k); err != nil {
				return err
			}
			if _, ok, err := tx.Get(e.ctx, k); err != nil || ok {
				return fmt.Errorf("Get after Clear = ok %v, %v; want absent", ok, err)
			}
			return tx.Set(k, []byte("v2"))
		})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := e.raw(k); !ok || string(v) != "v2" {
			t.Fatalf("after commit: %q, %v; want v2", v, ok)
		}
	}},

	{"Set copies its arguments", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		k, v := e.key("copy"), []byte("original")
		e.put(k, v)
		copy(v, "CHANGED!")
		if got, _ := e.raw(k); string(got) != "original" {
			t.Fatalf("stored value changed with the caller's slice: %q", got)
		}
	}},

	{"empty value is present", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		k := e.key("empty")
		e.put(k, []byte{})
		if v, ok := e.raw(k); !ok || len(v) != 0 {
			t.Fatalf("Get = %q, %v; want present and empty", v, ok)
		}
	}},

	{"GetPrefix returns keys under the prefix in byte order", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		for _, k := range []string{"p/b", "p/\xff", "p/a", "p/\x00", "p", "p0", "o/z", "p/gone"} {
			e.put(e.key(k), []byte("v-"+k))
		}
		var got []string
		err := e.backend.Update(e.ctx, func(tx locking.Txn) error {
			if err := tx.Set(e.key("p/new"), []byte("v-p/new")); err != nil {
				return err
			}
			if err := tx.Clear(e.key("p/gone")); err != nil {
				return err
			}
			kvs, err := tx.GetPrefix(e.ctx, e.key("p/"))
			if err != nil {
				return err
			}
			got = nil
			for _, kv := range kvs {
				k := string(kv.Key[len(e.prefix)+1:])
				if string(kv.Value) != "v-"+k {
					return fmt.Errorf("key %q has value %q", k, kv.Value)
				}
				got = append(got, k)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"p/\x00", "p/a", "p/b", "p/new", "p/\xff"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("GetPrefix keys (-want +got):\n%s", diff)
		}
	}},

	{"ClearPrefix clears only under the prefix and later writes survive", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		for _, k := range []string{"c/a", "c/b", "c", "c0", "d/a"} {
			e.put(e.key(k), []byte("x"))
		}
		err := e.backend.Update(e.ctx, func(tx locking.Txn) error {
			if err := tx.Set(e.key("c/early"), []byte("x")); err != nil {
				return err
			}
			if err := tx.ClearPrefix(e.key("c/")); err != nil {
				return err
			}
			if _, ok, err := tx.Get(e.ctx, e.key("c/a")); err != nil || ok {
				return fmt.Errorf("Get under a cleared prefix = ok %v, %v; want absent", ok, err)
			}
			return tx.Set(e.key("c/late"), []byte("x"))
		})
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]bool{"c/a": false, "c/b": false, "c/early": false, "c/late": true, "c": true, "c0": true, "d/a": true} {
			if _, ok := e.raw(e.key(k)); ok != want {
				t.Errorf("key %q present = %v, want %v", k, ok, want)
			}
		}
		err = e.backend.Update(e.ctx, func(tx locking.Txn) error { return tx.ClearPrefix(nil) })
		if err == nil {
			t.Errorf("ClearPrefix(nil) succeeded, want an error")
		}
	}},

	{"an error from fn commits nothing and is returned unchanged", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		sentinel := errors.New("sentinel")
		k := e.key("aborted")
		err := e.backend.Update(e.ctx, func(tx locking.Txn) error {
			if err := tx.Set(k, []byte("x")); err != nil {
				return err
			}
			return fmt.Errorf("wrapped: %w", sentinel)
		})
		if !errors.Is(err, sentinel) {
			t.Fatalf("Update error = %v, want the function's error", err)
		}
		if _, ok := e.raw(k); ok {
			t.Fatalf("a failed transaction's write was committed")
		}
	}},

	{"a transaction kept after Update returned fails with ErrTxnDone", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		k := e.key("kept")
		var kept locking.Txn
		if err := e.backend.Update(e.ctx, func(tx locking.Txn) error { kept = tx; return nil }); err != nil {
			t.Fatal(err)
		}
		_, _, getErr := kept.Get(e.ctx, k)
		_, prefixErr := kept.GetPrefix(e.ctx, k)
		for name, err := range map[string]error{
			"Get": getErr, "GetPrefix": prefixErr, "Set": kept.Set(k, []byte("x")),
			"Clear": kept.Clear(k), "ClearPrefix": kept.ClearPrefix(k),
		} {
			if !errors.Is(err, locking.ErrTxnDone) {
				t.Errorf("%s after Update returned: error %v, want ErrTxnDone", name, err)
			}
		}
		if _, ok := e.raw(k); ok {
			t.Errorf("a write after Update returned was stored")
		}
	}},

	{"write after a concurrent commit to a read key conflicts", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		k := e.key("contended")
		e.put(k, []byte("0"))
		p := newPausing(e.backend)
		done := make(chan error, 1)
		go func() {
			done <- p.Update(e.ctx, func(tx locking.Txn) error {
				if _, _, err := tx.Get(e.ctx, k); err != nil {
					return err
				}
				return tx.Set(k, []byte("first"))
			})
		}()
		<-p.paused
		e.put(k, []byte("second"))
		close(p.release)
		if err := <-done; !errors.Is(err, locking.ErrConflict) {
			t.Fatalf("first transaction = %v, want ErrConflict", err)
		}
		if v, _ := e.raw(k); string(v) != "second" {
			t.Fatalf("value = %q, want the second transaction's", v)
		}
	}},

	{"write after a concurrent insert under a read prefix conflicts", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		p := newPausing(e.backend)
		done := make(chan error, 1)
		go func() {
			done <- p.Update(e.ctx, func(tx locking.Txn) error {
				kvs, err := tx.GetPrefix(e.ctx, e.key("set/"))
				if err != nil {
					return err
				}
				return tx.Set(e.key("count"), []byte{byte(len(kvs))})
			})
		}()
		<-p.paused
		e.put(e.key("set/member"), []byte("x"))
		close(p.release)
		if err := <-done; !errors.Is(err, locking.ErrConflict) {
			t.Fatalf("first transaction = %v, want ErrConflict", err)
		}
		if _, ok := e.raw(e.key("count")); ok {
			t.Fatalf("the conflicting transaction's write was committed")
		}
	}},

	{"write after a concurrent delete under a read prefix conflicts", func(t *testing.T, newBackend newBackendFunc) {
		// A guard on the newest revision in the range would miss this: a
		// deleted key leaves nothing in the range to compare.
		e := newEnv(t, newBackend)
		e.put(e.key("set/a"), []byte("x"))
		e.put(e.key("set/b"), []byte("x"))
		p := newPausing(e.backend)
		done := make(chan error, 1)
		go func() {
			done <- p.Update(e.ctx, func(tx locking.Txn) error {
				kvs, err := tx.GetPrefix(e.ctx, e.key("set/"))
				if err != nil {
					return err
				}
				return tx.Set(e.key("count"), []byte{byte(len(kvs))})
			})
		}()
		<-p.paused
		err := e.backend.Update(e.ctx, func(tx locking.Txn) error { return tx.Clear(e.key("set/b")) })
		if err != nil {
			t.Fatal(err)
		}
		close(p.release)
		if err := <-done; !errors.Is(err, locking.ErrConflict) {
			t.Fatalf("first transaction = %v, want ErrConflict", err)
		}
		if _, ok := e.raw(e.key("count")); ok {
			t.Fatalf("the conflicting transaction's write was committed")
		}
	}},

	{"concurrent read-modify-write loses no update", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		k := e.key("counter")
		backend := yieldingBackend{e.backend}
		const workers, each = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; {
					err := backend.Update(e.ctx, func(tx locking.Txn) error {
						v, _, err := tx.Get(e.ctx, k)
						if err != nil {
							return err
						}
						var n int
						if len(v) > 0 {
							if _, err := fmt.Sscan(string(v), &n); err != nil {
								return err
							}
						}
						return tx.Set(k, []byte(fmt.Sprint(n+1)))
					})
					switch {
					case err == nil:
						i++
					case errors.Is(err, locking.ErrConflict):
						runtime.Gosched()
					default:
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if v, _ := e.raw(k); string(v) != fmt.Sprint(workers*each) {
			t.Fatalf("counter = %q after %d increments", v, workers*each)
		}
	}},
}

// runTake checks taking the lock.
func runTake(t *testing.T, newBackend newBackendFunc) {
	runCases(t, newBackend, takeCases)
}

// takeCases are runTake's subtests, in the order a reader takes them.
var takeCases = []suiteCase{
	{"free lock is taken for the default duration in the operator's format", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		lease := e.take(e.lock("dc1", nil))
		want := locking.Lease{
			Record:  locking.Record{Holder: "dc1", Start: epoch, End: epoch.Add(locking.DefaultDuration)},
			Outcome: locking.OutcomeTaken,
		}
		if diff := cmp.Diff(want, lease); diff != "" {
			t.Fatalf("lease (-want +got):\n%s", diff)
		}
		e.wantRecord("dc1", epoch, epoch.Add(10*time.Minute))
		rec, ok, err := e.lock("other", nil).Holder(e.ctx)
		if err != nil || !ok || rec != want.Record {
			t.Fatalf("Holder() = %+v, %v, %v; want %+v", rec, ok, err, want.Record)
		}
	}},

	{"holder extends to now plus duration and keeps its start", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", &locking.Config{Duration: 2 * time.Minute})
		e.take(l)
		e.clock.Step(90 * time.Second)
		lease := e.take(l)
		if lease.Outcome != locking.OutcomeExtended || !lease.Start.Equal(epoch) || !lease.End.Equal(epoch.Add(90*time.Second+2*time.Minute)) {
			t.Fatalf("lease = %+v, want Extended from %s to %s", lease, epoch, epoch.Add(210*time.Second))
		}
		e.wantRecord("dc1", epoch, epoch.Add(210*time.Second))
	}},

	{"live lock of another instance is refused with holder and retry time", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		e.take(e.lock("dc1", nil))
		e.clock.Step(4 * time.Minute)
		_, err := e.lock("dc2", nil).Take(e.ctx)
		held := wantLocked(t, err, "dc1", epoch.Add(10*time.Minute))
		// Expiry is "end < now" in whole seconds, so the lock is free one
		// second after its end second began.
		if want := 6*time.Minute + time.Second; held.RequeueAfter != want {
			t.Fatalf("RequeueAfter = %s, want %s", held.RequeueAfter, want)
		}
		e.wantRecord("dc1", epoch, epoch.Add(10*time.Minute))
	}},

	{"expired lock is taken over with a fresh start", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		e.take(e.lock("dc1", nil))
		dc2 := e.lock("dc2", nil)
		e.clock.Step(10 * time.Minute) // the end second itself: still live
		_, err := dc2.Take(e.ctx)
		held := wantLocked(t, err, "dc1", epoch.Add(10*time.Minute))
		e.clock.Step(held.RequeueAfter)
		lease := e.take(dc2)
		now := epoch.Add(10*time.Minute + time.Second)
		if lease.Outcome != locking.OutcomeTakenOver || lease.Previous != "dc1" || !lease.Start.Equal(now) {
			t.Fatalf("lease = %+v, want TakenOver from dc1 starting %s", lease, now)
		}
		e.wantRecord("dc2", now, now.Add(10*time.Minute))
		_, err = e.lock("dc1", nil).Take(e.ctx)
		wantLocked(t, err, "dc2", now.Add(10*time.Minute))
	}},

	{"own expired lock is taken afresh", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", nil)
		e.take(l)
		e.clock.Step(time.Hour)
		lease := e.take(l)
		now := epoch.Add(time.Hour)
		if lease.Outcome != locking.OutcomeTaken || !lease.Start.Equal(now) {
			t.Fatalf("lease = %+v, want Taken starting %s", lease, now)
		}
		e.wantRecord("dc1", now, now.Add(10*time.Minute))
	}},

	{"clock-skew tolerance delays take-over", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		e.take(e.lock("dc1", nil))
		dc2 := e.lock("dc2", &locking.Config{ClockSkewTolerance: 30 * time.Second})
		e.clock.Step(10*time.Minute + time.Second) // expired without tolerance
		_, err := dc2.Take(e.ctx)
		held := wantLocked(t, err, "dc1", epoch.Add(10*time.Minute))
		if held.RequeueAfter != 30*time.Second {
			t.Fatalf("RequeueAfter = %s, want 30s", held.RequeueAfter)
		}
		e.clock.Step(held.RequeueAfter - time.Nanosecond)
		_, err = dc2.Take(e.ctx)
		wantLocked(t, err, "dc1", epoch.Add(10*time.Minute))
		e.clock.Step(time.Nanosecond)
		if lease := e.take(dc2); lease.Outcome != locking.OutcomeTakenOver {
			t.Fatalf("lease = %+v, want TakenOver", lease)
		}
	}},

	{"instances with skewed clocks", func(t *testing.T, newBackend newBackendFunc) {
		// dc2's clock runs 20s ahead. Without tolerance it takes over 20s
		// early by dc1's clock; with 20s tolerance it waits for dc1's end.
		e := newEnv(t, newBackend)
		e.take(e.lock("dc1", nil))
		ahead := clocktesting.NewFakeClock(epoch.Add(20 * time.Second))
		e.clock.Step(9*time.Minute + 41*time.Second)
		ahead.Step(9*time.Minute + 41*time.Second)
		tolerant := e.lock("dc2", &locking.Config{Clock: ahead, ClockSkewTolerance: 20 * time.Second})
		_, err := tolerant.Take(e.ctx)
		wantLocked(t, err, "dc1", epoch.Add(10*time.Minute))
		naive := e.lock("dc2", &locking.Config{Clock: ahead})
		if lease := e.take(naive); lease.Outcome != locking.OutcomeTakenOver {
			t.Fatalf("lease = %+v, want TakenOver (the overlap the tolerance exists to prevent)", lease)
		}
	}},

	{"options are validated", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		for name, c := range map[string]struct {
			id   string
			cfg  locking.Config
			want string
		}{
			"empty lockID":            {"", locking.Config{}, "Config.LockID is empty"},
			"lockID not UTF-8":        {"\xff", locking.Config{}, `Config.LockID = "\xff"`},
			"sub-second duration":     {"a", locking.Config{Duration: time.Millisecond}, "Config.Duration = 1ms"},
			"negative skew tolerance": {"a", locking.Config{ClockSkewTolerance: -time.Second}, "Config.ClockSkewTolerance = -1s"},
			"negative max attempts":   {"a", locking.Config{MaxAttempts: -1}, "Config.MaxAttempts = -1"},
			"negative duration":       {"a", locking.Config{Duration: -time.Minute}, "Config.Duration = -1m0s"},
		} {
			c.cfg.Backend, c.cfg.LockID = e.backend, c.id
			_, err := locking.New(c.cfg)
			if !errors.Is(err, locking.ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: New = %v, want ErrInvalidConfig naming %s", name, err, c.want)
			}
		}
		if _, err := locking.New(locking.Config{Backend: nil, LockID: "a"}); err == nil {
			t.Errorf("New with a nil backend succeeded")
		}
	}},
}

func runRelease(t *testing.T, newBackend func(t *testing.T) locking.Backend) {
	t.Run("holder releases", func(t *testing.T) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", nil)
		e.take(l)
		e.clock.Step(time.Minute)
		if _, _, err := l.Release(e.ctx, nil); err != nil {
			t.Fatal(err)
		}
		e.wantNoRecord()
		if lease := e.take(e.lock("dc2", nil)); lease.Outcome != locking.OutcomeTaken {
			t.Fatalf("after release: lease %+v, want Taken", lease)
		}
	})

	t.Run("a dry run reports the record it would clear and keeps it", func(t *testing.T) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", nil)
		e.take(l)
		dry := &locking.ReleaseOptions{DryRun: true}
		want := locking.Record{Holder: "dc1", Start: epoch, End: epoch.Add(10 * time.Minute)}
		rec, ok, err := l.Release(e.ctx, dry)
		if err != nil || !ok || !rec.Start.Equal(want.Start) || !rec.End.Equal(want.End) || rec.Holder != want.Holder {
			t.Fatalf("dry-run Release = %+v, %v, %v; want %+v, true, nil", rec, ok, err, want)
		}
		e.wantRecord("dc1", epoch, epoch.Add(10*time.Minute))
		if _, _, err := e.lock("dc2", nil).Release(e.ctx, dry); !errors.Is(err, locking.ErrNotHeld) {
			t.Fatalf("dry-run Release by a non-holder = %v, want ErrNotHeld", err)
		}
		e.wantRecord("dc1", epoch, epoch.Add(10*time.Minute))
		rec, ok, err = l.Release(e.ctx, nil)
		if err != nil || !ok || rec.Holder != "dc1" || !rec.End.Equal(want.End) {
			t.Fatalf("Release = %+v, %v, %v; want what the dry run said", rec, ok, err)
		}
		e.wantNoRecord()
		if _, ok, err := l.Release(e.ctx, dry); err != nil || ok {
			t.Fatalf("dry-run Release of an absent lock = %v, %v; want false, nil", ok, err)
		}
	})

	t.Run("absent lock releases without error", func(t *testing.T) {
		e := newEnv(t, newBackend)
		if _, ok, err := e.lock("dc1", nil).Release(e.ctx, nil); err != nil || ok {
			t.Fatal(err)
		}
		e.wantNoRecord()
	})

	refused := func(t *testing.T, e *env, l *locking.Lock, holder string, start, end time.Time) {
		t.Helper()
		_, _, err := l.Release(e.ctx, nil)
		var held *locking.HeldError
		if !errors.Is(err, locking.ErrNotHeld) || !errors.As(err, &held) || held.Holder != holder {
			t.Fatalf("Release = %v, want ErrNotHeld naming %q", err, holder)
		}
		e.wantRecord(holder, start, end)
	}

	t.Run("non-holder is refused", func(t *testing.T) {
		e := newEnv(t, newBackend)
		e.take(e.lock("dc1", nil))
		refused(t, e, e.lock("dc2", nil), "dc1", epoch, epoch.Add(10*time.Minute))
	})

	t.Run("expired lock is not released", func(t *testing.T) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", nil)
		e.take(l)
		e.clock.Step(10*time.Minute + time.Second)
		refused(t, e, l, "dc1", epoch, epoch.Add(10*time.Minute))
	})

	t.Run("lock starting in the future is not released", func(t *testing.T) {
		e := newEnv(t, newBackend)
		ahead := clocktesting.NewFakeClock(epoch.Add(time.Minute))
		e.take(e.lock("dc1", &locking.Config{Clock: ahead}))
		refused(t, e, e.lock("dc1", nil), "dc1", epoch.Add(time.Minute), epoch.Add(11*time.Minute))
	})
}

// updateDenyList applies entries to the deny list as an admin would.
func updateDenyList(t *testing.T, e *env, entries ...locking.DenyListEntry) {
	t.Helper()
	if _, err := e.lock("admin", nil).UpdateDenyList(e.ctx, entries, nil); err != nil {
		t.Fatal(err)
	}
}

func wantDenied(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, locking.ErrDenied) {
		t.Fatalf("error = %v, want ErrDenied", err)
	}
}

// runDenyList checks the deny list.
func runDenyList(t *testing.T, newBackend newBackendFunc) {
	runCases(t, newBackend, denyListCases)
}

// denyListCases are runDenyList's subtests, in the order a reader takes them.
var denyListCases = []suiteCase{
	{"entry is stored under the lock ID as raw bytes", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		updateDenyList(t, e, locking.DenyListEntry{ID: "dc1"}, locking.DenyListEntry{ID: "dc\x002"})
		for _, id := range []string{"dc1", "dc\x002"} {
			if v, ok := e.raw(e.key("denyList/" + id)); !ok || string(v) != id {
				t.Fatalf("deny key for %q = %q, %v; want the ID", id, v, ok)
			}
		}
		ids, err := e.lock("admin", nil).DenyList(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"dc\x002", "dc1"}, ids); diff != "" {
			t.Fatalf("DenyList (-want +got):\n%s", diff)
		}
	}},

	{"denied instance cannot take a free lock", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		updateDenyList(t, e, locking.DenyListEntry{ID: "dc1"})
		_, err := e.lock("dc1", nil).Take(e.ctx)
		wantDenied(t, err)
		e.wantNoRecord()
	}},

	{"denied holder cannot extend", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", nil)
		e.take(l)
		updateDenyList(t, e, locking.DenyListEntry{ID: "dc1"})
		e.clock.Step(time.Minute)
		_, err := l.Take(e.ctx)
		wantDenied(t, err)
		e.wantRecord("dc1", epoch, epoch.Add(10*time.Minute))
	}},

	{"denied holder may still release its live lock", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", nil)
		e.take(l)
		updateDenyList(t, e, locking.DenyListEntry{ID: "dc1"})
		if _, _, err := l.Release(e.ctx, nil); err != nil {
			t.Fatalf("Release = %v", err)
		}
		e.wantNoRecord()
	}},

	{"another instance takes over a denied holder's live lock", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		e.take(e.lock("dc1", nil))
		updateDenyList(t, e, locking.DenyListEntry{ID: "dc1"})
		e.clock.Step(time.Minute)
		lease := e.take(e.lock("dc2", nil))
		if lease.Outcome != locking.OutcomeTakenOver || lease.Previous != "dc1" {
			t.Fatalf("lease = %+v, want TakenOver from dc1", lease)
		}
		e.wantRecord("dc2", epoch.Add(time.Minute), epoch.Add(11*time.Minute))
	}},

	{"allow re-admits and absent entries change nothing", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		updateDenyList(t, e, locking.DenyListEntry{ID: "dc1"}, locking.DenyListEntry{ID: "dc2"})
		updateDenyList(t, e, locking.DenyListEntry{ID: "dc1", Allow: true}) // dc2 absent: stays denied
		ids, err := e.lock("admin", nil).DenyList(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"dc2"}, ids); diff != "" {
			t.Fatalf("DenyList (-want +got):\n%s", diff)
		}
		e.take(e.lock("dc1", nil))
		e.clock.Step(time.Hour)
		_, err = e.lock("dc2", nil).Take(e.ctx)
		wantDenied(t, err)
		updateDenyList(t, e) // an empty spec changes nothing either
		_, err = e.lock("dc2", nil).Take(e.ctx)
		wantDenied(t, err)
		updateDenyList(t, e, locking.DenyListEntry{ID: "never-denied", Allow: true})
		if _, ok := e.raw(e.key("denyList/never-denied")); ok {
			t.Fatalf("allow of an absent entry created a key")
		}
	}},

	{"a dry run reports exactly the entries that would change and writes nothing", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		updateDenyList(t, e, locking.DenyListEntry{ID: "dc1"}, locking.DenyListEntry{ID: "dc2"})
		e.put(e.key("denyList/dc5"), []byte("another value"))
		admin := e.lock("admin", nil)
		spec := []locking.DenyListEntry{
			{ID: "dc1", Allow: true}, // present: removed
			{ID: "dc2"},              // present: unchanged
			{ID: "dc3"},              // absent: added
			{ID: "dc3"},              // listed twice: reported once
			{ID: "dc4", Allow: true}, // absent: unchanged
			{ID: "dc5"},              // another value: rewritten
		}
		want := []locking.DenyListEntry{{ID: "dc1", Allow: true}, {ID: "dc3"}, {ID: "dc5"}}
		got, err := admin.UpdateDenyList(e.ctx, spec, &locking.DenyListOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("dry-run UpdateDenyList (-want +got):\n%s", diff)
		}
		ids, err := admin.DenyList(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"dc1", "dc2", "dc5"}, ids); diff != "" {
			t.Fatalf("a dry run changed the deny list (-want +got):\n%s", diff)
		}
		if v, _ := e.raw(e.key("denyList/dc5")); string(v) != "another value" {
			t.Fatalf("a dry run rewrote dc5's entry to %q", v)
		}
		got, err = admin.UpdateDenyList(e.ctx, spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("UpdateDenyList reported (-want +got):\n%s", diff)
		}
		if got, err := admin.UpdateDenyList(e.ctx, spec, &locking.DenyListOptions{DryRun: true}); err != nil || len(got) != 0 {
			t.Fatalf("after the update, a dry run = %+v, %v; want no change", got, err)
		}
	}},

	{"invalid entries are rejected before anything is written", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		admin := e.lock("admin", nil)
		for name, entries := range map[string][]locking.DenyListEntry{
			"empty id":            {{ID: "dc1"}, {ID: ""}},
			"contradictory entry": {{ID: "dc1"}, {ID: "dc1", Allow: true}},
		} {
			if _, err := admin.UpdateDenyList(e.ctx, entries, nil); err == nil {
				t.Errorf("%s: UpdateDenyList succeeded, want an error", name)
			}
		}
		if _, ok := e.raw(e.key("denyList/dc1")); ok {
			t.Fatalf("a rejected update wrote a deny key")
		}
	}},
}

func runCorrupt(t *testing.T, newBackend func(t *testing.T) locking.Backend) {
	pack := func(t *testing.T, tup tuple.Tuple) []byte {
		b, err := tup.Pack()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name  string
		value func(t *testing.T) []byte
	}{
		{"not a tuple", func(*testing.T) []byte { return []byte("\x42garbage") }},
		{"truncated tuple", func(t *testing.T) []byte { return recordBytes(t, "dc1", 1, 2)[:6] }},
		{"empty value", func(*testing.T) []byte { return []byte{} }},
		{"lockID as a byte string", func(t *testing.T) []byte {
			return pack(t, tuple.Tuple{[]byte("dc1"), epoch.Unix(), epoch.Unix() + 600})
		}},
		{"start as a double", func(t *testing.T) []byte {
			return pack(t, tuple.Tuple{"dc1", float64(epoch.Unix()), epoch.Unix() + 600})
		}},
		{"end beyond int64", func(t *testing.T) []byte {
			return pack(t, tuple.Tuple{"dc1", epoch.Unix(), uint64(math.MaxUint64)})
		}},
		{"two elements", func(t *testing.T) []byte { return pack(t, tuple.Tuple{"dc1", epoch.Unix()}) }},
		{"nested tuple", func(t *testing.T) []byte {
			return pack(t, tuple.Tuple{tuple.Tuple{"dc1", epoch.Unix(), epoch.Unix() + 600}})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, newBackend)
			value := c.value(t)
			e.put(e.key("global"), value)
			l := e.lock("dc1", nil)
			check := func(op string, err error) {
				t.Helper()
				var corrupt *locking.CorruptError
				if !errors.Is(err, locking.ErrCorrupt) || !errors.As(err, &corrupt) {
					t.Fatalf("%s = %v, want ErrCorrupt", op, err)
				}
				if !bytes.Equal(corrupt.Value, value) {
					t.Fatalf("%s: CorruptError.Value = %q, want %q", op, corrupt.Value, value)
				}
			}
			_, err := l.Take(e.ctx)
			check("Take", err)
			e.clock.Step(time.Hour) // not treated as expired either
			_, err = e.lock("dc2", nil).Take(e.ctx)
			check("Take by another instance", err)
			_, _, err = l.Release(e.ctx, nil)
			check("Release", err)
			_, _, err = l.Holder(e.ctx)
			check("Holder", err)
			if got, ok := e.raw(e.key("global")); !ok || !bytes.Equal(got, value) {
				t.Fatalf("corrupt value was changed to %q (present %v)", got, ok)
			}
		})
	}

	t.Run("record written by the FoundationDB operator is read", func(t *testing.T) {
		e := newEnv(t, newBackend)
		// The operator's bytes for tuple{"dc1", 1700000000, 1700000600},
		// written by hand, with a fourth element the operator would ignore.
		value := []byte("\x02dc1\x00\x18\x65\x53\xf1\x00\x18\x65\x53\xf3\x58\x02future\x00")
		e.put(e.key("global"), value)
		_, err := e.lock("dc2", nil).Take(e.ctx)
		wantLocked(t, err, "dc1", epoch.Add(10*time.Minute))
		lease := e.take(e.lock("dc1", nil))
		if lease.Outcome != locking.OutcomeExtended || !lease.Start.Equal(epoch) {
			t.Fatalf("lease = %+v, want Extended keeping start %s", lease, epoch)
		}
	})
}

// runUpgrades checks pending upgrades.
func runUpgrades(t *testing.T, newBackend newBackendFunc) {
	runCases(t, newBackend, upgradeCases)
}

// upgradeCases are runUpgrades's subtests, in the order a reader takes them.
var upgradeCases = []suiteCase{
	{"add, get and clear use the operator's keys", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		a, b := e.lock("dc1", nil), e.lock("dc2", nil)
		if err := a.AddPendingUpgrades(e.ctx, "7.1.26", []string{"storage-1", "log-1"}); err != nil {
			t.Fatal(err)
		}
		if err := b.AddPendingUpgrades(e.ctx, "7.1.26", []string{"storage-9"}); err != nil {
			t.Fatal(err)
		}
		if err := b.AddPendingUpgrades(e.ctx, "7.1.2", []string{"stale"}); err != nil {
			t.Fatal(err)
		}
		if v, ok := e.raw(e.key("upgrades/7.1.26/storage-1")); !ok || string(v) != "storage-1" {
			t.Fatalf("upgrade key = %q, %v; want the process group ID", v, ok)
		}
		got, err := a.PendingUpgrades(e.ctx, "7.1.26")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"storage-1": true, "log-1": true, "storage-9": true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("PendingUpgrades (-want +got):\n%s", diff)
		}
		if _, err := a.ClearPendingUpgrades(e.ctx, nil); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{"7.1.26", "7.1.2"} {
			got, err := b.PendingUpgrades(e.ctx, v)
			if err != nil || len(got) != 0 {
				t.Fatalf("after clear, PendingUpgrades(%q) = %v, %v; want empty", v, got, err)
			}
		}
	}},

	{"a dry run lists the records a clear would remove and removes none", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", nil)
		if err := l.AddPendingUpgrades(e.ctx, "7.1.26", []string{"storage-1", "log-1"}); err != nil {
			t.Fatal(err)
		}
		if err := l.AddPendingUpgrades(e.ctx, "7.1.2", []string{"stale"}); err != nil {
			t.Fatal(err)
		}
		want := []locking.PendingUpgrade{{Version: "7.1.2", ProcessGroupID: "stale"}, {Version: "7.1.26", ProcessGroupID: "log-1"}, {Version: "7.1.26", ProcessGroupID: "storage-1"}}
		got, err := l.ClearPendingUpgrades(e.ctx, &locking.ClearUpgradesOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("dry-run ClearPendingUpgrades (-want +got):\n%s", diff)
		}
		for _, k := range []string{"upgrades/7.1.26/storage-1", "upgrades/7.1.26/log-1", "upgrades/7.1.2/stale"} {
			if _, ok := e.raw(e.key(k)); !ok {
				t.Fatalf("a dry run removed %s", k)
			}
		}
		if _, err := l.ClearPendingUpgrades(e.ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := l.ClearPendingUpgrades(e.ctx, &locking.ClearUpgradesOptions{DryRun: true}); err != nil || len(got) != 0 {
			t.Fatalf("after the clear, a dry run = %+v, %v; want nothing", got, err)
		}
	}},

	{"a clear of the records read keeps the records added since", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", nil)
		if err := l.AddPendingUpgrades(e.ctx, "7.1.26", []string{"storage-1", "log-1"}); err != nil {
			t.Fatal(err)
		}
		read, err := l.ClearPendingUpgrades(e.ctx, &locking.ClearUpgradesOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		// Another instance records a process group ready after the read.
		if err := e.lock("dc2", nil).AddPendingUpgrades(e.ctx, "7.1.26", []string{"storage-2"}); err != nil {
			t.Fatal(err)
		}
		// A record read that someone else cleared meanwhile is skipped.
		if _, err := e.lock("dc2", nil).ClearPendingUpgrades(e.ctx, &locking.ClearUpgradesOptions{Only: []locking.PendingUpgrade{{Version: "7.1.26", ProcessGroupID: "log-1"}}}); err != nil {
			t.Fatal(err)
		}
		dry, err := l.ClearPendingUpgrades(e.ctx, &locking.ClearUpgradesOptions{Only: read, DryRun: true})
		if want := []locking.PendingUpgrade{{Version: "7.1.26", ProcessGroupID: "storage-1"}}; err != nil || !cmp.Equal(dry, want) {
			t.Fatalf("dry run of the clear of the records read: %+v, %v; want %+v", dry, err, want)
		}
		cleared, err := l.ClearPendingUpgrades(e.ctx, &locking.ClearUpgradesOptions{Only: read})
		if want := []locking.PendingUpgrade{{Version: "7.1.26", ProcessGroupID: "storage-1"}}; err != nil || !cmp.Equal(cleared, want) {
			t.Fatalf("clear of the records read: %+v, %v; want %+v", cleared, err, want)
		}
		got, err := l.PendingUpgrades(e.ctx, "7.1.26")
		if want := map[string]bool{"storage-2": true}; err != nil || !cmp.Equal(got, want) {
			t.Fatalf("after the clear of the records read: %v, %v; want the one added since, %v", got, err, want)
		}
		if _, err := l.ClearPendingUpgrades(e.ctx, &locking.ClearUpgradesOptions{Only: []locking.PendingUpgrade{{Version: "7.1/x", ProcessGroupID: "a"}}}); !errors.Is(err, locking.ErrInvalidConfig) || !strings.Contains(err.Error(), "Only[0]") {
			t.Errorf("Only with an invalid version: %v; want ErrInvalidConfig naming Only[0]", err)
		}
		if _, err := l.ClearPendingUpgrades(e.ctx, nil); err != nil {
			t.Fatal(err)
		}
	}},

	{"invalid input is rejected", func(t *testing.T, newBackend newBackendFunc) {
		e := newEnv(t, newBackend)
		l := e.lock("dc1", nil)
		if err := l.AddPendingUpgrades(e.ctx, "7.1/x", []string{"a"}); err == nil {
			t.Errorf("version with '/' accepted")
		}
		if err := l.AddPendingUpgrades(e.ctx, "", []string{"a"}); err == nil {
			t.Errorf("empty version accepted")
		}
		if err := l.AddPendingUpgrades(e.ctx, "7.1.26", []string{"a", ""}); err == nil {
			t.Errorf("empty process group ID accepted")
		}
		if got, err := l.PendingUpgrades(e.ctx, "7.1.26"); err != nil || len(got) != 0 {
			t.Fatalf("rejected input wrote records: %v, %v", got, err)
		}
	}},
}

func runDisabled(t *testing.T, newBackend func(t *testing.T) locking.Backend) {
	t.Run("take and release succeed without touching the backend", func(t *testing.T) {
		e := newEnv(t, newBackend)
		e.take(e.lock("dc1", nil))
		deny(e, "dc2")
		counting := Counting(e.backend)
		l, err := locking.New(locking.Config{Backend: counting, LockID: "dc2", Prefix: e.prefix, Clock: e.clock, Disabled: true})
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.Take(e.ctx)
		if err != nil || lease.Outcome != locking.OutcomeBypassed {
			t.Fatalf("Take = %+v, %v; want Bypassed", lease, err)
		}
		if _, _, err := l.Release(e.ctx, nil); err != nil {
			t.Fatalf("Release = %v", err)
		}
		if n := counting.Transactions(); n != 0 {
			t.Fatalf("disabled lock ran %d transactions", n)
		}
		e.wantRecord("dc1", epoch, epoch.Add(10*time.Minute))
	})
}

func deny(e *env, id string) {
	e.t.Helper()
	if _, err := e.lock("admin", nil).UpdateDenyList(e.ctx, []locking.DenyListEntry{{ID: id}}, nil); err != nil {
		e.t.Fatal(err)
	}
}

func runConcurrency(t *testing.T, newBackend func(t *testing.T) locking.Backend) {
	// dc1's take reads a free lock and is held before commit while dc2 takes
	// the lock. dc1's commit must conflict.
	interleave := func(t *testing.T, maxAttempts int) (*env, error) {
		e := newEnv(t, newBackend)
		p := newPausing(e.backend)
		dc1, err := locking.New(locking.Config{Backend: p, LockID: "dc1", Prefix: e.prefix, Clock: e.clock, MaxAttempts: maxAttempts})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := dc1.Take(e.ctx)
			done <- err
		}()
		<-p.paused
		if lease := e.take(e.lock("dc2", nil)); lease.Outcome != locking.OutcomeTaken {
			t.Fatalf("dc2 lease = %+v, want Taken", lease)
		}
		close(p.release)
		return e, <-done
	}

	t.Run("conflicting take without retry fails with ErrConflict", func(t *testing.T) {
		e, err := interleave(t, 1)
		if !errors.Is(err, locking.ErrConflict) {
			t.Fatalf("dc1 Take = %v, want ErrConflict", err)
		}
		e.wantRecord("dc2", epoch, epoch.Add(10*time.Minute))
	})

	t.Run("conflicting take retries and sees the winner", func(t *testing.T) {
		e, err := interleave(t, 0)
		wantLocked(t, err, "dc2", epoch.Add(10*time.Minute))
		e.wantRecord("dc2", epoch, epoch.Add(10*time.Minute))
	})

	t.Run("deny-list update conflicts with a concurrent take by the denied instance", func(t *testing.T) {
		e := newEnv(t, newBackend)
		p := newPausing(e.backend)
		dc1, err := locking.New(locking.Config{Backend: p, LockID: "dc1", Prefix: e.prefix, Clock: e.clock})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := dc1.Take(e.ctx)
			done <- err
		}()
		<-p.paused
		deny(e, "dc1")
		close(p.release)
		if err := <-done; !errors.Is(err, locking.ErrDenied) {
			t.Fatalf("dc1 Take = %v, want ErrDenied after the retry", err)
		}
		e.wantNoRecord()
	})

	t.Run("contenders never hold the lock together", func(t *testing.T) {
		e := newEnv(t, newBackend)
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
		defer cancel()
		if err := Exclusion(ctx, e.backend, e.prefix, 8, 20); err != nil {
			t.Fatal(err)
		}
	})
}

// Exclusion has contenders instances take and release the lock under prefix
// until each has held it rounds times, on a clock that never moves (so no
// lock expires). It returns an error if two instances ever held the lock at
// once, or if a holder's release was refused, which means its record was
// overwritten while it held the lock. Transactions yield the processor after
// each read, to make interleavings likely on any backend.
func Exclusion(ctx context.Context, backend locking.Backend, prefix string, contenders, rounds int) error {
	backend = yieldingBackend{backend}
	clk := clocktesting.NewFakeClock(epoch)
	// The first failure stops every contender: a contender that failed while
	// holding the lock would otherwise leave the others waiting forever.
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	var inside atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, contenders)
	fail := func(err error) {
		errs <- err
		cancel()
	}
	for i := range contenders {
		l, err := locking.New(locking.Config{Backend: backend, LockID: fmt.Sprintf("contender-%d", i), Prefix: prefix, Clock: clk})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for held := 0; held < rounds; {
				if stop.Err() != nil {
					if err := ctx.Err(); err != nil {
						fail(fmt.Errorf("%s after %d of %d rounds: %w", l.ID(), held, rounds, err))
					}
					return
				}
				lease, err := l.Take(stop)
				if errors.Is(err, locking.ErrLocked) || errors.Is(err, locking.ErrConflict) || (err != nil && stop.Err() != nil) {
					runtime.Gosched()
					continue
				}
				if err != nil {
					fail(fmt.Errorf("%s: Take: %w", l.ID(), err))
					return
				}
				if lease.Outcome != locking.OutcomeTaken {
					fail(fmt.Errorf("%s: Take outcome %s on a clock that never moves, want Taken", l.ID(), lease.Outcome))
					return
				}
				if n := inside.Add(1); n != 1 {
					fail(fmt.Errorf("%s: %d instances hold the lock at once", l.ID(), n))
					return
				}
				runtime.Gosched()
				inside.Add(-1)
				if _, _, err := l.Release(stop, nil); err != nil {
					if stop.Err() == nil || errors.Is(err, locking.ErrNotHeld) {
						fail(fmt.Errorf("%s: Release of a lock it had taken: %w", l.ID(), err))
					}
					return
				}
				held++
			}
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}
