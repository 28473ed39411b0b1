package etcdlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/internal/txnbuf"
)

// Config configures a Backend. KV is required.
type Config struct {
	// KV is where the keys are kept, usually a *clientv3.Client. The caller
	// keeps ownership of it and closes it.
	KV clientv3.KV

	// Prefix is prepended to every key in etcd. Empty means none: the
	// lock's keys are stored as they are. Set it when the etcd cluster is
	// shared (for example with a Kubernetes API server, which owns
	// "/registry"). It may hold any bytes.
	Prefix string
}

// Backend is a locking.Backend on etcd v3. It is safe for concurrent use.
type Backend struct {
	kv     clientv3.KV
	prefix string
}

var _ locking.Backend = (*Backend)(nil)

// New validates cfg and returns a backend that keeps its keys in etcd
// through cfg.KV.
func New(cfg Config) (*Backend, error) {
	if cfg.KV == nil {
		return nil, fmt.Errorf("%w: etcdlock: Config.KV is nil", locking.ErrInvalidConfig)
	}
	return &Backend{kv: cfg.KV, prefix: cfg.Prefix}, nil
}

// As supports *clientv3.KV (Config.KV) and **clientv3.Client
// (when that kv is a *clientv3.Client).
func (b *Backend) As(i any) bool {
	switch p := i.(type) {
	case *clientv3.KV:
		*p = b.kv
		return true
	case **clientv3.Client:
		c, ok := b.kv.(*clientv3.Client)
		if ok {
			*p = c
		}
		return ok
	}
	return false
}

// Update runs fn in a transaction; see locking.Backend.
//
// Reads go to etcd at one revision, the snapshot, fixed by the first read.
// Writes are buffered, then sent as one etcd Txn whose guards fail if
// anything fn read changed after the snapshot; see commit.
func (b *Backend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	tx := &txn{b: b, reads: map[string]int64{}}
	tx.Backend = "etcdlock"
	tx.CheckKey = func(key []byte) error {
		if len(b.prefix)+len(key) == 0 {
			return errors.New("etcdlock: empty key (etcd has no empty key)")
		}
		return nil
	}
	return tx.Run(ctx, tx, fn, tx.commit)
}

type txn struct {
	b *Backend

	// Txn holds the writes and the guard; Set, Clear and ClearPrefix are
	// its.
	txnbuf.Txn

	// rev is the snapshot revision, 0 before the first read.
	rev int64
	// reads maps every etcd key read from the store to its mod revision at
	// the snapshot (0: absent). Keys listed by a prefix read are included.
	reads map[string]int64
	// prefixes are the etcd key prefixes read with GetPrefix.
	prefixes []string
}

func (t *txn) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if err := t.Lock(); err != nil {
		return nil, false, err
	}
	defer t.Unlock()
	if v, ok, decided := t.Buf.Lookup(key); decided {
		return v, ok, nil
	}
	k := t.b.prefix + string(key)
	resp, err := t.get(ctx, k)
	if err != nil {
		return nil, false, translateRead(ctx, fmt.Sprintf("get %q", key), err)
	}
	if len(resp.Kvs) == 0 {
		t.reads[k] = 0
		return nil, false, nil
	}
	kv := resp.Kvs[0]
	t.reads[k] = kv.ModRevision
	return bytes.Clone(nonNil(kv.Value)), true, nil
}

func (t *txn) GetPrefix(ctx context.Context, prefix []byte) ([]locking.KeyValue, error) {
	if err := t.Lock(); err != nil {
		return nil, err
	}
	defer t.Unlock()
	p := t.b.prefix + string(prefix)
	resp, err := t.get(ctx, p, clientv3.WithPrefix())
	if err != nil {
		return nil, translateRead(ctx, fmt.Sprintf("get prefix %q", prefix), err)
	}
	t.prefixes = append(t.prefixes, p)
	stored := make([]locking.KeyValue, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		t.reads[string(kv.Key)] = kv.ModRevision
		stored = append(stored, locking.KeyValue{Key: kv.Key[len(t.b.prefix):], Value: nonNil(kv.Value)})
	}
	return t.Buf.Merge(prefix, stored), nil
}

// get reads at the snapshot revision, fixing it on the first read. The
// first read is linearizable (etcd's default), so the snapshot is at least
// as new as every commit that finished before the transaction began.
func (t *txn) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if t.rev != 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	resp, err := t.b.kv.Get(ctx, key, opts...)
	if err != nil {
		return nil, err
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	return resp, nil
}

// commit sends the buffered writes as one etcd Txn, guarded so that it
// applies only if everything the transaction read is unchanged since the
// snapshot revision R:
//
//   - every key read (alone or listed by a prefix read) still has the mod
//     revision it had at R, 0 for a key that was absent: this catches a key
//     that was changed, deleted, or created;
//   - every key under a prefix that was read has a mod revision of at most
//     R: this catches a key inserted into the range.
//
// Together they prove that each prefix range holds the same keys with the
// same values as at R. The range guard alone would not: etcd compares a
// range only against the keys that exist at commit, so a deletion from the
// range would pass. We chose per-key guards over the alternatives because
// they need nothing stored beyond the lock's own keys, whose values stay
// the raw bytes (readable with etcdctl): a count of the range cannot be
// compared in an etcd Txn, and a guard key per prefix bumped by every write
// would require every writer, including ones that do not read, to know
// every prefix any reader might list. The cost is one guard per key read,
// which counts against the server's --max-txn-ops (128 by default) in a
// transaction that also writes; read-only transactions send no guards.
//
// A transaction that read and wrote nothing of the store commits without
// guards, and one that wrote nothing sends nothing: all its reads were at
// one revision.
func (t *txn) commit(ctx context.Context) error {
	if err := t.Lock(); err != nil {
		return err
	}
	defer t.Unlock()
	if t.Buf.Empty() {
		return nil
	}
	cmps := make([]clientv3.Cmp, 0, len(t.reads)+len(t.prefixes))
	keys := make([]string, 0, len(t.reads))
	for k := range t.reads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", t.reads[k]))
	}
	for _, p := range t.prefixes {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(p).WithPrefix(), "<", t.rev+1))
	}
	ops := writeOps(t.b.prefix, t.Buf.Ops())
	resp, err := t.b.kv.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return translateCommit(ctx, len(cmps), len(ops), err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdlock: a key read at revision %d changed before commit: %w", t.rev, locking.ErrConflict)
	}
	return nil
}

// writeOps turns buffered writes into etcd operations. etcd rejects a Txn
// whose puts and deletes overlap, so the writes are reduced to their net
// effect: the final value or deletion of each key, and range deletions of
// the cleared prefixes split around keys set after the clear.
func writeOps(prefix string, ops []txnbuf.Op) []clientv3.Op {
	type final struct {
		value []byte
		set   bool
	}
	last := map[string]final{}
	var cleared []string
	for _, op := range ops {
		k := prefix + string(op.Key)
		switch op.Kind {
		case txnbuf.Set:
			last[k] = final{value: op.Value, set: true}
		case txnbuf.Clear:
			last[k] = final{}
		case txnbuf.ClearPrefix:
			for lk := range last {
				if len(lk) >= len(k) && lk[:len(k)] == k {
					delete(last, lk)
				}
			}
			cleared = append(cleared, k)
		}
	}
	// Drop cleared prefixes inside others.
	sort.Strings(cleared)
	var ranges []string
	for _, p := range cleared {
		if n := len(ranges); n > 0 && len(p) >= len(ranges[n-1]) && p[:len(ranges[n-1])] == ranges[n-1] {
			continue
		}
		ranges = append(ranges, p)
	}
	under := func(k string) (int, bool) {
		for i, p := range ranges {
			if len(k) >= len(p) && k[:len(p)] == p {
				return i, true
			}
		}
		return 0, false
	}
	keys := make([]string, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []clientv3.Op
	holes := make([][]string, len(ranges)) // keys set inside each range, sorted
	for _, k := range keys {
		f := last[k]
		i, in := under(k)
		switch {
		case f.set:
			out = append(out, clientv3.OpPut(k, string(f.value)))
			if in {
				holes[i] = append(holes[i], k)
			}
		case !in: // a deletion inside a cleared range is redundant
			out = append(out, clientv3.OpDelete(k))
		}
	}
	for i, p := range ranges {
		end := clientv3.GetPrefixRangeEnd(p)
		start := p
		for _, h := range holes[i] {
			if start < h {
				out = append(out, deleteRange(start, h))
			}
			start = h + "\x00" // the key right after h
		}
		if end == "\x00" || start < end {
			out = append(out, deleteRange(start, end))
		}
	}
	return out
}

// deleteRange deletes [start, end); end "\x00" means to the end of the key
// space, as in etcd.
func deleteRange(start, end string) clientv3.Op {
	if start == "" {
		start = "\x00"
	}
	return clientv3.OpDelete(start, clientv3.WithRange(end))
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// translateRead maps a failed read to the package's errors. Nothing was
// committed, so the outcome is never unknown.
func translateRead(ctx context.Context, what string, err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) || errors.Is(err, rpctypes.ErrFutureRev) {
		// The snapshot revision is gone: whatever was read may have changed.
		return fmt.Errorf("etcdlock: %s: snapshot revision compacted: %w", what, locking.ErrConflict)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("etcdlock: %s: %w", what, cerr)
	}
	code, msg := describe(err)
	if definite(code) {
		return fmt.Errorf("etcdlock: %s: %s", what, msg)
	}
	return fmt.Errorf("etcdlock: %s: %w: %s", what, locking.ErrUnavailable, msg)
}

// translateCommit maps a failed commit to the package's errors. Unless etcd
// itself rejected the request, the Txn may have been applied.
func translateCommit(ctx context.Context, ncmp, nops int, err error) error {
	code, msg := describe(err)
	switch {
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return fmt.Errorf("etcdlock: commit of %d guards and %d writes: %s (raise the server's --max-txn-ops, or read fewer keys in a transaction that writes)", ncmp, nops, msg)
	case definite(code) && ctx.Err() == nil:
		return fmt.Errorf("etcdlock: commit: %s", msg)
	case ctx.Err() != nil:
		return fmt.Errorf("etcdlock: commit: %w: %w (%w)", locking.ErrUnknownResult, locking.ErrUnavailable, ctx.Err())
	}
	return fmt.Errorf("etcdlock: commit: %w: %w: %s", locking.ErrUnknownResult, locking.ErrUnavailable, msg)
}

// describe returns the gRPC code and message of an etcd client error,
// without letting the gRPC types out.
func describe(err error) (codes.Code, string) {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code(), ee.Error()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code(), s.Message()
	}
	if errors.Is(err, context.Canceled) {
		return codes.Canceled, err.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded, err.Error()
	}
	return codes.Unknown, err.Error()
}

// definite reports whether a gRPC code means the server rejected the
// request before applying it, for reasons that retrying will not cure
// (invalid, unauthorized, too large). Everything else (unavailable, timed
// out, canceled, unknown, internal) is treated as the connection's fault.
func definite(c codes.Code) bool {
	switch c {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented, codes.NotFound,
		codes.AlreadyExists:
		return true
	}
	return false
}
