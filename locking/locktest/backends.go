package locktest

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// CountingBackend wraps a Backend and counts the transactions run through
// it, for tests and benchmarks that check how many transactions an
// operation costs.
type CountingBackend struct {
	locking.Backend
	n atomic.Int64
}

// Counting wraps b.
func Counting(b locking.Backend) *CountingBackend { return &CountingBackend{Backend: b} }

// Update counts one transaction and runs it on the wrapped backend.
func (c *CountingBackend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	c.n.Add(1)
	return c.Backend.Update(ctx, fn)
}

// Transactions returns how many transactions were started so far.
func (c *CountingBackend) Transactions() int64 { return c.n.Load() }

// pausingBackend runs the first transaction's function, then blocks before
// returning to the backend (so before commit) until release is closed. It
// interleaves two transactions deterministically without assuming anything
// about the backend's internals.
type pausingBackend struct {
	locking.Backend
	once    sync.Once
	paused  chan struct{} // closed when the first transaction is paused
	release chan struct{} // close to let it commit
}

func newPausing(b locking.Backend) *pausingBackend {
	return &pausingBackend{Backend: b, paused: make(chan struct{}), release: make(chan struct{})}
}

func (p *pausingBackend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	first := false
	p.once.Do(func() { first = true })
	if !first {
		return p.Backend.Update(ctx, fn)
	}
	return p.Backend.Update(ctx, func(tx locking.Txn) error {
		err := fn(tx)
		close(p.paused)
		<-p.release
		return err
	})
}

// yieldingBackend yields the processor after every read inside a
// transaction, so that concurrent transactions interleave between their
// reads and their commit even on a fast in-process backend.
type yieldingBackend struct{ locking.Backend }

func (y yieldingBackend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	return y.Backend.Update(ctx, func(tx locking.Txn) error { return fn(yieldingTxn{tx}) })
}

type yieldingTxn struct{ locking.Txn }

func (y yieldingTxn) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	v, ok, err := y.Txn.Get(ctx, key)
	runtime.Gosched()
	return v, ok, err
}

func (y yieldingTxn) GetPrefix(ctx context.Context, prefix []byte) ([]locking.KeyValue, error) {
	kvs, err := y.Txn.GetPrefix(ctx, prefix)
	runtime.Gosched()
	return kvs, err
}
