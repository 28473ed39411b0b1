// Package groundskeeper is an SDK for people who write Kubernetes operators
// for stateful systems: databases, key-value stores, message brokers. Every
// such operator ends up writing the same lifecycle hygiene by hand; the
// packages below give it to them, each small, documented and tested against
// real components (a real kube-apiserver and controller manager, real object
// stores, real lock backends).
//
// A short tour:
//
//   - [github.com/groundskeeper-io/groundskeeper/retention] decides which
//     timestamped things (backups, claims, finished tasks) may be deleted now,
//     which must be kept and why, and when the next one becomes deletable:
//     TTLs, max age, keep-last, exponential and calendar retention. Pure; no
//     clients, no I/O.
//   - [github.com/groundskeeper-io/groundskeeper/lifecycle] applies
//     persistent volume claim delete policies (KEP-1847) to claims of any
//     owner kind, tracks unmounted claims and collects them after their TTL.
//   - [github.com/groundskeeper-io/groundskeeper/locking] is the FoundationDB
//     operator's global operator lock, in its exact on-disk format, over
//     pluggable transactional backends.
//   - [github.com/groundskeeper-io/groundskeeper/backupstore] deletes and
//     copies backup data in object stores through gocloud.dev/blob, fast and
//     never outside the prefix it was given.
//   - [github.com/groundskeeper-io/groundskeeper/opstask] runs out-of-band
//     operational tasks (on-demand snapshots, compactions, copies) as a FIFO
//     state machine per target.
//   - [github.com/groundskeeper-io/groundskeeper/subreconcile] splits a
//     reconcile loop into an ordered chain of small steps.
//
// The examples directory holds thin operators that wire these packages
// together, one per design the SDK comes from.
package groundskeeper
