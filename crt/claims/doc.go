// Package claims wires lifecycle (the PersistentVolumeClaims of stateful
// workloads) on a controller-runtime manager: Client is lifecycle's client
// over the manager's client and API reader, Cache and PodCache its cached
// listers, Sets fills a lifecycle.ClaimSet for a custom owner, and two
// adapters run on the manager: UnmountTracker marks a claim unmounted when
// its pods are gone, and Collector (which adds its UnmountTracker) deletes
// claims whose unmount TTL has passed.
//
//	m, err := lifecycle.New(lifecycle.Config{
//		Client:   claims.Client(mgr.GetClient(), mgr.GetAPIReader()),
//		Recorder: crt.Events(mgr.GetEventRecorder("my-operator")),
//	})
//	err = claims.Collector{UnmountTracker: claims.UnmountTracker{Lifecycle: m,
//		Claims: claims.Client(mgr.GetClient(), mgr.GetAPIReader()), Scope: scope}}.SetupWithManager(mgr)
//
// # Guarantees
//
//   - Reads that lifecycle needs fresh (the read-modify-write of a claim,
//     and its pod list before a deletion) go to the API reader given,
//     never to the manager's cache; cached reads are used only where
//     lifecycle documents that a cache may serve them. A pod list that
//     Client's apiReader answers from a cache is refused.
//   - lifecycle's paged claim lists work on the manager's cache, which
//     cannot continue a list: Client reads a cached claim list whole, as
//     one page, and pages a list sent to the API server.
//   - Sets reads the owner again through the API reader given, never the
//     cache, before lifecycle's SyncSet deletes a pod on scale-down.
//   - Collector's passes of one namespace never overlap (one request per
//     namespace); each decides on a fresh pod list and deletes with UID
//     and resourceVersion preconditions; a dry run (UnmountTracker.DryRun)
//     deletes and marks nothing.
//   - UnmountTracker works on levels: every tracked claim without a mark is
//     looked at when the informer first lists it, so a pod deleted while no
//     replica ran still has its claims marked.
//   - Errors keep their type (apierrors.IsNotFound, IsConflict work on
//     them), and reconciles end as crt.Result maps them.
package claims
