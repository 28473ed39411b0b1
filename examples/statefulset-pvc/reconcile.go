package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// Event reasons of the controller (lifecycle adds ClaimOwnersUpdated and
// ConflictingController).
const (
	reasonCreated       = "SuccessfulCreate"
	reasonDeleted       = "SuccessfulDelete"
	reasonReused        = "ClaimReused"
	reasonWaiting       = "WaitingForClaim"
	reasonInvalidPolicy = "InvalidPolicy"
	reasonDryRun        = "DryRun"
)

// conditionClaimsReady is the status condition about the set's claims.
const conditionClaimsReady = "ClaimsReady"

// reconciler brings one ReplicatedSet's pods and claims to its spec. It
// reads sets, pods and claims through the manager's client (its cache) and
// writes through it; the claims' owner references are lifecycle's.
type reconciler struct {
	client.Client
	// live is the manager's API reader: the set is read again from the
	// API server before a pod is deleted on scale-down.
	live   client.Reader
	m      *lifecycle.Manager
	events events.EventRecorder
	// dryRun: patch no claim and delete no pod; report what would be done.
	dryRun bool
}

// reconcile is one pass over a set: create the missing claims and pods of
// ordinals in range (claims first), bring every claim's owner references to
// the policy (condemned pods included), then delete the highest condemned
// pod. The garbage collector deletes claims; this controller never does.
func (r *reconciler) reconcile(ctx context.Context, set *api.ReplicatedSet) error {
	if set.DeletionTimestamp != nil {
		// The garbage collector removes the pods and, by their owner
		// references, the claims the policy deletes.
		return nil
	}
	policy, err := set.Spec.RetentionPolicy()
	if err != nil {
		// Terminal until the spec changes: touching claims under a policy
		// we cannot read could delete data.
		r.event(set, nil, corev1.EventTypeWarning, reasonInvalidPolicy, "Validate", err.Error())
		return r.writeStatus(ctx, set, -1, "", metav1.ConditionFalse, reasonInvalidPolicy, err.Error())
	}
	policyName, _ := policy.Name()
	owner := lifecycle.RefTo(set, api.GroupVersionKind)
	replicas := set.Spec.DesiredReplicas()

	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(set.Namespace), client.MatchingLabels{api.SetLabel: set.Name}); err != nil {
		return err
	}
	byOrdinal := map[int]*corev1.Pod{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if n, ok := ordinal(set.Name, pod.Name); ok && metav1.IsControlledBy(pod, set) {
			byOrdinal[n] = pod
		}
	}

	var members []lifecycle.Member
	var waiting []string
	for i := 0; i < replicas; i++ {
		pod := byOrdinal[i]
		if pod == nil {
			ready, err := r.ensureClaims(ctx, set, owner, policy, i)
			if err != nil {
				return err
			}
			if ready != "" {
				waiting = append(waiting, ready)
				continue
			}
			if pod, err = r.createPod(ctx, set, owner, i); err != nil {
				return err
			}
		}
		if pod.DeletionTimestamp == nil {
			members = append(members, lifecycle.Member{Pod: lifecycle.PodRef(pod), Claims: claimNames(set, i)})
		}
	}
	var condemned []int // highest ordinal first
	terminating := false
	for _, i := range slices.Backward(slices.Sorted(maps.Keys(byOrdinal))) {
		pod := byOrdinal[i]
		if i < replicas {
			break
		}
		if pod.DeletionTimestamp != nil {
			terminating = true
			continue
		}
		condemned = append(condemned, i)
		members = append(members, lifecycle.Member{Pod: lifecycle.PodRef(pod), Condemned: true, Claims: claimNames(set, i)})
	}

	// Owner references before the scale-down: a condemned pod's claims get
	// their pod reference while the pod still exists.
	syncs, syncErr := r.syncOwner(ctx, set, owner, policy, members)
	var conflicts, stale []string
	var failures []error
	for _, s := range syncs {
		switch {
		case s.Err == nil:
		case errors.Is(s.Err, lifecycle.ErrConflictingController):
			// The claim is not ours to manage: lifecycle removed only our
			// references and recorded why. The policy does not apply to it.
			conflicts = append(conflicts, s.Claim)
		case errors.Is(s.Err, lifecycle.ErrStaleOwnerReference):
			// It refers to an earlier set or pod of the same name: the
			// garbage collector is about to decide its fate.
			stale = append(stale, s.Claim)
		default:
			failures = append(failures, s.Err)
		}
	}
	if syncErr != nil && syncs == nil {
		failures = append(failures, syncErr) // the claims could not be listed
	}
	failed := errors.Join(failures...)

	// Scale down one pod at a time, highest ordinal first, and only once
	// its claims carry the references the policy asks for.
	if len(condemned) > 0 && !terminating && failed == nil {
		i := condemned[0]
		still, setVersion, err := r.stillCondemned(ctx, set, i)
		if err != nil {
			return err
		}
		if still {
			if err := r.deletePod(ctx, set, byOrdinal[i], policy, setVersion); err != nil {
				return err
			}
		}
	}

	status, reason, msg := metav1.ConditionTrue, "Reconciled", fmt.Sprintf("claims follow policy %s", policyName)
	switch {
	case failed != nil:
		status, reason, msg = metav1.ConditionFalse, lifecycle.ReasonClaimOwnersFailed, failed.Error()
	case len(conflicts) > 0:
		status, reason, msg = metav1.ConditionFalse, lifecycle.ReasonConflictingController,
			fmt.Sprintf("claims %s are controlled by another object; the policy does not apply to them", strings.Join(conflicts, ", "))
	case len(stale) > 0:
		status, reason, msg = metav1.ConditionFalse, "StaleOwnerReference",
			fmt.Sprintf("claims %s refer to an earlier set or pod of the same name; left to the garbage collector", strings.Join(stale, ", "))
	case len(waiting) > 0:
		status, reason, msg = metav1.ConditionFalse, reasonWaiting, strings.Join(waiting, "; ")
	}
	if err := r.writeStatus(ctx, set, len(members)-len(condemned), string(policyName), status, reason, msg); err != nil {
		return err
	}
	if failed != nil {
		return fmt.Errorf("claim owner references not updated: %w", failed)
	}
	return nil
}

// ensureClaims makes sure the claims of ordinal i exist and may be mounted
// by a new pod, creating the missing ones. It returns why the pod must wait,
// or "" when it may be created.
func (r *reconciler) ensureClaims(ctx context.Context, set *api.ReplicatedSet, owner lifecycle.Ref, policy lifecycle.Policy, i int) (string, error) {
	podName := api.PodName(set.Name, i)
	for _, t := range set.Spec.VolumeClaimTemplates {
		name := api.ClaimName(t.Name, set.Name, i)
		// Never mount a claim that is going away, or that still belongs to
		// a condemned earlier pod of this name: the garbage collector is
		// about to delete it (KEP-1847, "DeleteOnScaledownOnly").
		dec, err := r.checkReuse(ctx, set, podName, name, &owner)
		if err != nil {
			return "", err
		}
		switch dec.Verdict {
		case lifecycle.VerdictWait, lifecycle.VerdictDeleteFirst:
			why := fmt.Sprintf("pod %s waits: %s", podName, dec.Reason)
			r.event(set, claimRef(set.Namespace, name, ""), corev1.EventTypeNormal, reasonWaiting, "Wait", why)
			return why, nil
		case lifecycle.VerdictReuse:
			var c corev1.PersistentVolumeClaim
			if err := r.Get(ctx, client.ObjectKey{Namespace: set.Namespace, Name: name}, &c); err == nil {
				r.event(set, claimRef(set.Namespace, name, c.UID), corev1.EventTypeNormal, reasonReused, "Reuse", fmt.Sprintf("pod %s reuses claim %s (uid %s)", podName, name, c.UID))
			}
			continue
		}
		// The claim is created with the owner references the policy wants,
		// so that it is never without them; in dry-run with none (SyncOwner's
		// report then says what they would be).
		plan, err := lifecycle.OwnerReferences(lifecycle.Ownership{Policy: policy, Owner: owner, Pod: lifecycle.Ref{Name: podName}}, nil)
		if err != nil {
			return "", err
		}
		if r.dryRun {
			plan.OwnerReferences = nil
		}
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				Namespace:       set.Namespace,
				Labels:          map[string]string{api.SetLabel: set.Name},
				Annotations:     r.m.Annotations().Track(podName, 0),
				OwnerReferences: plan.OwnerReferences,
			},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: t.Size}},
				StorageClassName: t.StorageClassName,
			},
		}
		err = r.Create(ctx, claim)
		switch {
		case apierrors.IsAlreadyExists(err):
			return fmt.Sprintf("claim %s appeared; checking it again", name), nil
		case err != nil:
			return "", fmt.Errorf("create claim %s/%s: %w", set.Namespace, name, err)
		}
		r.event(set, claimRef(set.Namespace, name, claim.UID), corev1.EventTypeNormal, reasonCreated, "Create", fmt.Sprintf("create Claim %s (uid %s) for Pod %s", name, claim.UID, podName))
	}
	return "", nil
}

// checkReuse is lifecycle's CheckReuse; in dry-run it decides the same and
// writes nothing, and a claim it would delete first is reported.
func (r *reconciler) checkReuse(ctx context.Context, set *api.ReplicatedSet, podName, claimName string, owner *lifecycle.Ref) (lifecycle.ReuseDecision, error) {
	dec, err := r.m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: set.Namespace, Pod: podName, Claim: claimName}, &lifecycle.ReuseOptions{Owner: owner, DryRun: r.dryRun,
		// Claim names are <template>-<set>-<ordinal>: template data-db of
		// set x and template data of set db-x name the same claim. A claim
		// labelled with another set is that set's.
		OwnerLabel: api.SetLabel})
	if err == nil && r.dryRun && dec.Verdict == lifecycle.VerdictDeleteFirst {
		r.event(set, claimRef(set.Namespace, claimName, ""), corev1.EventTypeNormal, reasonDryRun, "Delete", "would delete Claim "+claimName+": "+dec.Reason)
	}
	return dec, err
}

func (r *reconciler) createPod(ctx context.Context, set *api.ReplicatedSet, owner lifecycle.Ref, i int) (*corev1.Pod, error) {
	name := api.PodName(set.Name, i)
	yes := true
	c := corev1.Container{Name: "main", Image: set.Spec.Template.Image, Command: set.Spec.Template.Command}
	var vols []corev1.Volume
	for _, t := range set.Spec.VolumeClaimTemplates {
		vols = append(vols, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: api.ClaimName(t.Name, set.Name, i)}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: t.Name, MountPath: "/data/" + t.Name})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: set.Namespace,
			Labels:    map[string]string{api.SetLabel: set.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID,
				Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: vols, Hostname: name},
	}
	if err := r.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", set.Namespace, name, err)
	}
	r.event(set, podRef(pod), corev1.EventTypeNormal, reasonCreated, "Create", fmt.Sprintf("create Pod %s (uid %s)", name, pod.UID))
	return pod, nil
}

// stillCondemned reads the set again from the API server, not the cache,
// before a pod is deleted on scale-down: under whenScaled: Delete the
// pod's claims go with it, so a scale-down that the cache still shows but
// the user has undone since must not delete it. The next pass, with the
// newer set, decides again. It returns the resourceVersion of the set it
// read. A scale-up written between this read and the pod's deletion still
// loses the pod (and, under whenScaled: Delete, its claims): the API has no
// precondition that spans the set and the pod, so the window is one read
// and two writes long, not zero.
func (r *reconciler) stillCondemned(ctx context.Context, set *api.ReplicatedSet, i int) (bool, string, error) {
	var now api.ReplicatedSet
	err := r.live.Get(ctx, client.ObjectKeyFromObject(set), &now)
	switch {
	case apierrors.IsNotFound(err):
		return false, "", nil // the garbage collector takes its pods
	case err != nil:
		return false, "", fmt.Errorf("read replicatedset %s/%s: %w", set.Namespace, set.Name, err)
	}
	return now.UID == set.UID && now.DeletionTimestamp == nil && i >= now.Spec.DesiredReplicas(), now.ResourceVersion, nil
}

// deletePod deletes a condemned pod, exactly the one decided on (UID
// precondition): a pod recreated under the same name since is not touched.
// First it records on the pod the version of the set that condemned it
// (api.CondemnedByAnnotation), so that the deletion says what it was
// decided on.
func (r *reconciler) deletePod(ctx context.Context, set *api.ReplicatedSet, pod *corev1.Pod, policy lifecycle.Policy, setVersion string) error {
	then := "its claims stay (whenScaled=Retain)"
	if policy.DeletesOnScaledown() {
		then = "the garbage collector deletes its claims (whenScaled=Delete)"
	}
	if r.dryRun {
		r.event(set, podRef(pod), corev1.EventTypeNormal, reasonDryRun, "Delete", fmt.Sprintf("would delete Pod %s (uid %s) on scale-down; %s", pod.Name, pod.UID, then))
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, pod.UID, api.CondemnedByAnnotation, setVersion)
	err := r.Patch(ctx, pod.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
		return nil // gone, or another pod now (its uid differs): the next pass decides again
	case err != nil:
		return fmt.Errorf("annotate pod %s/%s before its deletion: %w", pod.Namespace, pod.Name, err)
	}
	err = r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil // gone, or another pod now: the next pass decides again
	case err != nil:
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	r.event(set, podRef(pod), corev1.EventTypeNormal, reasonDeleted, "Delete", fmt.Sprintf("delete Pod %s (uid %s) on scale-down; %s", pod.Name, pod.UID, then))
	return nil
}

// syncOwner is lifecycle's SyncOwner on the manager's cache; in dry-run it
// decides the same, writes nothing, and each change it would make is
// reported as an event.
func (r *reconciler) syncOwner(ctx context.Context, set *api.ReplicatedSet, owner lifecycle.Ref, policy lifecycle.Policy, members []lifecycle.Member) ([]lifecycle.ClaimSync, error) {
	syncs, err := r.m.SyncOwner(ctx, lifecycle.Scope{Namespace: set.Namespace, Claims: crt.ClaimCache(r.Client)}, owner, policy, members,
		&lifecycle.SyncOptions{DryRun: r.dryRun})
	if r.dryRun {
		for _, cs := range syncs {
			if cs.Plan.Changed {
				r.event(set, claimRef(set.Namespace, cs.Claim, ""), corev1.EventTypeNormal, reasonDryRun, "SetOwnerReferences",
					fmt.Sprintf("would set the owner references of Claim %s to [%s]", cs.Claim, refsString(cs.Plan.OwnerReferences)))
			}
		}
	}
	return syncs, err
}

// writeStatus updates the status when it changed; current < 0 keeps the
// replica count.
func (r *reconciler) writeStatus(ctx context.Context, set *api.ReplicatedSet, current int, policy string, cond metav1.ConditionStatus, reason, msg string) error {
	next := set.DeepCopy()
	next.Status.ObservedGeneration = set.Generation
	if current >= 0 {
		next.Status.Replicas = int32(current)
	}
	next.Status.Policy = policy
	meta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: conditionClaimsReady, Status: cond, Reason: reason,
		Message: msg, ObservedGeneration: set.Generation})
	if statusEqual(set.Status, next.Status) {
		return nil
	}
	return r.Status().Update(ctx, next)
}

func statusEqual(a, b api.ReplicatedSetStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || a.Replicas != b.Replicas || a.Policy != b.Policy || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}

// event records an event on the set about related, the pod or claim it
// concerns (nil: the set itself). The events.k8s.io API merges events with
// the same set, reason, action and related object into one series, so
// that each pod and claim gets its own.
func (r *reconciler) event(set *api.ReplicatedSet, related *corev1.ObjectReference, eventtype, reason, action, msg string) {
	if r.events == nil {
		return
	}
	regarding := &corev1.ObjectReference{APIVersion: api.GroupVersion.String(), Kind: api.Kind, Namespace: set.Namespace, Name: set.Name, UID: set.UID}
	if related == nil {
		r.events.Eventf(regarding, nil, eventtype, reason, action, "%s", msg)
		return
	}
	r.events.Eventf(regarding, related, eventtype, reason, action, "%s", msg)
}

func claimRef(namespace, name string, uid types.UID) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Namespace: namespace, Name: name, UID: uid}
}

func podRef(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

func claimNames(set *api.ReplicatedSet, i int) []string {
	var out []string
	for _, t := range set.Spec.VolumeClaimTemplates {
		out = append(out, api.ClaimName(t.Name, set.Name, i))
	}
	return out
}

// ordinal parses <set>-<ordinal>.
func ordinal(set, pod string) (int, bool) {
	s, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

func refsString(refs []metav1.OwnerReference) string {
	var parts []string
	for _, r := range refs {
		s := r.Kind + " " + r.Name
		if r.Controller != nil && *r.Controller {
			s += " (controller)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
