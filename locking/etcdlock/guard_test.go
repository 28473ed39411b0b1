package etcdlock

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/groundskeeper-io/groundskeeper/internal/testenv"
	"github.com/groundskeeper-io/groundskeeper/locking"
)

// TestRangeGuardAloneMissesDeletions is why commit also guards every key a
// prefix read listed: on a real etcd, a transaction that listed a range
// while a concurrent one deleted a key from it commits if only the range's
// mod revisions are compared, and conflicts with the per-key guards.
func TestRangeGuardAloneMissesDeletions(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := t.Context()
	for i, c := range []struct {
		name            string
		rangeGuardsOnly bool
		wantConflict    bool
	}{
		{"range guard only: the deletion goes unnoticed", true, false},
		{"range and per-key guards: conflict", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &Backend{kv: client, prefix: etcd.Prefix + string(rune('a'+i)) + "/", rangeGuardsOnly: c.rangeGuardsOnly}
			for _, k := range []string{"set/a", "set/b"} {
				if err := b.Update(ctx, func(tx locking.Txn) error { return tx.Set([]byte(k), []byte("x")) }); err != nil {
					t.Fatal(err)
				}
			}
			err := b.Update(ctx, func(tx locking.Txn) error {
				kvs, err := tx.GetPrefix(ctx, []byte("set/"))
				if err != nil {
					return err
				}
				if err := b.Update(ctx, func(other locking.Txn) error { return other.Clear([]byte("set/b")) }); err != nil {
					return err
				}
				return tx.Set([]byte("count"), []byte{byte(len(kvs))})
			})
			if got := errors.Is(err, locking.ErrConflict); got != c.wantConflict {
				t.Fatalf("Update = %v; conflict %v, want %v", err, got, c.wantConflict)
			}
		})
	}
}
