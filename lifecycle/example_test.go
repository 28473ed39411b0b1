package lifecycle_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func ExampleParseName() {
	for _, s := range []string{"DeleteOnStatefulSetDeletionOnly", "DeleteOnScaledownAndOwnerDeletion", "Sometimes"} {
		n, err := lifecycle.ParseName(s)
		if err != nil {
			fmt.Println(err, errors.Is(err, lifecycle.ErrInvalidPolicy))
			continue
		}
		p, _ := n.Policy()
		fmt.Printf("%s: whenDeleted=%s whenScaled=%s\n", n, p.WhenDeleted, p.WhenScaled)
	}
	// Output:
	// DeleteOnOwnerDeletionOnly: whenDeleted=Delete whenScaled=Retain
	// DeleteOnScaledownAndOwnerDeletion: whenDeleted=Delete whenScaled=Delete
	// lifecycle: invalid policy: policy = "Sometimes": must be one of "Retain", "DeleteOnOwnerDeletionOnly", "DeleteOnScaledownOnly", "DeleteOnScaledownAndOwnerDeletion" (or the KEP-1847 names with "StatefulSet") true
}

func ExampleFromStatefulSet() {
	p, _ := lifecycle.FromStatefulSet(&appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType})
	n, _ := p.Name()
	fmt.Println(n)
	_, err := lifecycle.FromStatefulSet(&appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Orphan"})
	fmt.Println(err)
	// Output:
	// DeleteOnScaledownOnly
	// lifecycle: invalid policy: whenDeleted = "Orphan": must be "Retain" or "Delete"
}

func ExampleOwnerReferences() {
	// The owner is a custom resource; typed objects carry no kind, so name it.
	db := &metav1.ObjectMeta{Name: "db", UID: "db-uid"}
	owner := lifecycle.RefTo(db, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Database"})
	pod := lifecycle.PodRef(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-1", UID: "pod-uid"}})
	policy, _ := lifecycle.DeleteOnScaledownAndOwnerDeletion.Policy()

	show := func(plan lifecycle.Plan) {
		fmt.Print(plan.Status, ":")
		for _, r := range plan.OwnerReferences {
			fmt.Printf(" %s/%s controller=%v", r.Kind, r.Name, *r.Controller)
		}
		fmt.Println()
	}
	inRange, _ := lifecycle.OwnerReferences(lifecycle.Ownership{Policy: policy, Owner: owner, Pod: pod}, nil)
	show(inRange)
	condemned, _ := lifecycle.OwnerReferences(lifecycle.Ownership{Policy: policy, Owner: owner, Pod: pod, Condemned: true}, inRange.OwnerReferences)
	show(condemned)
	retained, _ := lifecycle.OwnerReferences(lifecycle.Ownership{Owner: owner, Pod: pod, Condemned: true}, condemned.OwnerReferences)
	show(retained)

	yes := true
	other := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "sts-uid", Controller: &yes}}
	conflict, _ := lifecycle.OwnerReferences(lifecycle.Ownership{Policy: policy, Owner: owner, Pod: pod}, other)
	show(conflict)
	// Output:
	// Update: Database/db controller=true
	// Update: Pod/db-1 controller=true
	// Update:
	// Conflict: StatefulSet/web controller=true
}

func ExampleAnnotations_Reuse() {
	ann := lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-as-0", Annotations: ann.Track("as-0", 30*24*time.Hour)}}
	fmt.Println(claim.Annotations)

	// The pod is deleted: record when.
	for k, v := range ann.MarkUnmounted(claim, "as-0", now.Add(-31*24*time.Hour)) {
		claim.Annotations[k] = *v
	}
	d, _ := ann.Reuse(claim, "as-0", "", 0, now)
	fmt.Println(d.Verdict, "-", d.Reason)
	// Output:
	// map[aerospike.travelaudience.com/pod-name:as-0 aerospike.travelaudience.com/pvc-ttl:30d]
	// DeleteFirst - claim data-as-0 expired at 2026-11-21T12:00:00Z (unmounted since 2026-10-22T12:00:00Z)
}
