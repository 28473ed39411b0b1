// Package opstask runs out-of-band operator tasks — an on-demand snapshot, a
// compaction, recovery from a permanent quorum loss, a copy of backups — as
// the state machine of etcd-druid's DEP-05, reusable by any operator:
//
//	Pending ──→ InProgress ──→ Succeeded
//	   │                  └──→ Failed
//	   └──────→ Rejected
//	finished ──(ttlSecondsAfterFinished)──→ deleted
//
// It owns the status API (Status, LastOperation, LastError, to embed as the
// .status of an operator's own custom resource), the state machine
// (Status.Transition), the per-target queue, admission (preconditions and
// duplicate detection), execution that survives controller restarts, cleanup
// after the TTL, and metrics. It does not own the operator's spec types: a
// task's spec has DEP-05's fields — a one-of config whose single member names
// the task kind, ttlSecondsAfterFinished, and an optional target name field
// (DEP-05's etcdName) — declared by the operator with its own config types.
// Package exampleapi is a complete custom resource (DEP-05's EtcdOpsTask with
// etcd-druid's five task kinds) whose CRD and DeepCopy functions are generated
// by controller-gen, with the one-of and immutability rules as CEL
// validations the API server enforces.
//
// An operator registers a Kind per config member (its Executor, its
// Preconditions, whether it can resume, its timeout, its cleanup), builds a
// Controller over a Store and calls Run:
//
//	c, err := opstask.New(opstask.Config{
//		Store:   store, // kubestore.New(...) or memstore.New(nil)
//		Handlers: []opstask.Handler{{Name: "onDemandSnapshot", Executor: snapshotter, Resumable: true}},
//		Metrics: metrics, // opstask.NewMetrics(opstask.MetricsConfig{Registerer: registry, Prefix: "etcddruid_"})
//	})
//	...
//	err = c.Run(ctx)
//
// # Queues and admission
//
// Tasks with the same namespace and target form a queue, ordered by
// creationTimestamp and then name. Tasks without a target share one queue per
// namespace. For each queue the controller:
//
//   - rejects, wherever they are in the queue, tasks whose config does not
//     have exactly one member or names an unregistered kind (InvalidSpec), and
//     duplicates: tasks of the same kind and duplicate key (Kind.DuplicateKey;
//     by default the whole config) as an earlier task that is still Pending or
//     InProgress (DuplicateTask). etcd-druid rejects every task while another
//     task of the same etcd is unfinished; here different work waits its turn;
//   - when no task of the queue is InProgress, evaluates the preconditions
//     of the first Pending task against the target's state at that moment; an
//     unmet one rejects it (and the next task is considered), as does one
//     that cannot use the spec (ErrInvalidSpec, code InvalidSpec); a check
//     that cannot be done now is retried after RetryInterval;
//   - starts the admitted task by writing InProgress, guarded by its
//     resourceVersion, and only then calls its executor.
//
// # Guarantees
//
//   - Only legal transitions are written; each sets lastTransitionTime,
//     startedAt (when leaving Pending) and lastOperation (Admit/Failed for a
//     rejection, Execution/InProgress, /Completed, /Failed; Cleanup before the
//     kind's cleanup) from the injected clock. Any other transition is a
//     *TransitionError naming both states.
//   - Of several controllers (replicas, or a restarted one) acting on the
//     same read, exactly one moves a task out of Pending: the write carries
//     the resourceVersion, the others get ErrConflict and write nothing.
//   - A target runs at most one execution at a time and its tasks start in
//     queue order, across restarts and replicas, provided a task is visible
//     to List within Config.Settle (default 2s) of the end of its creation
//     second (see non-guarantees). Different targets run concurrently, up to
//     Config.MaxConcurrent executions per controller, older queues first.
//   - An execution is never left InProgress forever. The running controller
//     renews lastOperation every LeaseDuration/3. When nobody wrote the task
//     for LeaseDuration (measured on the observing controller's own clock),
//     another controller takes the execution over with a new runID: it calls
//     the executor again with Run.Resumed set if the kind is Resumable, fails
//     the task with code Interrupted if not, and with code Timeout if the
//     kind's timeout (counted from startedAt) has passed.
//   - A controller that lost its claim cancels its executor's context with
//     cause ErrLostClaim and writes nothing more; a timeout cancels it with
//     cause ErrTimeout and fails the task with code Timeout. A claim is
//     lost when a write conflicts or finds the task gone, and when no write
//     confirmed it for 2/3 of LeaseDuration: the claim counts as confirmed
//     until 2/3 of the lease after the start of its last successful write
//     (the others count their lease from when they see that write, which is
//     later). Every write of a claim (taking it, renewals, progress
//     reports, the final state, a cleanup's delete) has that instant as its
//     deadline on
//     Config.Clock, and a watchdog timer cancels the executor at that
//     instant even while a write still hangs (client-go has no request
//     timeout by default).
//   - A controller that is stopped (Run's context canceled) cancels its
//     executors and leaves their tasks InProgress, untouched, for takeover:
//     shutting down is not a failure.
//   - A finished task is deleted when ttlSecondsAfterFinished (or
//     Config.DefaultTTL, 1h) has passed since the end of the second of its
//     lastTransitionTime — decided by the retention package — after the
//     kind's Cleanup succeeded, with UID and resourceVersion preconditions.
//     Kubernetes truncates lastTransitionTime to the second, so counting
//     from the end of that second makes the TTL never run out early on the
//     clock of the controller that finished the task (and up to a second
//     late); see the non-guarantees for clocks that disagree. Sync returns
//     the exact time to the next expiry, so Run wakes then and does not
//     poll.
//   - Never delete what you cannot clean up: a controller that does not
//     have a task's kind registered leaves a finished task of that kind
//     alone after its TTL (it logs it once and counts it in the metric
//     operator_expired_tasks_without_kind; DryRun leaves it out), for a
//     controller that has the kind to clean up and delete. A rejected task
//     never ran, so any controller deletes it after its TTL.
//   - A cleanup runs once at a time across controllers: it is claimed like
//     an execution (lastOperation Cleanup/InProgress with the run's ID,
//     written guarded by the resourceVersion), renewed every LeaseDuration/3
//     with the same deadlines and watchdog, and Kind.Cleanup's context is
//     canceled with cause ErrLostClaim when the claim is lost. Another
//     controller takes a cleanup over only when nobody wrote the task for
//     LeaseDuration (a controller stopped mid-cleanup leaves its claim to
//     lapse); the delete that follows a cleanup is guarded by the
//     resourceVersion of the claim's last write.
//   - LastErrors holds at most MaxLastErrors (10) entries, the newest; the
//     generated CRD says the same (a test checks the two agree).
//   - Writes per task: one status write per state after Pending and the
//     delete (3 for a task that succeeds), plus one per progress report or
//     renewal of a long execution, and for a kind with a Cleanup one to
//     claim it plus one per renewal of a long cleanup.
//   - The controller reads time only from Config.Clock and logs through the
//     logr.Logger in Run's context.
//
// It does not guarantee:
//
//   - fencing of side effects. The lease only stops this controller's
//     executor (or Kind.Cleanup) a third of the lease before another
//     controller may take over. What that does not cover: one that does not
//     honor its canceled context (or a side effect already sent when it is
//     canceled) may still act while another controller resumes the task; a
//     controller whose process is paused (a long garbage collection, a
//     suspended VM) for more than a third of the lease runs its watchdog too
//     late; the lease is
//     measured on each controller's own clock, so clocks that run at
//     different rates shift the margin (their offsets do not matter). A
//     write the store applies after the controller gave it up is no overlap
//     (the executor was canceled at the same instant) but delays the
//     takeover by up to a lease. A controller that lost its claim by a
//     conflict learns it at its next write, at most LeaseDuration/3 later.
//     Executors whose side effects must never overlap need their own fence
//     (e.g. the runID on the object they change).
//   - queue order for a task that becomes visible later than Settle after
//     its creation second (a slow API server, or a controller clock behind the
//     API server's by more than Settle): it runs after tasks that started
//     before it appeared. With Settle negative (for stores where creation is
//     immediately visible, as memstore), tasks are started as soon as seen.
//   - that an executor which ignores its canceled context after a timeout
//     stops: the task is failed LeaseDuration after the timeout anyway and the
//     next task of its target may start.
//   - a TTL measured on one clock. lastTransitionTime comes from the clock
//     of the controller that finished the task and is compared with the
//     clock of the one that deletes it: a controller whose clock is ahead
//     by d deletes tasks d early. The controllers' clocks are assumed to
//     agree (NTP); a TTL that must not be early by even that should be
//     longer by the worst skew.
//   - exactly-once execution: a Resumable kind may be executed again after a
//     takeover, which is why it must be idempotent.
//   - metric durations finer than a second after a takeover: times come back
//     from Kubernetes at one-second resolution.
//
// # Backends
//
// A Store lists tasks and writes status and deletions guarded by
// resourceVersion; optional Watcher lets the controller react at once.
// kubestore works on any custom resource with DEP-05's fields through the
// dynamic client (unstructured conversion, status subresource); memstore
// keeps tasks in memory. Both pass the conformance suite in opstasktest,
// which also runs a Controller over the store.
//
// # Errors
//
// Errors wrap sentinels, tested with errors.Is: ErrIllegalTransition (a
// *TransitionError), ErrConflict and ErrNotFound (from stores),
// ErrInvalidSpec (a task's spec; it is rejected, never retried),
// ErrInvalidConfig (Config or Kind given to New; the message names the
// field), ErrUnmet (a precondition that rejects, from Unmet), and the causes
// of a canceled executor context: ErrTimeout and ErrLostClaim. ErrInterrupted
// is recorded for an execution that could not be resumed. Executors and
// preconditions choose the code recorded in lastErrors with WithCode or
// Unmet; the controller's own codes are the Code* constants.
package opstask
