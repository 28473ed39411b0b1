package memlock_test

import (
	"testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
)

func TestConformance(t *testing.T) {
	locktest.Run(t, func(*testing.T) locking.Backend { return memlock.New() })
}

func TestTransactionUnusableAfterUpdate(t *testing.T) {
	s := memlock.New()
	var leaked locking.Txn
	if err := s.Update(t.Context(), func(tx locking.Txn) error {
		leaked = tx
		return tx.Set([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := leaked.Set([]byte("k"), []byte("late")); err == nil {
		t.Errorf("Set after Update returned succeeded")
	}
	if _, _, err := leaked.Get(t.Context(), []byte("k")); err == nil {
		t.Errorf("Get after Update returned succeeded")
	}
	if _, err := leaked.GetPrefix(t.Context(), []byte("k")); err == nil {
		t.Errorf("GetPrefix after Update returned succeeded")
	}
}

func TestZeroValueStore(t *testing.T) {
	var s memlock.Store
	l, err := locking.New(locking.Config{Backend: &s, LockID: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(t.Context()); err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := l.Holder(t.Context()); err != nil || !ok || rec.Holder != "dc1" {
		t.Fatalf("Holder = %+v, %v, %v", rec, ok, err)
	}
}

// TestConformanceSharedStore runs the suite twice on one store, as a
// networked backend's test would on one server, and checks that the suite
// leaves nothing behind.
func TestConformanceSharedStore(t *testing.T) {
	shared := memlock.New()
	for range 2 {
		locktest.Run(t, func(*testing.T) locking.Backend { return shared })
	}
	err := shared.Update(t.Context(), func(tx locking.Txn) error {
		kvs, err := tx.GetPrefix(t.Context(), []byte(locking.DefaultPrefix))
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			t.Errorf("left behind: %q = %q", kv.Key, kv.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
