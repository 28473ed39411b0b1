package locking

import "context"

// Backend is a transactional key-value store the lock keeps its records in.
// Implementations live in sub-packages; users hold a *Lock, not a Backend.
// Every backend must pass the conformance suite in locking/locktest.
//
// Keys and values are arbitrary byte strings (keys under the default prefix
// start with 0xff 0x02, so a backend whose native store restricts key
// characters must encode them).
type Backend interface {
	// Update runs fn in one transaction and commits its writes atomically.
	//
	// Isolation: the transaction is serializable. Every read inside fn sees a
	// single consistent snapshot, together with the transaction's own earlier
	// writes. If any key or prefix range fn read was changed by another
	// transaction that committed after this one's snapshot, Update commits
	// nothing and returns an error wrapping ErrConflict. A read may report
	// such a conflict early, by returning an error wrapping ErrConflict.
	//
	// Update calls fn at most once and never retries: retrying is the Lock's
	// job, so that the retry policy is the same on every backend and a
	// transaction count is observable.
	//
	// If fn returns an error, nothing is committed and Update returns that
	// error unchanged (callers test it with errors.Is and errors.As).
	//
	// Concurrency is optimistic: Update must not wait for another Update in
	// progress to finish before running fn, and must be safe for concurrent
	// use. A transaction that wrote nothing may skip its commit.
	//
	// Errors other than ErrConflict and fn's own are the backend's to choose,
	// but must not expose client-library error types as the only way to
	// understand them: wrap them with context, and translate what has a
	// package meaning to the package's sentinel errors: a conflict to
	// ErrConflict; an unreachable or unresponsive backend, when nothing was
	// committed, to ErrUnavailable; a failure after the commit was sent,
	// when the backend cannot know whether it committed, to ErrUnknownResult
	// (together with ErrUnavailable). A backend must never report success
	// for a commit it is not sure of.
	Update(ctx context.Context, fn func(Txn) error) error

	// As lets users reach the backend's underlying client (a FoundationDB
	// database, an etcd client, ...). It sets *i and returns true if i is a
	// pointer to a type the backend supports; each backend documents the
	// types under "# As".
	As(i any) bool
}

// Txn is a transaction in progress, valid only inside the function passed to
// Backend.Update: once Update has returned, every method fails with
// ErrTxnDone. Reads take a context because they may do I/O; writes are
// buffered until commit.
type Txn interface {
	// Get returns the value stored at key, or ok == false if there is none.
	// A present key may hold an empty value; that is not the same as absent.
	// The returned slice belongs to the caller.
	Get(ctx context.Context, key []byte) (value []byte, ok bool, err error)

	// GetPrefix returns every key-value pair whose key starts with prefix, in
	// ascending unsigned byte order of keys. The returned slices belong to
	// the caller.
	GetPrefix(ctx context.Context, prefix []byte) ([]KeyValue, error)

	// Set stores value at key. Set copies key and value.
	Set(key, value []byte) error

	// Clear removes key. Clearing an absent key is not an error.
	Clear(key []byte) error

	// ClearPrefix removes every key that starts with prefix. The empty
	// prefix is rejected, so a bug cannot wipe the store.
	ClearPrefix(prefix []byte) error
}

// KeyValue is one entry of a GetPrefix result.
type KeyValue struct {
	Key   []byte
	Value []byte
}
