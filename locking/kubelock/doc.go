// Package kubelock is a locking.Backend on the Kubernetes API: every key of
// the lock lives in one ConfigMap, with optimistic concurrency on its
// resourceVersion.
//
//	backend, err := kubelock.New(kubelock.Config{
//		Client:    kubelock.ClientGo(clientset.CoreV1()),
//		Namespace: "my-namespace",
//		Name:      "my-operator-lock",
//	})
//	l, err := locking.New(locking.Config{Backend: backend, LockID: lockID})
//
// Transactions are serializable, conflicts are per ConfigMap, and a write
// whose reply was lost is locking.ErrUnknownResult, never a success.
//
// # A lock per object
//
// An operator that must not reconfigure one database from two instances at
// once takes a lock per database, not one for the whole operator:
//
//	cfg, err := kubelock.ForObject(locks.ConfigMaps(mgr.GetClient(), mgr.GetAPIReader()), db, dbGVK)
//	backend, err := kubelock.New(cfg)
//	l, err := locking.New(locking.Config{Backend: backend, LockID: os.Getenv("POD_NAME")})
//	_, err = l.Do(ctx, reconfigure, &locking.DoOptions{Release: true})
//	return crt.Result(ctx, 0, err) // held elsewhere: requeued
//
// With that wiring:
//
//   - The lock is the ConfigMap "<kind>-<name>-lock" in the database's
//     namespace (a cluster-scoped object's lock needs Config.Namespace set
//     after ForObject), owned by the database: it is deleted with it.
//   - locking.Config.LockID names the instance that holds the lock (the
//     operator's pod), not the lock: two instances with one LockID are one
//     holder.
//   - An instance refused the lock is requeued until the holder's lease
//     ends (HeldError.RequeueAfter, up to the lock's Duration). Add
//     Owns(&corev1.ConfigMap{}) to the controller's builder and the release
//     wakes it at once: the lock's ConfigMap changes, and it is owned by
//     the object the controller reconciles.
//   - The work under the lock must be safe to repeat: the status write after
//     it may conflict, and the next reconcile runs it again. Decide from
//     the database's actual state, read inside Do (is the configuration
//     already the wanted one?), not from the status; then write the status
//     on a fresh read (retry.RetryOnConflict). A conflict then costs a
//     reconcile that finds nothing to do, not a second reconfiguration.
//
// It needs only a Client (three ConfigMap calls: ClientGo adapts a
// client-go clientset, crt/locks.ConfigMaps a controller-runtime manager's client
// and API reader), and RBAC to get, create and update ConfigMaps in the
// namespace.
//
// # Storage
//
// The ConfigMap's binaryData maps each key to its value, the lock's bytes
// unchanged (the record is the tuple-encoded value the FoundationDB
// operator writes). ConfigMap keys may only contain [-._a-zA-Z0-9], so keys
// are escaped: letters, digits, '-' and '_' stay, and every other byte is
// written as '.' and two lowercase hex digits. The lock record's key under
// the default prefix is thus
// ".ff.02.2forg.2efoundationdb.2ekubernetes-operator.2fglobal", readable
// with kubectl. An escaped key may be at most 253 characters; Set rejects
// longer ones. Entries whose keys are not escaped lock keys, and the
// ConfigMap's data, labels and annotations, are left as they are.
//
// We chose a ConfigMap over a coordination.k8s.io Lease because the lock is
// several keys (the record, the deny list, the upgrade records) of
// arbitrary bytes, which a ConfigMap's binaryData holds directly, while a
// Lease has fixed fields for one holder and would need the keys packed into
// annotations, whose values are strings and whose total size is smaller.
// One object for all keys makes every transaction a single conditional
// write.
//
// # Guarantees
//
//   - Transactions are serializable. The first read of a transaction GETs
//     the ConfigMap (a quorum read), and every read is answered from that
//     version. A transaction that writes applies its writes to that
//     version and updates the ConfigMap with its resourceVersion (or
//     creates it, if it did not exist); if another write came first, the
//     API server refuses it and Update returns locking.ErrConflict.
//   - One Update that read something is at most one GET and one write. A
//     transaction that wrote without reading is applied to the current
//     version, and again to a newer one if that changed meanwhile (its
//     writes do not depend on what it would have read): up to 5 GETs and 5
//     writes, after which Update returns locking.ErrConflict.
//   - A write whose reply was lost (connection cut, timeout, canceled
//     context, server timeout) is reported as locking.ErrUnknownResult,
//     never as success or as a plain failure.
//
// # What it does not guarantee
//
//   - Conflicts are per object: two transactions on different keys of one
//     ConfigMap conflict. The lock's transactions all read the lock record,
//     so this costs it nothing; use separate ConfigMaps for unrelated
//     locks.
//   - Size: a ConfigMap holds at most 1 MiB, which bounds the number of
//     deny-list and upgrade entries (thousands of typical ones).
//   - Every write sends the whole ConfigMap.
//
// # Errors
//
// API errors are translated to the package's sentinels, and the API
// server's error stays in the chain, so apierrors.IsForbidden, IsConflict
// and the like also work on what the backend returns:
//
//   - Conflict on update, AlreadyExists on create and NotFound on update:
//     locking.ErrConflict;
//   - a failed GET for any reason but an explicit refusal, or 429 Too Many
//     Requests: locking.ErrUnavailable (nothing was written);
//   - a failed create or update that the API server did not explicitly
//     refuse: locking.ErrUnknownResult, which also wraps
//     locking.ErrUnavailable;
//   - a canceled or expired context: also wraps the context's error;
//   - refusals (Forbidden, Unauthorized, Invalid, too large): the API
//     server's error, its text giving the message, status code and reason.
//
// # As
//
// Backend.As supports *Client (Config.Client) and **corev1.ConfigMap (a copy of the last version of the ConfigMap
// that the backend read or wrote).
package kubelock
