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
// outside the system under test. Four recorders help:
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
//     each key was gone; with BucketMayGo, also by when the bucket itself
//     was (one the system under test deletes, a pool's).
//   - [MountLog] keeps when each pod that mounts a claim was created and
//     when its delete was sent, the pods the operator did not make
//     included, and, on nodes ([MountLog.Track], by the UID that
//     [MountLog.CreatePod] records, so that a pod recreated under its name
//     is another), until when a deleted pod was still there, terminating
//     or on a node that stopped answering, and says whether a claim's
//     deletion happened while one mounted it
//     ([MountLog.Covering], with a bound for a deletion decided just
//     before the pod was created and slowed by a fault).
//
// The workloads share their faults ([ControlPlaneFaults], [Restart] and
// [RestartGracefully] for a store, [ConnectionFaults], [KillReplica],
// [NodeStops]), their replicas ([Replicas],
// in the test's process or, with [Process] and [Build], as processes of
// the example's binary) and their tools ([Retry], [FileLogger], [Plan]).
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
//     test -short). The checkers' planted-bug tests
//     (TestChaosCheckerCatchesPlantedBugs) run in make checkers and make
//     chaos, and in go test when it selects them; make test leaves them
//     out (they take 1-4 minutes each).
//
// # Workloads
//
// Each example operator has a TestChaos on a control plane of its own (and
// its own stores), with two replicas of its controller per instance, and a
// TestChaosCheckerCatchesPlantedBugs that shows each of its invariants
// failing on a planted bug (a test-only wrapper). Every run draws from the
// restarts (or kills, then starts) of etcd, kube-apiserver and
// kube-controller-manager, killing a replica (its connections cut and
// refused, its Lease not released; a replica process gets SIGKILL) and
// starting a new one, and the
// connection faults ([ConnectionFaults]) of the replicas, the stores and
// the API server's etcd connection.
//
//   - examples/aerospike-gc (on two fake nodes, testenv.StartNodes: pods
//     run and take their 2 s grace period to die, claims bind to a volume
//     pool, and [NodeStops] adds a node that stops answering for 12 to
//     18 s, its pods left Running or Terminating meanwhile): backups with
//     TTLs, their data in MinIO with
//     look-alike keys beside each prefix, claims whose pods come and go
//     and come back through lifecycle's CheckReuse (as an operator brings
//     a pod back; the generator's own client, with a user agent of its
//     own), "inspect-data" pods the operator did not make that mount a
//     claim for a while, and "cold" claims outside the collector's
//     selector, which the generator marks unmounted itself and which only
//     CheckReuse deletes: inspected, they keep an expired mark while the
//     inspect pod mounts them, and their pod comes back then (CheckReuse
//     must answer Wait, not delete). Its TestChaos runs the replicas as
//     processes of the example's binary, killed with SIGKILL.
//     Nothing deleted before its time or outside its prefix (judged on the
//     API server's audit log, the watches and store listings); no claim
//     deleted while a pod, its own or a foreign one, mounts it, until the
//     pod is gone from the API server (a
//     replica's deletion with a bound for a request held by a fault,
//     CheckReuse's with none: the generator creates every pod and calls
//     CheckReuse from one goroutine, on a connection with no fault);
//     everything expired deleted within the bound; what must be kept
//     still there with its UID.
//   - examples/backup-entry: buckets with quotas on fake-gcs-server, MinIO
//     and Azurite (all restarted; Azurite only with SIGTERM, since a kill
//     can lose its last writes), entries deleted after their grace period or
//     forced; a pool on MinIO that grows and deletes its empty buckets;
//     migrations from legacy prefixes, and sources that are shared buckets
//     (refused); and a second installation (one replica, no faults of its
//     own) with the same --installation and names, whose pool writes into
//     the same MinIO. No prefix data deleted early or outside its prefix;
//     the finalizer removed only after the prefix is gone; the quota held;
//     liveness; nothing kept lost; no pool store bucket deleted under an
//     entry; every legacy key in its legacy prefix or copied (nothing in
//     neither). Each installation's checker judges its own.
//   - examples/statefulset-pvc (on two fake nodes, as aerospike-gc: pods
//     run and take their 2 s grace period to die, claims bind to a volume
//     pool, and [NodeStops]): sets under each claim policy scaled up and
//     down and deleted, ordered by etcd revision, and "backup" pods the
//     controller did not make that mount a claim for a while. No claim or
//     pod deleted that the policy keeps, each deletion judged at the
//     revision of its request (its first version with a
//     deletionTimestamp), not of its removal, which a terminating pod
//     delays past a later scale-up (the watches, and the audit log for
//     deletions they missed); no claim deletion requested while a pod that
//     mounts it may run, a backup pod (by time, the [MountLog] with UIDs,
//     until the pod is gone) or a set's own (by revision, until its
//     removal), except the garbage collector's (the audit log says who
//     sent each); liveness; kept claims keep their UIDs.
//   - examples/etcd-opstask: a stream of tasks per target executed by two
//     replicas without leader election. No task executed twice at once,
//     FIFO per target, Cleanup at most once at a time; liveness; no task
//     lost.
//   - examples/fdb-lock: three lock IDs of two replicas each contending
//     for the global lock, on the Kubernetes backend (TestChaos) and on
//     etcd (TestChaosEtcdBackend). The lock's history is linearizable
//     (porcupine, locktest's model); no two global operations of different
//     lock IDs at once; a global operation only under a valid lock;
//     liveness.
//
// Not covered: an Azure store killed (Azurite can lose its last writes on
// a kill, so backup-entry restarts it with SIGTERM only) and S3 Object
// Lock under faults; faults that overlap. Replicas whose checker
// needs a recorder inside them (etcd-opstask's executions, fdb-lock's lock
// history) and backup-entry's run in the test's process, where a kill cuts
// their connections at once but their goroutines end with their context;
// aerospike-gc's and statefulset-pvc's TestChaos replicas are processes,
// killed with SIGKILL.
package chaos
