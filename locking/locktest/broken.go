package locktest

import (
	"context"
	"time"

	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/internal/txnbuf"
)

// WithoutIsolation breaks a backend on purpose, to show that a check
// catches a backend without isolation: each Update runs fn's reads in one
// read-only transaction of b, then, after a short pause, applies fn's writes
// blindly in a second one. A concurrent commit between the two goes
// unnoticed, as with a backend that drops its conflict checks, so two
// instances can both see a free lock and both take it. Everything else
// (the stored bytes, errors, read-your-writes for Get) is b's.
func WithoutIsolation(b locking.Backend) locking.Backend { return brokenBackend{b} }

type brokenBackend struct{ locking.Backend }

func (b brokenBackend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	var buf txnbuf.Buffer
	if err := b.Backend.Update(ctx, func(tx locking.Txn) error {
		return fn(&brokenTxn{Txn: tx, buf: &buf})
	}); err != nil {
		return err
	}
	if buf.Empty() {
		return nil
	}
	// Widen the window in which another transaction can commit.
	<-clock.RealClock{}.After(time.Millisecond)
	return b.Backend.Update(ctx, func(tx locking.Txn) error {
		for _, op := range buf.Ops() {
			var err error
			switch op.Kind {
			case txnbuf.Set:
				err = tx.Set(op.Key, op.Value)
			case txnbuf.Clear:
				err = tx.Clear(op.Key)
			case txnbuf.ClearPrefix:
				err = tx.ClearPrefix(op.Key)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// brokenTxn reads from the read-only transaction and buffers writes.
type brokenTxn struct {
	locking.Txn
	buf *txnbuf.Buffer
}

func (t *brokenTxn) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if v, ok, decided := t.buf.Lookup(key); decided {
		return v, ok, nil
	}
	return t.Txn.Get(ctx, key)
}

func (t *brokenTxn) GetPrefix(ctx context.Context, prefix []byte) ([]locking.KeyValue, error) {
	kvs, err := t.Txn.GetPrefix(ctx, prefix)
	if err != nil {
		return nil, err
	}
	return t.buf.Merge(prefix, kvs), nil
}

func (t *brokenTxn) Set(key, value []byte) error { t.buf.Set(key, value); return nil }
func (t *brokenTxn) Clear(key []byte) error      { t.buf.Clear(key); return nil }
func (t *brokenTxn) ClearPrefix(prefix []byte) error {
	return t.buf.ClearPrefix(prefix)
}
