package etcdlock

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/groundskeeper-io/groundskeeper/locking/internal/txnbuf"
)

// etcd rejects a Txn whose puts and deletes overlap, so writeOps must
// reduce buffered writes to disjoint operations with the same effect.
func TestWriteOps(t *testing.T) {
	type op struct {
		kind     string // "put", "delete", "range"
		key, end string
		value    string
	}
	describe := func(ops []clientv3.Op) []op {
		var out []op
		for _, o := range ops {
			switch {
			case o.IsPut():
				out = append(out, op{kind: "put", key: string(o.KeyBytes()), value: string(o.ValueBytes())})
			case o.IsDelete() && len(o.RangeBytes()) > 0:
				out = append(out, op{kind: "range", key: string(o.KeyBytes()), end: string(o.RangeBytes())})
			default:
				out = append(out, op{kind: "delete", key: string(o.KeyBytes())})
			}
		}
		return out
	}
	for _, c := range []struct {
		name  string
		build func(b *txnbuf.Buffer)
		want  []op
	}{
		{"set then clear of one key is one delete", func(b *txnbuf.Buffer) {
			b.Set([]byte("k"), []byte("v"))
			b.Clear([]byte("k"))
		}, []op{{kind: "delete", key: "/k"}}},
		{"clear prefix then set inside splits the range around the key", func(b *txnbuf.Buffer) {
			b.ClearPrefix([]byte("c/"))
			b.Set([]byte("c/m"), []byte("v"))
		}, []op{
			{kind: "put", key: "/c/m", value: "v"},
			{kind: "range", key: "/c/", end: "/c/m"},
			{kind: "range", key: "/c/m\x00", end: "/c0"},
		}},
		{"a set before the clear is cleared, a delete inside is redundant", func(b *txnbuf.Buffer) {
			b.Set([]byte("c/a"), []byte("v"))
			b.ClearPrefix([]byte("c/"))
			b.Clear([]byte("c/b"))
		}, []op{{kind: "range", key: "/c/", end: "/c0"}}},
		{"a prefix inside a cleared prefix is dropped", func(b *txnbuf.Buffer) {
			b.ClearPrefix([]byte("c/x/"))
			b.ClearPrefix([]byte("c/"))
		}, []op{{kind: "range", key: "/c/", end: "/c0"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b txnbuf.Buffer
			c.build(&b)
			got := describe(writeOps("/", b.Ops()))
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(op{})); diff != "" {
				t.Fatalf("writeOps (-want +got):\n%s", diff)
			}
		})
	}
}
