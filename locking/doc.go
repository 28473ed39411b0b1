// Package locking is the FoundationDB operator's global operator lock, in
// the operator's exact storage format, on pluggable transactional backends
// (Backends): when several operator instances act on one database, it lets
// one at a time make the changes with global effect (configuration changes,
// exclusions, coordinator changes, bounces).
//
// Start with [New] and [Lock.Do], which runs a function only under the lock:
//
//	l, err := locking.New(locking.Config{Backend: backend, LockID: lockID})
//	_, err = l.Do(ctx, reconfigure, &locking.DoOptions{Margin: 30 * time.Second, Release: true})
//
// The lock is a lease judged by wall clocks, with no fencing: an instance
// that stalls past its lease can still act after another took over, and
// clocks must agree within Config.ClockSkewTolerance. A lock held elsewhere
// is a [*HeldError] that says when to retry.
//
// # Using it
//
// When several operator instances act on one database (one per Kubernetes
// cluster in a multi-region deployment), operations with global effect
// (configuration changes, exclusions, coordinator changes, bounces) must be
// done by one instance at a time. A Lock is one instance's handle on that
// lock:
//
//	l, err := locking.New(locking.Config{Backend: backend, LockID: lockID})
//	lease, err := l.Take(ctx)   // take, extend or take over
//	var held *locking.HeldError
//	if errors.As(err, &held) {
//		return reconcile.Result{RequeueAfter: held.RequeueAfter}, nil
//	}
//	defer l.Release(ctx, nil)
//
// Lock.Do is that pattern whole, with what is easy to get wrong done for
// you: it runs a function only while the lock is ours, with a context that
// ends at the lease's end on Config.Clock (an injected clock included), and
// refuses a lease that ended before Take returned; crt.Result turns the
// lock held elsewhere into a requeue at the time it runs out:
//
//	_, err := l.Do(ctx, func(ctx context.Context, lease locking.Lease) error {
//		return reconfigure(ctx)
//	}, &locking.DoOptions{Margin: 30 * time.Second, Release: true})
//	return crt.Result(ctx, 0, err)
//
// # What it owns
//
// Keys are plain byte strings under a prefix, DefaultPrefix
// ("\xff\x02/org.foundationdb.kubernetes-operator") unless configured:
//
//   - <prefix>/global holds the lock record, the tuple-layer encoding of
//     tuple{lockID, start, end}: lockID a unicode string (type code 0x02),
//     start and end integers of Unix seconds;
//   - <prefix>/denyList/<lockID> marks a denied instance; its value is the
//     lock ID;
//   - <prefix>/upgrades/<version>/<processGroupID> records a process group
//     ready for an upgrade; its value is the process group ID.
//
// The record is byte-for-byte what the FoundationDB operator writes, so that
// with a FoundationDB backend an operator using this package interoperates
// with FoundationDB operator instances on the same database.
//
// # Guarantees
//
//   - Take decides in one transaction, from the lock record, this instance's
//     deny-list entry and the holder's: a free lock is taken; a live lock of
//     this instance is extended to now + Duration (its start kept); a lock
//     whose holder's end has passed, or whose holder is denied, is taken
//     over; any other lock is refused with a *HeldError that names the
//     holder and says when to retry.
//   - A denied instance fails every Take, even on a free lock or one it
//     holds. Any other instance may take over a denied holder's lock.
//   - Release clears the record only if this instance holds it and it has
//     neither expired nor starts in the future (by this instance's clock),
//     and returns the record it cleared.
//   - Every call that removes something has a dry run that decides from the
//     same reads and writes nothing: Release (ReleaseOptions.DryRun) returns
//     the record it would clear, UpdateDenyList (DenyListOptions.DryRun) the
//     entries it would apply, ClearPendingUpgrades
//     (ClearUpgradesOptions.DryRun) the records it would remove.
//   - ClearPendingUpgrades with ClearUpgradesOptions.Only removes exactly
//     the records the caller read, each only while it still holds its
//     value: a record added since is kept. Without Only it clears every
//     record without reading them, as the FoundationDB operator does
//     (compatible with its instances, and blind to a record added after
//     the caller's read).
//   - A stored value that is not a valid record is an error wrapping
//     ErrCorrupt for every operation: never treated as a free lock, never
//     overwritten.
//   - A conflicting transaction is retried with fresh reads, at most
//     Config.MaxAttempts times, so decisions never act on stale reads.
//   - Uncontended, Take, Release and Holder cost exactly one transaction,
//     a dry run too; with Config.Disabled, Take and Release cost none.
//   - Time comes only from Config.Clock.
//
// # What it does not guarantee
//
//   - No fencing. The lock is a lease judged by wall clocks: an instance
//     that stalls past its end (a long GC pause, a partition) can still be
//     acting when another has taken over. Protect the actions themselves
//     where that matters, and keep work under the lock much shorter than
//     Duration.
//   - Clock skew. Instances compare the stored end with their own clocks.
//     If a contender's clock runs ahead of the holder's by d, it takes the
//     lock over d early by the holder's clock. Config.ClockSkewTolerance
//     makes a contender wait that much longer: mutual exclusion holds while
//     every pair of clocks differs by at most the tolerance, and the holder
//     acts only until its Lease's End. The default tolerance is zero, which
//     is the FoundationDB operator's behaviour and assumes synchronised
//     clocks; FoundationDB operator instances on the same database never
//     add a tolerance, so set a holder-side margin (stop acting before End)
//     when you share a database with them.
//   - One-second precision: start and end are whole Unix seconds, truncated,
//     and the end second itself is still live, so a lock lasts Duration to
//     within a second.
//   - The deny list and upgrade records are data, not locks: their methods
//     touch the backend even with Config.Disabled.
//
// Deliberate differences from the FoundationDB operator (fdbclient's
// lock_client.go), where its behaviour looked accidental:
//
//   - On take-over the new record starts now; the operator keeps the
//     previous holder's start, so the start of a record would not say when
//     its holder took it. Taking back our own expired record also starts
//     afresh. Only an extension keeps the start.
//   - The deny list is checked before anything else; the operator checks it
//     only when a record exists, so a denied instance can take a free lock.
//   - Release by a non-holder, or of an expired or future record, returns
//     ErrNotHeld; the operator returns nil.
//   - An empty stored value is corrupt; the operator treats it as no lock.
//     (No writer produces one.) Like the operator, elements after the third
//     are ignored, for forward compatibility.
//   - DenyList reads the lock IDs from the keys, which is what Take checks;
//     the operator reads the values, which it always writes equal.
//
// # Errors
//
//   - ErrLocked, as a *HeldError: another live instance holds the lock;
//     retry after HeldError.RequeueAfter.
//   - ErrDenied: this instance is on the deny list. Retrying does not help
//     until an entry with Allow is applied.
//   - ErrNotHeld, as a *HeldError: Release did not clear the record.
//   - ErrConflict: every attempt conflicted with concurrent transactions;
//     retrying later is safe.
//   - ErrUnavailable: the backend could not be reached or did not answer;
//     nothing was committed, unless the error also wraps ErrUnknownResult.
//   - ErrUnknownResult: the connection failed after a commit was sent, so
//     the backend cannot say whether it was applied. A Take that fails this
//     way may have taken the lock: call Holder, or Take again (which
//     extends a lock this instance holds). Backends never report such a
//     commit as a success.
//   - ErrCorrupt, as a *CorruptError: the stored record is invalid; a person
//     has to look at it. Terminal: do not retry.
//   - ErrInvalidConfig: New, or a backend's New, was given a configuration
//     it cannot work with; the error names the field and its value.
//     Terminal: do not retry.
//   - ErrLeaseEnded: Do's lease ended before its function started, or while it
//     ran; retrying takes the lock again.
//   - ErrTxnDone: a Txn was used after its Update returned, a bug in the
//     caller of a backend.
//
// Other errors come from the backend or from invalid arguments, and say
// which.
//
// # Backends
//
// The algorithm is written once against Backend, a small transactional
// key-value interface whose contract is in its documentation: get, set,
// clear, read and clear by prefix, inside a serializable, optimistic
// transaction that commits atomically or fails with ErrConflict. Backends
// live in sub-packages and pass the conformance suite in locking/locktest:
//
//   - locking/memlock: in memory, for tests and a single process.
//   - locking/etcdlock: etcd v3. A transaction reads at one revision and
//     commits with one etcd Txn, guarded by mod-revision compares on every
//     key it read and every prefix range it listed, and on each key listed,
//     so that a deletion from a listed range is a conflict too.
//   - locking/kubelock: the Kubernetes API. Every key in one ConfigMap's
//     binaryData (keys escaped to the characters a ConfigMap key allows); a
//     transaction reads one version of the object and writes with that
//     version's resourceVersion, so conflicts are detected per object.
//   - locking/fdblock: FoundationDB through the official bindings, in a Go
//     module of its own. It needs the FoundationDB C client, which CI cannot
//     install, so it is outside this module and has not been compiled or
//     run by this module's tests (see its documentation).
//
// The etcd and Kubernetes backends are tested against real servers: the
// conformance suite; 8 contenders, in goroutines and in separate processes,
// whose recorded history a linearizability checker (porcupine) holds
// against a model of the lock, a check shown to reject a backend without
// isolation (locktest.WithoutIsolation); and connections cut, or replies
// dropped, in the middle of transactions.
//
// # As
//
// Lock.As calls the backend's As, to reach the underlying client; each
// backend lists the types it supports.
package locking
