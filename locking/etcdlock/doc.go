// Package etcdlock is a locking.Backend on etcd v3, through
// go.etcd.io/etcd/client/v3.
//
//	client, err := clientv3.New(clientv3.Config{Endpoints: endpoints})
//	backend, err := etcdlock.New(etcdlock.Config{KV: client, Prefix: "/my-operator/lock/"})
//	l, err := locking.New(locking.Config{Backend: backend, LockID: lockID})
//
// Keys are stored in etcd as Config.Prefix followed by the lock's key bytes
// (etcd keys are byte strings, so the FoundationDB operator's "\xff\x02"
// prefix is stored as it is); values are the lock's bytes, unchanged.
//
// Transactions are serializable, one Update is at most one etcd Txn, and a
// commit whose reply was lost is locking.ErrUnknownResult, never a success.
//
// # Guarantees
//
//   - Transactions are serializable. Reads happen at one etcd revision, the
//     snapshot, fixed by the first read, which is linearizable. A
//     transaction that writes commits with one etcd Txn, guarded by a
//     compare on the mod revision of every key it read and of every prefix
//     range it listed (see the comments on commit for why the prefix
//     guards are sound against deletions too); if a guard fails, nothing is
//     written and Update returns locking.ErrConflict.
//   - One Update is one etcd Txn at most (plus its reads): the Lock's
//     "exactly one transaction per Take" holds on the wire.
//   - A commit whose reply was lost (connection cut, timeout, canceled
//     context) is reported as locking.ErrUnknownResult, never as success or
//     as a plain failure.
//
// # What it does not guarantee
//
//   - A transaction that writes may depend on at most about as many keys as
//     the server's --max-txn-ops (128 by default), because each key read is
//     one guard. Take and Release read at most three keys, and
//     ClearPendingUpgrades clears without reading; UpdateDenyList reads one
//     key per distinct ID, so a deny list of more IDs than the limit fails
//     to apply (apply it in parts). Transactions that only read (Holder,
//     DenyList, PendingUpgrades, the dry runs) send no guards.
//   - If the snapshot revision is compacted while a transaction runs, its
//     next read fails with locking.ErrConflict, and the Lock retries.
//
// # Errors
//
// Errors from etcd are translated, and never expose gRPC types or codes:
//
//   - a failed guard, or a compacted snapshot: locking.ErrConflict;
//   - an unreachable or unresponsive server during a read:
//     locking.ErrUnavailable (nothing was committed);
//   - a failure while committing that was not etcd rejecting the request:
//     locking.ErrUnknownResult, which also wraps locking.ErrUnavailable;
//   - a canceled or expired context: also wraps the context's error;
//   - requests etcd rejects (too many operations, permission denied): a
//     plain error with etcd's message.
//
// # As
//
// Backend.As supports *clientv3.KV (the KV given to New) and
// **clientv3.Client (when that KV is a *clientv3.Client).
package etcdlock
