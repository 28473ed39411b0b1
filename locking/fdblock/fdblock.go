package fdblock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// Backend is a locking.Backend on a FoundationDB database. It is safe for
// concurrent use.
type Backend struct {
	db fdb.Database
}

var _ locking.Backend = (*Backend)(nil)

// New returns a backend on db. The caller has selected the API version
// (fdb.MustAPIVersion) and opened db.
func New(db fdb.Database) *Backend { return &Backend{db: db} }

// As supports *fdb.Database.
func (b *Backend) As(i any) bool {
	if p, ok := i.(*fdb.Database); ok {
		*p = b.db
		return true
	}
	return false
}

// Update runs fn in one FoundationDB transaction and commits it once; see
// locking.Backend. It does not use fdb.Database.Transact, which retries:
// retrying is the Lock's job.
//
// FoundationDB provides everything the contract asks natively: reads see a
// snapshot at the transaction's read version plus its own writes, and the
// commit fails with not_committed if a key or range it read (a prefix read
// is a range read, so deletions count) was written after that version.
func (b *Backend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tr, err := b.db.CreateTransaction()
	if err != nil {
		return translate(ctx, "create transaction", err, false)
	}
	// The FoundationDB operator's keys start with \xff: the system key
	// space.
	if err := tr.Options().SetAccessSystemKeys(); err != nil {
		return translate(ctx, "set access_system_keys", err, false)
	}
	// A canceled context cancels the transaction, which fails its pending
	// and later operations.
	stop := context.AfterFunc(ctx, tr.Cancel)
	defer stop()
	tx := &txn{tr: tr}
	defer tx.finish()
	if err := fn(tx); err != nil {
		tr.Cancel()
		return err
	}
	if !tx.wrote {
		return nil // nothing to commit: the reads were at one version
	}
	if err := tr.Commit().Get(); err != nil {
		return translate(ctx, "commit", err, true)
	}
	return nil
}

type txn struct {
	tr fdb.Transaction

	mu    sync.Mutex
	done  bool
	wrote bool
}

func (t *txn) finish() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

func (t *txn) check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return locking.ErrTxnDone
	}
	return nil
}

func (t *txn) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if err := t.check(); err != nil {
		return nil, false, err
	}
	v, err := t.tr.Get(fdb.Key(key)).Get()
	if err != nil {
		return nil, false, translate(ctx, fmt.Sprintf("get %q", key), err, false)
	}
	if v == nil {
		return nil, false, nil
	}
	return append([]byte{}, v...), true, nil
}

func (t *txn) GetPrefix(ctx context.Context, prefix []byte) ([]locking.KeyValue, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	kr, err := fdb.PrefixRange(prefix)
	if err != nil {
		return nil, fmt.Errorf("fdblock: prefix %q: %v", prefix, err)
	}
	kvs, err := t.tr.GetRange(kr, fdb.RangeOptions{Mode: fdb.StreamingModeWantAll}).GetSliceWithError()
	if err != nil {
		return nil, translate(ctx, fmt.Sprintf("get prefix %q", prefix), err, false)
	}
	out := make([]locking.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, locking.KeyValue{Key: append([]byte{}, kv.Key...), Value: append([]byte{}, kv.Value...)})
	}
	return out, nil
}

func (t *txn) Set(key, value []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	t.tr.Set(fdb.Key(key), value) // the C client copies key and value
	t.mu.Lock()
	t.wrote = true
	t.mu.Unlock()
	return nil
}

func (t *txn) Clear(key []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	t.tr.Clear(fdb.Key(key))
	t.mu.Lock()
	t.wrote = true
	t.mu.Unlock()
	return nil
}

func (t *txn) ClearPrefix(prefix []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if len(prefix) == 0 {
		return errors.New("fdblock: ClearPrefix with an empty prefix")
	}
	kr, err := fdb.PrefixRange(prefix)
	if err != nil {
		return fmt.Errorf("fdblock: prefix %q: %v", prefix, err)
	}
	t.tr.ClearRange(kr)
	t.mu.Lock()
	t.wrote = true
	t.mu.Unlock()
	return nil
}

// FoundationDB error codes this backend interprets
// (https://apple.github.io/foundationdb/api-error-codes.html).
const (
	codeTransactionTooOld    = 1007
	codeNotCommitted         = 1020
	codeTransactionCancelled = 1025
	codeOperationCancelled   = 1101
	codeClientInvalidOp      = 2000
	codeTransactionTooLarge  = 2101
	codeKeyTooLarge          = 2102
	codeValueTooLarge        = 2103
)

// translate maps a FoundationDB error to the package's errors, without
// exposing fdb.Error. inCommit says whether the commit had been sent.
func translate(ctx context.Context, what string, err error, inCommit bool) error {
	code := -1
	var fe fdb.Error
	var fep *fdb.Error
	switch {
	case errors.As(err, &fe):
		code = fe.Code
	case errors.As(err, &fep) && fep != nil:
		code = fep.Code
	}
	msg := err.Error()
	switch code {
	case codeNotCommitted, codeTransactionTooOld:
		// A conflict; or the read version became too old to commit, after
		// which a fresh transaction must read again.
		return fmt.Errorf("fdblock: %s: %s: %w", what, msg, locking.ErrConflict)
	case codeClientInvalidOp, codeTransactionTooLarge, codeKeyTooLarge, codeValueTooLarge:
		return fmt.Errorf("fdblock: %s: %s", what, msg)
	}
	if !inCommit {
		if cerr := ctx.Err(); cerr != nil && (code == codeTransactionCancelled || code == codeOperationCancelled) {
			return fmt.Errorf("fdblock: %s: %w", what, cerr)
		}
		return fmt.Errorf("fdblock: %s: %w: %s", what, locking.ErrUnavailable, msg)
	}
	// commit_unknown_result, and any other failure of a commit that was
	// sent (timed out, canceled, cluster changed): it may have committed.
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("fdblock: %s: %w: %w: %s (%w)", what, locking.ErrUnknownResult, locking.ErrUnavailable, msg, cerr)
	}
	return fmt.Errorf("fdblock: %s: %w: %w: %s", what, locking.ErrUnknownResult, locking.ErrUnavailable, msg)
}
