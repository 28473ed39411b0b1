// Package memlock is an in-memory locking.Backend, for tests and for a single
// process. It has the same transactional semantics as the networked backends
// and passes locking/locktest's conformance suite and linearizability check,
// so it is the test double of every code path that takes a lock.
//
//	l, err := locking.New(locking.Config{Backend: memlock.New(), LockID: lockID})
//
// The zero Store is an empty store ready to use; a Store must not be copied
// after first use.
//
// # Guarantees
//
//   - Transactions are optimistic and serializable: every read of a
//     transaction sees the snapshot of the last commit before it started,
//     plus the transaction's own writes. A commit fails with
//     locking.ErrConflict, and writes nothing, when a key it read was
//     written, created or deleted, or a key under a prefix it read was
//     written, created or deleted, by a transaction that committed after its
//     snapshot; a read may report that conflict early. Conflicts are per key
//     and per prefix range, never per store: transactions on unrelated keys
//     both commit.
//   - Update never waits for another transaction, and is safe for
//     concurrent use.
//   - A commit is atomic and immediately visible to every later
//     transaction; a transaction that wrote nothing commits nothing.
//   - A context canceled before the commit commits nothing, and Update
//     returns the context's error.
//   - Values are copied in and out: neither the caller's slices nor the
//     returned ones alias the store.
//   - A Txn used after Update returned fails with locking.ErrTxnDone.
//
// # What it does not guarantee
//
//   - Durability or sharing: the data lives in this process's memory and is
//     gone when it exits. Two processes, or two Stores, are two locks.
//   - Concurrent use of one Txn: unlike etcdlock's and kubelock's, its
//     writes are not guarded, so fn must not call a Txn's methods from
//     several goroutines at once.
//   - Faults: it never returns locking.ErrUnavailable or
//     locking.ErrUnknownResult. Test those paths against a networked
//     backend behind locktest.Proxy, or wrap the store.
//
// # Errors
//
// locking.ErrConflict (wrapped with the key or prefix that changed), the
// context's error, locking.ErrTxnDone, an error for ClearPrefix with an
// empty prefix, and fn's own error, returned unchanged.
//
// # As
//
// Store.As supports no types: there is no underlying client.
package memlock
