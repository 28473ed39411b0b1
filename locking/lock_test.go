package locking_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
)

func get(t *testing.T, b locking.Backend, key string) ([]byte, bool) {
	t.Helper()
	var v []byte
	var ok bool
	err := b.Update(t.Context(), func(tx locking.Txn) error {
		var err error
		v, ok, err = tx.Get(t.Context(), []byte(key))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}

// TestDefaultKeys pins the FoundationDB operator's key layout under the
// default prefix.
func TestDefaultKeys(t *testing.T) {
	ctx := t.Context()
	store := memlock.New()
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	l, err := locking.New(locking.Config{Backend: store, LockID: "dc1", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx); err != nil {
		t.Fatal(err)
	}
	const prefix = "\xff\x02/org.foundationdb.kubernetes-operator"
	v, ok := get(t, store, prefix+"/global")
	if want := "\x02dc1\x00\x18\x65\x53\xf1\x00\x18\x65\x53\xf3\x58"; !ok || string(v) != want {
		t.Fatalf("%q = %q, %v; want %q", prefix+"/global", v, ok, want)
	}
	if _, err := l.UpdateDenyList(ctx, []locking.DenyListEntry{{ID: "dc2"}}, nil); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, store, prefix+"/denyList/dc2"); !ok || string(v) != "dc2" {
		t.Fatalf("deny key = %q, %v", v, ok)
	}
	if err := l.AddPendingUpgrades(ctx, "7.1.26", []string{"storage-1"}); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, store, prefix+"/upgrades/7.1.26/storage-1"); !ok || string(v) != "storage-1" {
		t.Fatalf("upgrade key = %q, %v", v, ok)
	}
}

// TestTransactionsPerOperation: every lock operation is one transaction when
// uncontended, and none when locking is disabled.
func TestTransactionsPerOperation(t *testing.T) {
	ctx := t.Context()
	store := locktest.Counting(memlock.New())
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	dc1, _ := locking.New(locking.Config{Backend: store, LockID: "dc1", Clock: clk})
	dc2, _ := locking.New(locking.Config{Backend: store, LockID: "dc2", Clock: clk})
	off, _ := locking.New(locking.Config{Backend: store, LockID: "dc3", Clock: clk, Disabled: true})

	steps := []struct {
		name string
		op   func() error
		want int64
	}{
		{"take a free lock", func() error { _, err := dc1.Take(ctx); return err }, 1},
		{"extend", func() error { _, err := dc1.Take(ctx); return err }, 1},
		{"refused take", func() error {
			if _, err := dc2.Take(ctx); !errors.Is(err, locking.ErrLocked) {
				return errors.New("want ErrLocked")
			}
			return nil
		}, 1},
		{"dry-run release", func() error { _, _, err := dc1.Release(ctx, &locking.ReleaseOptions{DryRun: true}); return err }, 1},
		{"release", func() error { _, _, err := dc1.Release(ctx, nil); return err }, 1},
		{"disabled take", func() error { _, err := off.Take(ctx); return err }, 0},
		{"disabled release", func() error { _, _, err := off.Release(ctx, nil); return err }, 0},
		{"holder", func() error { _, _, err := dc1.Holder(ctx); return err }, 1},
	}
	for _, s := range steps {
		before := store.Transactions()
		if err := s.op(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := store.Transactions() - before; got != s.want {
			t.Errorf("%s ran %d transactions, want %d", s.name, got, s.want)
		}
	}
}

// failingBackend conflicts on every transaction.
type failingBackend struct{ *locktest.CountingBackend }

func (f *failingBackend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	_ = f.CountingBackend.Update(ctx, func(locking.Txn) error { return nil })
	return locking.ErrConflict
}

func TestConflictRetriesAreBounded(t *testing.T) {
	f := &failingBackend{CountingBackend: locktest.Counting(memlock.New())}
	l, err := locking.New(locking.Config{Backend: f, LockID: "dc1", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Take(t.Context())
	if !errors.Is(err, locking.ErrConflict) {
		t.Fatalf("Take = %v, want ErrConflict", err)
	}
	if n := f.Transactions(); n != 3 {
		t.Fatalf("ran %d transactions, want 3", n)
	}
}

func TestCanceledContextStopsRetries(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	l, _ := locking.New(locking.Config{Backend: memlock.New(), LockID: "dc1"})
	if _, err := l.Take(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take = %v, want context.Canceled", err)
	}
}
