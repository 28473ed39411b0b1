package main

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// conditionClaimsReady is the status condition about the set's claims.
const conditionClaimsReady = "ClaimsReady"

// reconciler brings one ReplicatedSet's pods and claims to its spec: the
// claim set's work is lifecycle's (SyncSet); this file says how a set's
// pods and claims look and writes the status.
type reconciler struct {
	client.Client
	sets   claims.Sets[*api.ReplicatedSet]
	m      *lifecycle.Manager
	events events.EventRecorder
	// dryRun: create missing pods and claims, but patch no claim and delete
	// no pod; report what would be done.
	dryRun bool
}

// specOf is what lifecycle needs from a set's spec.
func specOf(set *api.ReplicatedSet) (int, lifecycle.Policy, error) {
	p, err := set.Spec.RetentionPolicy()
	return set.Spec.DesiredReplicas(), p, err
}

// reconcile is one pass over a set (lifecycle.Manager.SyncSet says what it
// does), then its status.
func (r *reconciler) reconcile(ctx context.Context, set *api.ReplicatedSet) error {
	cs, err := r.sets.For(set)
	if err != nil {
		// Terminal until the spec changes: touching claims under a policy
		// we cannot read could delete data.
		r.events.Eventf(set, nil, corev1.EventTypeWarning, "InvalidPolicy", "Validate", "%s", err.Error())
		return r.writeStatus(ctx, set, -1, "", metav1.Condition{Type: conditionClaimsReady, Status: metav1.ConditionFalse, Reason: "InvalidPolicy", Message: err.Error()})
	}
	if cs.Owner.Deleting {
		return nil // the garbage collector does the rest
	}
	cs.CondemnedAnnotation = api.CondemnedByAnnotation
	cs.Pod = func(i int) (*corev1.Pod, error) { return podOf(set, i), nil }
	cs.Claims = func(i int) ([]*corev1.PersistentVolumeClaim, error) { return claimsOf(set, i), nil }
	res, err := r.m.SyncSet(ctx, cs, &lifecycle.SetOptions{DryRun: r.dryRun, CreateMissing: true})
	return errors.Join(r.writeStatus(ctx, set, res.Ready, string(res.Policy), res.Condition(conditionClaimsReady, err)), err)
}

// podOf is the set's pod with ordinal i, mounting its claims; lifecycle
// names it and adds the label and the controller reference.
func podOf(set *api.ReplicatedSet, i int) *corev1.Pod {
	c := corev1.Container{Name: "main", Image: set.Spec.Template.Image, Command: set.Spec.Template.Command}
	var vols []corev1.Volume
	for _, t := range set.Spec.VolumeClaimTemplates {
		vols = append(vols, corev1.Volume{Name: t.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: lifecycle.ClaimName(t.Name, set.Name, i)}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: t.Name, MountPath: "/data/" + t.Name})
	}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: vols, Hostname: api.PodName(set.Name, i),
		TerminationGracePeriodSeconds: set.Spec.Template.TerminationGracePeriodSeconds}}
}

// claimsOf are the claims of the set's pod with ordinal i, one per template.
func claimsOf(set *api.ReplicatedSet, i int) []*corev1.PersistentVolumeClaim {
	var out []*corev1.PersistentVolumeClaim
	for _, t := range set.Spec.VolumeClaimTemplates {
		out = append(out, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: lifecycle.ClaimName(t.Name, set.Name, i)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: t.Size}},
				StorageClassName: t.StorageClassName,
			},
		})
	}
	return out
}

// writeStatus updates the status when it changed; ready < 0 keeps the
// replica count.
func (r *reconciler) writeStatus(ctx context.Context, set *api.ReplicatedSet, ready int, policy string, cond metav1.Condition) error {
	next := set.DeepCopy()
	next.Status.ObservedGeneration = set.Generation
	if ready >= 0 {
		next.Status.Replicas = int32(ready)
	}
	next.Status.Policy = policy
	cond.ObservedGeneration = set.Generation
	meta.SetStatusCondition(&next.Status.Conditions, cond)
	if equality.Semantic.DeepEqual(set.Status, next.Status) {
		return nil
	}
	return r.Status().Update(ctx, next)
}
