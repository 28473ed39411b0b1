// Package chaos runs a workload under a seeded, reproducible schedule of
// faults and checks its invariants afterwards, in the spirit of
// Kubernetes' disruptive e2e tests and Jepsen's checkers (issue 14).
//
// A run ([Run]) draws its schedule from a seed ([NewSchedule]): the same
// seed, fault kinds and options give the same steps (kinds, targets,
// times, holds), so CHAOS_SEED replays a failed run's faults; the timing
// of the system under test is not replayed. The run injects the faults one
// at a time while the workload generates load, stops both after the
// duration, waits until the system settles, then checks the invariants and
// summarises ([Result.Table]): faults injected by kind, operations by
// kind, invariant violations (must be 0), and the time to converge after
// the last fault.
//
// Checkers compare what happened with ground truth the workload records
// outside the system under test. Three recorders help:
//
//   - [ReadDeleteRequests] reads the API server's audit log of delete
//     requests (testenv.IsolatedKubernetes.AuditLog): every deletion, with
//     the object's UID and when the request was received and completed,
//     through API server restarts. It is the record a safety check should
//     use.
//   - [DeleteAudit] keeps every deletion an informer saw, with when. Its
//     relists after a broken watch report deletions the watch missed, but
//     an object created and deleted while the watch was down is never seen
//     at all: a checker that relies on it alone must treat an object
//     missing from its final read as deleted by then (the aerospike-gc
//     workload did, before the audit log).
//   - [KeyHistory] lists an object store prefix over time and says by when
//     each key was gone.
//
// The workloads share their faults ([ControlPlaneFaults], [Restart] for a
// store, [ConnectionFaults], [KillReplica]), their replicas ([Replicas])
// and their tools ([Retry], [FileLogger], [Plan]).
//
// Guarantees:
//
//   - The seed is in the first log line and in the summary.
//   - A fault that cannot be injected or lifted is counted and fails the
//     run ([Result.Failed]), as does a workload error or a violation.
//   - Not settling within the settle timeout is a liveness violation.
//
// Not provided: faults that overlap (one at a time), replay of the
// system's own timing, or any fault the workload does not supply.
//
// # Environment
//
//   - CHAOS_SEED: replay a seed.
//   - CHAOS_DURATION: run the long version for this long (make chaos sets
//     20m by default); unset, workloads run their short version, 60 s of
//     faults from a fixed seed, which make test runs (and skips under go
//     test -short). make test also runs the checkers' planted-bug tests.
//
// # Covered so far
//
// One workload: examples/aerospike-gc (TestChaos): two replicas with
// leader election on a control plane and a MinIO of the test's own; the
// faults are restarts (or kills, then starts) of etcd, kube-apiserver,
// kube-controller-manager and MinIO, a blackhole of a replica's or the
// store's connections, connection resets and latency (replicas, store, and
// between the API server and etcd), and killing a replica (its
// connections cut and refused, its Lease not released) and starting a new
// one. Its checker: no backup, claim or store key deleted before its time
// or outside its prefix; everything expired deleted within the bound after
// the faults stopped; what must be kept still there with its UID.
// TestChaosCheckerCatchesPlantedBugs shows each invariant failing on a
// planted bug (a collector clock an hour ahead or behind, a store that
// deletes a sibling key).
//
// Not yet covered: the other workloads (backup-entry, statefulset-pvc,
// etcd-opstask, fdb-lock), the checks of opstask (no task twice at once,
// FIFO per target, Cleanup at most once at a time) and porcupine over the
// global lock's history; one-way partitions; GCS and Azure stores. A
// killed replica runs in the test's process: its connections die at once,
// but its goroutines end with its context, not with a signal.
package chaos
