// Package crt plugs groundskeeper's packages into a controller-runtime
// manager (sigs.k8s.io/controller-runtime). The core packages take small
// interfaces of their own and never import controller-runtime, so a
// client-go-only user never compiles this package; a controller-runtime
// user wires each package in a few lines:
//
//	m, err := lifecycle.New(lifecycle.Config{
//		Client:   crt.LifecycleClient(mgr.GetClient(), mgr.GetAPIReader()),
//		Recorder: crt.Events(mgr.GetEventRecorder("my-operator")),
//	})
//	scope := lifecycle.Scope{Namespace: ns, Selector: sel,
//		Claims: crt.ClaimCache(mgr.GetClient()), Pods: crt.PodCache(mgr.GetClient())}
//	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: scope})
//	return crt.Result(ctx, res.RequeueAfter, err)
//
// # Guarantees
//
//   - Reads that a package needs fresh (lifecycle's read-modify-write of a
//     claim, and its pod list before a deletion) go to the API reader given,
//     never to the manager's cache; cached reads are used only where the
//     package documents that a cache may serve them. A pod list that
//     LifecycleClient's apiReader answers from a cache is refused.
//   - lifecycle's paged claim lists work on the manager's cache, which
//     cannot continue a list: LifecycleClient reads a cached claim list
//     whole, as one page, and pages a list sent to the API server.
//   - Errors keep their type: apierrors.IsNotFound, IsConflict and
//     IsForbidden work on what the adapters return.
//   - EveryReplica's Runnable runs on every replica, leader or not;
//     TaskStore changes only where an opstask Controller hears of changes
//     (the manager's informer), never what it claims on (the store's
//     consistent List).
//   - Terminal wraps in reconcile.TerminalError the packages' "do not
//     retry" errors (listed on Terminal), and leaves every other error as it
//     is. Every exported error sentinel and error type of the packages is
//     classified, terminal or not; a test fails when one is added without
//     a classification.
//   - A joined error (errors.Join, several %w) is terminal, or a quiet
//     requeue in Result, only when every one of its parts is; otherwise it
//     is an ordinary error, logged and retried.
//
// backupstore.LoadCredentials reads Secrets through Secrets(mgr.GetAPIReader())
// (a SecretGetter, which is a backupstore.SecretGetter: crt does not import
// backupstore, and knows its errors by the values backupstore re-exports,
// so that an operator that wires only lifecycle, locking, opstask or
// subreconcile through crt links no cloud SDK);
// kubelock keeps its lock in a ConfigMap through ConfigMaps(mgr.GetClient(),
// mgr.GetAPIReader()).
// An opstask Controller runs on every replica, fed by the manager's cache:
//
//	store, err := kubestore.New(kubestore.Config{Client: dynamicClient, ...})
//	ctl, err := opstask.New(opstask.Config{Store: crt.TaskStore(store, mgr.GetCache(), taskObject), ...})
//	err = mgr.Add(crt.EveryReplica(ctl.Run))
//
// Claims collected by their unmount TTL (lifecycle's annotations) need two
// controllers, both added by CollectClaims: one marks a claim unmounted
// when the pods that mounted it are gone (TrackUnmounts, also on its own),
// one runs Manager.Collect when claims or pods come or go and when the next
// claim expires:
//
//	err = crt.CollectClaims(mgr, "claims", crt.ClaimCollection{
//		UnmountTracking: crt.UnmountTracking{Lifecycle: m, Claims: crt.LifecycleClient(mgr.GetClient(), mgr.GetAPIReader()), Scope: scope},
//		Recorder:        crt.Events(mgr.GetEventRecorder("my-operator")),
//	})
//
// Backup collection (backupstore/collect) is wired by package crt/backups,
// beside this one, so that crt links no object-store code.
//
// A subreconcile chain becomes a controller-runtime reconciler:
//
//	r := crt.Reconciler(mgr.GetClient(), runner, func() *v1.Database { return new(v1.Database) })
//	err = ctrl.NewControllerManagedBy(mgr).For(&v1.Database{}).Complete(r)
//
// Result ends a Reconcile: a conflict from a stale cache is a quiet
// requeue, a "do not retry" error a reconcile.TerminalError, any other
// error is returned for the controller's retry.
//
// The five example operators (examples/ in the repository) run on a
// manager, with two replicas in their end-to-end tests, and show
// LifecycleClient, ClaimCache, PodCache, Secrets, Events, EveryReplica,
// TaskStore and Result in context. None uses ConfigMaps (fdb-lock's
// kubelock takes a clientset) or Reconciler (fdb-lock's chain writes its
// status itself): this package's tests run them on the real API server.
package crt
