// Package groundskeeper is an SDK for people who write Kubernetes operators
// for stateful systems: databases, key-value stores, message brokers. Every
// such operator ends up writing the same lifecycle hygiene by hand; the
// packages below give it to them, each small, documented and tested against
// real components (a real kube-apiserver and controller manager, real object
// stores, real lock backends). This package holds this documentation only.
//
// Start with the package that owns your problem (Packages); each package's
// doc names its one call. The smallest is retention, whose Evaluate is pure:
// items and an instant in, a decision per item out. On controller-runtime,
// package crt plugs the others into a manager. What holds in every package
// (Conventions): a call that deletes or overwrites has a dry run, errors say
// whether a retry can cure them, no metric is registered globally, and time
// comes from an injected clock.
//
// # Packages
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
//     never outside the prefix it was given; each cloud store's support
//     (backupstore/s3store, gcsstore, azurestore) is linked by importing it.
//   - [github.com/groundskeeper-io/groundskeeper/opstask] runs out-of-band
//     operational tasks (on-demand snapshots, compactions, copies) as a FIFO
//     state machine per target.
//   - [github.com/groundskeeper-io/groundskeeper/subreconcile] splits a
//     reconcile loop into an ordered chain of small steps.
//   - [github.com/groundskeeper-io/groundskeeper/crt] plugs them into a
//     controller-runtime manager; the core packages never import
//     controller-runtime.
//
// The examples directory holds thin operators, on controller-runtime, that
// wire these packages together, one per design the SDK comes from.
//
// # Conventions
//
// Every package follows the same rules, so that what is learnt in one holds
// in the others.
//
//   - A long-lived handle (a Manager, Controller, Lock, lock backend, task
//     store, Metrics) is made by New (NewMetrics for metrics) from a Config
//     struct, which New validates: required fields are named in the
//     struct's doc, and every other zero field means the documented
//     default. A constructor with nothing to configure takes its one
//     argument directly, or none: memstore.New(clock), fdblock.New(db),
//     memlock.New().
//   - A per-call setting is an XOptions last argument: a pointer where nil
//     means the defaults (backupstore's DeleteOptions, CopyOptions and
//     ExpiryOptions; lifecycle's ReuseOptions and SyncOptions; locking's
//     ReleaseOptions, DenyListOptions and ClearUpgradesOptions), or a value
//     when it carries a required field (lifecycle.CollectOptions, whose
//     Scope names the namespace).
//   - NewMetrics(MetricsConfig) (*Metrics, error) registers on
//     MetricsConfig.Registerer, which is required: no package registers on
//     a global registry.
//   - Errors are tested with errors.Is against the package's sentinel
//     errors, and errors.As against its typed errors. Every sentinel's
//     message starts with the name of the package that declares it
//     ("locking: lock is held by another instance"; backupstore/share/migrate's,
//     moved from backupstore/share, keep "share:"); backupstore/share,
//     its subpackages and backupstore/collect reuse backupstore's
//     ErrInvalidConfig. A
//     configuration a package cannot work with wraps that package's
//     ErrInvalidConfig, naming the field and its value: "locking: invalid
//     configuration: Config.Duration = 1ms: shorter than the one-second
//     precision of the record". Bad input read from objects
//     (a policy, an annotation, a task spec) has its own sentinel
//     (ErrInvalidPolicy, ErrInvalidInput, ErrInvalidSpec), named the same
//     way.
//   - Kubernetes API errors keep their type through every wrapper:
//     apierrors.IsNotFound, IsConflict and IsForbidden work on what the
//     packages return.
//   - "Do not retry" is spelled Terminal: every sentinel and error type of
//     the packages says whether retrying can cure it by its method
//     Terminal() bool, set where it is declared; subreconcile.Terminal
//     marks an error, and crt.Terminal turns an error that is, or wraps,
//     a terminal one into controller-runtime's reconcile.TerminalError.
//     Every other error may be retried.
//   - "Requeue after" is spelled RequeueAfter, always a duration counted
//     from the decision (lifecycle.CollectResult.RequeueAfter,
//     locking.HeldError.RequeueAfter, subreconcile's Outcome); an instant is
//     a time.Time named for what happens then (retention.Decision.DeletableAt
//     and retention.Result.Next, backupstore.RetainedError.RetryAt).
//   - Kind means a Kubernetes kind (lifecycle.Ref.Kind) or, in opstask, a
//     task's kind (Task.Kind, the spec.config member it sets), whose
//     registration is an opstask.Handler. Enumerations carry their type's
//     name, or a short form of it: lifecycle.PlanUpdate is a PlanStatus,
//     lifecycle.VerdictWait a Verdict, retention.OutcomeSucceeded and
//     locking.OutcomeTaken an Outcome, retention.TieByID a TieBreak,
//     opstask.CodeTimeout an ErrorCode. Two kinds are exceptions on purpose: names a design
//     published keep its spelling (lifecycle's policy Names are KEP-1847's:
//     lifecycle.Retain, lifecycle.DeleteOnScaledownOnly), and values that
//     travel as strings in metrics labels and events are untyped string
//     constants named for what they are (subreconcile.RequeueConflict, a
//     requeue reason; lifecycle.ReasonClaimCollected, an event reason).
//   - Every call that deletes or overwrites has a dry run that makes the
//     same reads and decision and writes nothing (the README lists them),
//     and says in its doc what it never deletes. Kubernetes objects are
//     deleted with UID and resourceVersion preconditions (a pod that
//     lifecycle's SyncSet scales down, whose status changes as it runs,
//     with its UID only, after a fresh read of its owner), object versions
//     by their version ID; a key of an unversioned bucket has no such
//     precondition, and is checked against its prefix again just before
//     its delete instead.
//   - Time comes from an injected clock (k8s.io/utils/clock); nil means the
//     real clock.
package groundskeeper
