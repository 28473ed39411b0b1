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
//	...
//	return ctrl.Result{RequeueAfter: res.RequeueAfter}, crt.Terminal(err)
//
// # Guarantees
//
//   - Reads that a package needs fresh (lifecycle's read-modify-write of a
//     claim, and its pod list before a deletion) go to the API reader given,
//     never to the manager's cache; cached reads are used only where the
//     package documents that a cache may serve them.
//   - Errors keep their type: apierrors.IsNotFound, IsConflict and
//     IsForbidden work on what the adapters return.
//   - Terminal wraps exactly the errors the packages document as "do not
//     retry" (listed on Terminal) in reconcile.TerminalError, and leaves every
//     other error as it is.
//
// backupstore.LoadCredentials reads Secrets through Secrets(mgr.GetAPIReader()).
//
// It does not yet cover every package: opstask's controller as a Runnable
// on every replica, and subreconcile as a reconcile.Reconciler, follow.
package crt
