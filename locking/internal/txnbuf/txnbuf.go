// Package txnbuf buffers the writes of a locking.Txn until commit, for
// backends whose stores have no read-your-writes transactions of their own
// (etcd, the Kubernetes API). It answers reads that the buffered writes
// decide, and merges them into what a backend read from its snapshot.
package txnbuf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// Kind is the kind of a buffered write.
type Kind int

const (
	// Set stores Value at Key.
	Set Kind = iota
	// Clear removes Key.
	Clear
	// ClearPrefix removes every key starting with Key.
	ClearPrefix
)

// Op is one buffered write.
type Op struct {
	Kind  Kind
	Key   []byte // the key, or the prefix for ClearPrefix
	Value []byte // Set only
}

// ErrEmptyPrefix is returned by ClearPrefix for an empty prefix, which the
// locking.Txn contract rejects so that a bug cannot wipe a store.
var ErrEmptyPrefix = errors.New("ClearPrefix with an empty prefix")

// Buffer is a transaction's writes, in the order they were made. The zero
// value is empty and ready to use.
type Buffer struct {
	ops []Op
}

// Set buffers a copy of key and value.
func (b *Buffer) Set(key, value []byte) {
	b.ops = append(b.ops, Op{Kind: Set, Key: bytes.Clone(key), Value: append([]byte{}, value...)})
}

// Clear buffers the removal of key.
func (b *Buffer) Clear(key []byte) {
	b.ops = append(b.ops, Op{Kind: Clear, Key: bytes.Clone(key)})
}

// ClearPrefix buffers the removal of every key under prefix.
func (b *Buffer) ClearPrefix(prefix []byte) error {
	if len(prefix) == 0 {
		return ErrEmptyPrefix
	}
	b.ops = append(b.ops, Op{Kind: ClearPrefix, Key: bytes.Clone(prefix)})
	return nil
}

// Empty reports whether nothing was written.
func (b *Buffer) Empty() bool { return len(b.ops) == 0 }

// Ops returns the buffered writes in order. Applying them in order gives
// the transaction's result; the slice must not be modified.
func (b *Buffer) Ops() []Op { return b.ops }

// Lookup answers a read of key from the buffered writes alone: decided is
// false when no buffered write touches key and the store must be read.
func (b *Buffer) Lookup(key []byte) (value []byte, present, decided bool) {
	for i := len(b.ops) - 1; i >= 0; i-- {
		op := b.ops[i]
		switch {
		case op.Kind == Set && bytes.Equal(op.Key, key):
			return append([]byte{}, op.Value...), true, true
		case op.Kind == Clear && bytes.Equal(op.Key, key):
			return nil, false, true
		case op.Kind == ClearPrefix && bytes.HasPrefix(key, op.Key):
			return nil, false, true
		}
	}
	return nil, false, false
}

// Merge applies the buffered writes to stored, the store's key-value pairs
// under prefix as of the transaction's snapshot, and returns the pairs under
// prefix that the transaction sees, in ascending byte order of keys. The
// result does not alias stored or the buffer.
func (b *Buffer) Merge(prefix []byte, stored []locking.KeyValue) []locking.KeyValue {
	m := make(map[string][]byte, len(stored))
	for _, kv := range stored {
		if bytes.HasPrefix(kv.Key, prefix) {
			m[string(kv.Key)] = kv.Value
		}
	}
	ApplyMap(m, b.ops, prefix)
	out := make([]locking.KeyValue, 0, len(m))
	for k, v := range m {
		out = append(out, locking.KeyValue{Key: []byte(k), Value: append([]byte{}, v...)})
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Key, out[j].Key) < 0 })
	return out
}

// ApplyMap applies ops, in order, to m, a store's content keyed by string
// keys, restricted to keys under within (all keys if within is empty).
func ApplyMap(m map[string][]byte, ops []Op, within []byte) {
	for _, op := range ops {
		switch op.Kind {
		case Set:
			if bytes.HasPrefix(op.Key, within) {
				m[string(op.Key)] = op.Value
			}
		case Clear:
			delete(m, string(op.Key))
		case ClearPrefix:
			for k := range m {
				if bytes.HasPrefix([]byte(k), op.Key) {
					delete(m, k)
				}
			}
		}
	}
}

// Txn is the part of a locking.Txn that backends buffering their writes
// share: the writes (Set, Clear, ClearPrefix into Buf) and the guard that
// serializes calls on one transaction (a caller may read from several
// goroutines) and rejects use after Update returned with
// locking.ErrTxnDone. A backend embeds it, adds Get and GetPrefix (calling
// Lock and Unlock around them), and calls Finish when Update returns.
type Txn struct {
	// Backend names the backend in errors ("etcdlock").
	Backend string
	// CheckKey, when set, vets every key Set is given; its error is
	// returned as it is.
	CheckKey func(key []byte) error
	// Buf holds the writes. Read it between Lock and Unlock.
	Buf Buffer

	mu   sync.Mutex
	done bool
}

// Run is the Update of a backend built on Txn, with self the backend's
// transaction (which embeds t): on a live ctx it calls fn with self, then,
// unless fn failed, commit; fn's error is returned unchanged. t is finished
// when Run returns, so a transaction kept by fn fails with
// locking.ErrTxnDone.
func (t *Txn) Run(ctx context.Context, self locking.Txn, fn func(locking.Txn) error, commit func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer t.Finish()
	if err := fn(self); err != nil {
		return err
	}
	return commit(ctx)
}

// Lock locks the transaction, or returns locking.ErrTxnDone (unlocked) if
// Finish was called.
func (t *Txn) Lock() error {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return locking.ErrTxnDone
	}
	return nil
}

// Unlock unlocks what Lock locked.
func (t *Txn) Unlock() { t.mu.Unlock() }

// Finish makes every later call fail with locking.ErrTxnDone.
func (t *Txn) Finish() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

// Set buffers a write of value at key.
func (t *Txn) Set(key, value []byte) error {
	if err := t.Lock(); err != nil {
		return err
	}
	defer t.Unlock()
	if t.CheckKey != nil {
		if err := t.CheckKey(key); err != nil {
			return err
		}
	}
	t.Buf.Set(key, value)
	return nil
}

// Clear buffers the removal of key.
func (t *Txn) Clear(key []byte) error {
	if err := t.Lock(); err != nil {
		return err
	}
	defer t.Unlock()
	t.Buf.Clear(key)
	return nil
}

// ClearPrefix buffers the removal of every key under prefix; the empty
// prefix is refused (ErrEmptyPrefix).
func (t *Txn) ClearPrefix(prefix []byte) error {
	if err := t.Lock(); err != nil {
		return err
	}
	defer t.Unlock()
	if err := t.Buf.ClearPrefix(prefix); err != nil {
		return fmt.Errorf("%s: %w", t.Backend, err)
	}
	return nil
}
