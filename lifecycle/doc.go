// Package lifecycle owns the life of the persistent volume claims that an
// operator creates for its pods, for an owner of any kind (a custom resource,
// not only a StatefulSet): KEP-1847's delete policies, the owner references
// that carry them out through the garbage collector, the scale-up check that
// never reuses a claim that is going away, the scale-down of an owner that
// makes its own pods (claim sets), unmount tracking with a time-to-live, and
// a collector of expired claims.
//
// Start with [New] for a [Manager]. An owner that makes its own pods as a
// StatefulSet does calls [Manager.SyncSet] once per reconcile (Claim sets); an
// operator with its own pod code calls [Manager.SyncOwner] with every pod slot
// (Owner references), and [Manager.Collect] for expired claims. A claim goes only through the garbage collector, by the
// owner references its policy sets, or expired, with UID and resourceVersion
// preconditions, once a fresh list of pods shows none mounts it. Every call
// that deletes has a dry run.
//
// # Claim sets
//
// An owner that makes its own pods as a StatefulSet does (pod
// <owner>-<ordinal>, each with its claims) calls Manager.SyncSet once per
// reconcile: it creates the missing claims and pods (reusing a claim, or
// waiting for one that is going away), brings every claim's owner references
// to the policy, and scales down one pod at a time after reading the owner
// again from the API server, recording the owner's version on the pod it
// deletes. The caller gives the owner's state (Owner), how to build pod i and
// its claims, and how to read the owner fresh (ClaimSet); the SetResult says
// what was done, what waits and when to look again. SetOptions.DryRun says
// what it would do. crt/claims.Sets fills a ClaimSet from a controller-runtime
// manager:
//
//	set, err := sets.For(db) // a crt/claims.Sets[*api.DB]
//	set.Pod, set.Claims = podOf(db), claimsOf(db)
//	res, err := m.SyncSet(ctx, set, nil)
//	// status from res.Ready and res.Condition("ClaimsReady", err); requeue after res.RequeueAfter
//
// # Policies
//
// A Policy is the form Kubernetes shipped (whenDeleted, whenScaled: Retain or
// Delete); a Name is one of KEP-1847's four policies, with "StatefulSet"
// spelled "Owner": Retain, DeleteOnOwnerDeletionOnly,
// DeleteOnScaledownOnly, DeleteOnScaledownAndOwnerDeletion. Policy.Name and
// Name.Policy convert losslessly; ParseName also accepts the KEP spellings,
// and FromStatefulSet / Policy.StatefulSet convert to and from the
// StatefulSet field. The zero Policy is Retain.
//
// # Owner references
//
// OwnerReferences is a pure function from (policy, owner, pod, condemned,
// current references) to the references the claim must have; it follows the
// StatefulSet controller of Kubernetes (see its doc for the rules). The claim
// is deleted by the garbage collector: with the owner when the owner holds
// the claim's controller reference, with the pod when the pod does.
//
// An operator calls Manager.SyncOwner on every reconcile with all its pod
// slots (members): pods in range, and condemned pods before it deletes them.
// The same call re-converges every claim after a policy change. A typical
// reconcile:
//
//	for each ordinal in range whose pod is missing:
//		dec, err := m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: podName, Claim: claimName}, &lifecycle.ReuseOptions{Owner: &owner})
//		// VerdictWait or VerdictDeleteFirst: requeue; VerdictCreate: create the claim with
//		// m.Annotations().Track(podName, ttl); then create the pod
//	m.SyncOwner(ctx, scope, owner, policy, members, nil) // condemned ones included
//	for each condemned pod:
//		delete it (UID precondition), then m.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: ns, Pod: pod, Claim: claim})
//	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: scope})
//	return reconcile.Result{RequeueAfter: res.RequeueAfter}
//
// # Clients
//
// A Manager sends its requests through Client, the few calls it makes on
// claims and pods, each with a context: ClientGo adapts a client-go
// clientset, and package crt a controller-runtime manager (its client, and
// its API reader for the reads that must be fresh). Scope.Claims and
// Scope.Pods take caches: InformerClaims and InformerPods over client-go
// listers, crt/claims.Cache and crt/claims.PodCache over a controller-runtime cache.
//
// # Unmount tracking
//
// Annotations names three annotations under a prefix (DefaultAnnotationPrefix
// "groundskeeper.io/", or AerospikeAnnotationPrefix for aerospike-operator's
// "aerospike.travelaudience.com/"): pvc-ttl (retention.ParseDuration syntax),
// pod-name and last-unmounted-on (RFC 3339).
//
// On Kubernetes 1.37 and later, Annotations.UnusedCondition (opt-in) takes
// the instant from the claims' Unused condition instead, which
// kube-controller-manager keeps on Bound claims (KEP-5541): no annotation is
// written and no missed pod-delete event leaves a claim unmarked. Claims
// without the condition keep the annotations; see UnusedCondition for the
// claims it applies to and for claims no pod has mounted yet.
//
// # Guarantees
//
//   - Unknown policy values are rejected, naming the field and the value;
//     nothing is ever read as Delete by default.
//   - References this package adds are controller references with
//     blockOwnerDeletion; a reference to our owner or pod without controller
//     is upgraded in place; references to other objects are kept, in order.
//   - A claim that refers to an earlier owner or pod of the same name (another
//     UID) is not written to. A claim controlled by another object gets no new
//     reference; only ours are removed, a ConflictingController warning is
//     recorded on the owner and a *ConflictError returned.
//   - Every write to a claim is one merge patch carrying the resourceVersion
//     it was computed from. On a conflict the claim is read again and the
//     change computed again: another writer's change is never overwritten.
//   - Non-cascading (orphan) deletion of the owner deletes no claim: the
//     garbage collector removes the owner's references from them instead.
//   - One rule decides whether a claim may be deleted as expired, for every
//     path that deletes one (Collect and CheckReuse): its mark's TTL has run
//     out, it is not being deleted, and no pod of the namespace mounts it,
//     whatever the pod's name, as a fresh list of every pod of the
//     namespace from the API server says. The mark alone never decides: a
//     pod that mounts the claim without CheckReuse (a debug or backup pod,
//     a pod of another controller) makes the mark stale, and a stale mark
//     is removed and the claim kept.
//   - CheckReuse never answers VerdictReuse for a claim being deleted, one that
//     still refers to an earlier pod of the same name, one that (given the
//     owner) still refers to an earlier owner of the same name, which the
//     garbage collector is about to delete, one whose owner label names
//     another owner whose claim has the same name, or one whose
//     TTL has run out since it was unmounted (that one it deletes first,
//     under the rule above; mounted, it answers VerdictWait). A reused
//     claim's last-unmounted-on is removed with a resourceVersion guard, so a
//     collector that decided on the earlier version cannot delete it. Given
//     the owner, it neither deletes nor writes to a claim another object
//     controls: expired, such a claim is answered VerdictWait, with a
//     ConflictingController warning.
//   - MarkUnmounted decides on a fresh read, never on the pod-delete event
//     that triggered it: it marks a claim unmounted only when no pod of the
//     namespace mounts it, as a list from the API server says; a late event
//     for a pod already recreated writes nothing.
//   - Collect deletes a claim only if it carries last-unmounted-on, its TTL
//     (retention.TTL, from that instant) has run out, it is not being
//     deleted and no pod of the namespace mounts it (whatever the pod's
//     name; for the claims about to be deleted, checked on a fresh list from
//     the API server when the first read came from a cache); and it deletes
//     with UID and resourceVersion preconditions, so a claim changed or
//     recreated since the decision is never deleted. A mark found on a
//     mounted claim is removed. A claim whose annotations do not parse is
//     never deleted. DryRun returns exactly the claims it would delete and
//     why.
//   - Every call that writes or deletes has a dry run that makes the same
//     reads and decision and writes nothing: CheckReuse and SyncOwner /
//     SyncClaim (ReuseOptions.DryRun, SyncOptions.DryRun), Collect
//     (CollectOptions.DryRun), SyncSet (SetOptions.DryRun). MarkUnmounted
//     writes one annotation and has none; PlanCollect decides without any
//     request.
//   - SyncSet deletes a pod on scale-down only when a read of the owner from
//     the API server, made after the decision, still condemns it (same UID,
//     not being deleted, ordinal at or above its replicas) and has the
//     policy the claims' owner references were written from (a policy
//     changed since gives up until the next call); it records that
//     read's resourceVersion on the pod and deletes it with its UID as
//     precondition, one pod at a time, and only once every claim's owner
//     references were written. It never deletes a claim except an expired
//     one, through CheckReuse.
//   - Every call about one pod's claim takes a PodClaim, so the pod's and
//     the claim's names cannot be swapped silently.
//   - Collect decides with Annotations.PlanCollect, a pure function of the
//     claims, the pods and the instant (no request, no clock), and acts on
//     that decision (after one more, live, check of the pods); PlanCollect
//     on the same claims, pods and instant says what a pass would decide,
//     so a tool can show it from any copy of them.
//   - Collect reads claims and pods with paginated lists (or the caches
//     given in Scope), never one request per claim; its only other
//     requests are the deletes, the removal of out-of-date marks and, when
//     it is about to delete, one list of pods from the API server.
//   - A Scope must name its namespace; objects of other namespaces served by
//     a cluster-wide cache are ignored.
//   - Time comes from the injected clock (Config.Clock); Collect returns when
//     the next claim expires (RequeueAfter) instead of polling.
//
// It does not guarantee:
//
//   - that the garbage collector has acted when a call returns: deletion by
//     owner reference is asynchronous, and the PVC protection controller
//     keeps a claim until no pod uses it.
//   - freedom from the races KEP-1847 describes: changing the policy while
//     the owner is being deleted or scaled down may delete claims the new
//     policy would keep, or keep claims it would delete.
//   - that a condemned pod that no longer exists gets its claims deleted: as
//     in the StatefulSet controller, only claims of existing condemned pods
//     receive a pod reference. Restore a manually deleted pod before scaling
//     it down.
//   - that two operators with different prefixes agree: each reads only its
//     own annotations.
//   - that a claim is kept for a pod created to mount it (without
//     CheckReuse, which clears the mark) after the fresh pod list and before
//     the delete, a window of one request: the claim is then deleted, and
//     the PVC protection controller keeps it (Terminating) only while a
//     pod that already uses it runs.
//   - that a mark is renewed when a pod mounts the claim and goes again
//     before any Collect pass or CheckReuse saw that pod: the claim keeps the
//     earlier instant and may expire that much early. Run Collect when pods
//     are created (as the examples do), or call CheckReuse before creating
//     a pod.
//
// Two differences from the StatefulSet controller, both deliberate: owner
// references are matched by API group, kind and name (not by the exact
// apiVersion string), because a custom resource may be referred to with any
// of its served versions; and a stale reference is reported as
// ErrStaleOwnerReference without a ConflictingController event (the
// StatefulSet controller records that event for both cases).
//
// # Errors
//
// Bad input is rejected with errors that wrap ErrInvalidPolicy (a
// *PolicyError naming the field and value) or ErrInvalidInput (naming the
// field, or the claim, annotation key and value). SyncClaim and SyncOwner
// return errors wrapping ErrConflictingController (a *ConflictError with the
// other controller's reference), which describes the claim and does not go
// away by retrying (crt.Terminal makes it terminal), and
// ErrStaleOwnerReference, which clears once the garbage collector has
// removed the reference or deleted the claim: retry (crt.Terminal leaves it
// retryable). ErrTooManyConflicts means the
// claim kept changing under us: requeue. Errors from the API server are
// wrapped with the claim's namespace and name; test them with apierrors (for
// instance apierrors.IsNotFound).
package lifecycle
