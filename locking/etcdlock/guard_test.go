package etcdlock

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// TestRangeGuardAloneMissesDeletions is why commit also guards every key a
// prefix read listed: on a real etcd, a transaction guarded only by a
// range's mod revisions commits although a key of the range was deleted
// after the read (a deleted key has no mod revision left to compare), while
// the backend, with its per-key guards, conflicts in the same interleaving.
func TestRangeGuardAloneMissesDeletions(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	client, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := t.Context()

	t.Run("range guard only: the deletion goes unnoticed", func(t *testing.T) {
		p := etcd.Prefix + "raw/"
		for _, k := range []string{"set/a", "set/b"} {
			if _, err := client.Put(ctx, p+k, "x"); err != nil {
				t.Fatal(err)
			}
		}
		read, err := client.Get(ctx, p+"set/", clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Delete(ctx, p+"set/b"); err != nil {
			t.Fatal(err)
		}
		resp, err := client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(p+"set/").WithPrefix(), "<", read.Header.Revision+1)).
			Then(clientv3.OpPut(p+"count", string(rune(len(read.Kvs))))).
			Commit()
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Succeeded {
			t.Fatal("etcd refused the range-guarded transaction; the per-key guards would not be needed")
		}
	})

	t.Run("range and per-key guards: conflict", func(t *testing.T) {
		b, err := New(Config{KV: client, Prefix: etcd.Prefix + "backend/"})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"set/a", "set/b"} {
			if err := b.Update(ctx, func(tx locking.Txn) error { return tx.Set([]byte(k), []byte("x")) }); err != nil {
				t.Fatal(err)
			}
		}
		err = b.Update(ctx, func(tx locking.Txn) error {
			kvs, err := tx.GetPrefix(ctx, []byte("set/"))
			if err != nil {
				return err
			}
			if err := b.Update(ctx, func(other locking.Txn) error { return other.Clear([]byte("set/b")) }); err != nil {
				return err
			}
			return tx.Set([]byte("count"), []byte{byte(len(kvs))})
		})
		if !errors.Is(err, locking.ErrConflict) {
			t.Fatalf("Update = %v, want ErrConflict", err)
		}
	})
}
