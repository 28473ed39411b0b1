// Package kubestore is an opstask.Store over Kubernetes custom resources:
// any resource whose spec has DEP-05's fields (config, ttlSecondsAfterFinished
// and a target name field) and whose status is an opstask.Status, served with
// the status subresource. It talks to the API server with the dynamic client
// and converts objects from unstructured form, so it needs no generated
// client for the operator's type. It passes the conformance suite in
// opstask/opstasktest against a real API server.
//
//	store, err := kubestore.New(kubestore.Config{Client: dyn, Resource: gvr, Kind: "EtcdOpsTask", TargetField: "etcdName"})
//
// It needs RBAC to list, watch, get and update the resource (update only
// for the finalizer Finalizer), update its status subresource and delete
// it. Users create tasks (kubectl, or the
// resource's own client); the store never creates one.
//
// # Guarantees
//
//   - List is a consistent read from the API server (resourceVersion "",
//     never a cache), in pages of Config.PageSize: a task created or changed
//     before List was called is listed as of that change or a later one.
//   - UpdateStatus writes only the status subresource, carrying the task's
//     resourceVersion and UID in the body: the API server refuses it when
//     the object changed or was recreated under its name, and the spec is
//     never written.
//   - Delete carries UID and resourceVersion preconditions, so a task that
//     changed or was recreated since it was read is never deleted.
//   - SetHeld adds or removes only the finalizer Finalizer, and only when
//     the task's UID and resourceVersion are current: it reads the task and
//     updates it at the version it read, so the API server refuses the
//     update if anything changed in between. A task with Finalizer and a
//     deletionTimestamp is listed with Deleting and Held set; removing the
//     finalizer lets the API server delete it (other finalizers may still
//     hold it).
//   - Every error from the API server keeps its type in the chain
//     (apierrors.IsForbidden and the like work); conflicts also wrap
//     opstask.ErrConflict and missing objects opstask.ErrNotFound.
//   - A config member that is not an object, or a status that does not
//     decode, is an error naming the object and the field; such a task is
//     never read as an empty one.
//
// # What it does not guarantee
//
//   - Watch notifies on every watch event of the resource (its own status
//     writes included) and may notify spuriously; it does not say what
//     changed, and a watch that ends (expired resourceVersion, closed
//     channel) is an error the caller answers by watching again and
//     listing.
//   - Conflicts are per object: a status write conflicts with any change to
//     the task, a label or an annotation included.
//   - Creation timestamps have the API server's one-second resolution.
//
// # Errors
//
// New returns errors wrapping opstask.ErrInvalidConfig that name the field.
// The store's errors are wrapped with the operation and the task's
// namespace/name; test them with errors.Is (opstask.ErrConflict,
// opstask.ErrNotFound) or apierrors.
//
// # The client
//
// Store.Client returns the dynamic.ResourceInterface the store uses
// (namespaced when Config.Namespace is set), to create tasks or read them
// beyond the Store interface. The package has no As method.
package kubestore
