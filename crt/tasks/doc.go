// Package tasks wires opstask (out-of-band operational tasks) on a
// controller-runtime manager: a Controller runs the opstask Controller of
// a task resource on every replica, NewStore is its store over the
// manager's clients, CRD checks the task resource's generated
// CustomResourceDefinition against its Go type and opstask's rules, and
// InstallCRD installs it.
//
//	opts := &tasks.Options{TargetField: "etcdName", Metrics: &opstask.MetricsConfig{Prefix: "myop_"}}
//	crd, err := tasks.CRD(crdYAML, &v1.EtcdOpsTask{}, mgr.GetScheme(), opts)
//	err = tasks.InstallCRD(ctx, mgr.GetClient(), mgr.GetAPIReader(), crd) // tests, --install-crds
//	err = (&tasks.Controller{Object: &v1.EtcdOpsTask{}, Config: opstask.Config{Handlers: handlers},
//		Options: opts}).SetupWithManager(mgr)
//
// # Guarantees
//
//   - A Controller runs on every replica, leader or not (EveryReplica):
//     claims with leases decide which replica executes a task.
//   - NewStore's store (which a Controller builds) hears of changes from
//     its own list and watch of the kind, not from the manager's cache
//     (whose informer would hold every task whole): it holds no task
//     itself, and delivers a finished task that is not held, being
//     deleted or in a cleanup by reference (opstask.FinishedTask), decoded
//     from the list a page at a time, so that the finished tasks retained
//     cost a few hundred bytes each; the controller reads such a task with
//     a consistent GET before it cleans it up. Every write is guarded by
//     UID and resourceVersion, and the store passes opstask's store
//     conformance suite on a real API server.
//   - CRD refuses a task CRD that drifted from its Go type or lacks one of
//     the rules opstask needs (one-of config, immutable config and target
//     that cannot be removed and put back with other values either,
//     bounded lastErrors, steps and approvals, status subresource).
//   - InstallCRD never downgrades: a CRD that lacks a property (or the
//     storage version) of the one installed, which the API server would
//     then prune from every object, is not installed over it (an older
//     release's replica restarting during a rolling update); it logs so and
//     waits until the installed one is served.
package tasks
