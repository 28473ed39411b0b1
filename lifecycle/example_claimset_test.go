package lifecycle_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// A claim set of two pods under DeleteOnScaledownOnly, scaled to one: one
// SyncSet call per reconcile creates the claims and pods, then, once the
// owner says one replica, gives the condemned pod's claim to the pod (the
// garbage collector deletes it with the pod) and deletes the pod. The
// in-memory client stands for the API server (it has no garbage collector).
func ExampleManager_SyncSet() {
	ctx := context.Background()
	m, err := lifecycle.New(lifecycle.Config{Client: newMemClient()})
	if err != nil {
		panic(err)
	}
	policy, _ := lifecycle.DeleteOnScaledownOnly.Policy()
	owner := lifecycle.Owner{Ref: lifecycle.Ref{APIVersion: "db.example/v1", Kind: "DB", Name: "db", UID: "db-uid"},
		Replicas: 2, Policy: policy, Version: "1"}
	set := lifecycle.ClaimSet{
		Namespace: "prod",
		Label:     "db.example/name",
		// The owner as the API server has it now (a reconciler reads its
		// object through an uncached reader).
		Reread: func(context.Context) (*lifecycle.Owner, error) { o := owner; return &o, nil },
		Pod: func(i int) (*corev1.Pod, error) {
			return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:1"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("data-db-%d", i)}}}}}}, nil
		},
		Claims: func(i int) ([]*corev1.PersistentVolumeClaim, error) {
			return []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-db-%d", i)}}}, nil
		},
	}
	reconcile := func(dryRun bool) {
		set.Owner = owner
		res, err := m.SyncSet(ctx, set, &lifecycle.SetOptions{DryRun: dryRun})
		if err != nil {
			panic(err)
		}
		for _, a := range res.Actions {
			fmt.Printf("%s %s %s (dry run: %v)\n", a.Verb, a.Kind, a.Name, a.DryRun)
		}
		fmt.Println("ready:", res.Ready, "condemned:", res.Condemned)
	}
	reconcile(false)
	owner.Replicas, owner.Version = 1, "2"
	fmt.Println("-- scaled to 1, dry run")
	reconcile(true)
	fmt.Println("-- scaled to 1")
	reconcile(false)
	// Output:
	// Create PersistentVolumeClaim data-db-0 (dry run: false)
	// Create Pod db-0 (dry run: false)
	// Create PersistentVolumeClaim data-db-1 (dry run: false)
	// Create Pod db-1 (dry run: false)
	// ready: 2 condemned: []
	// -- scaled to 1, dry run
	// SetOwnerReferences PersistentVolumeClaim data-db-1 (dry run: true)
	// Delete Pod db-1 (dry run: true)
	// ready: 1 condemned: [1]
	// -- scaled to 1
	// SetOwnerReferences PersistentVolumeClaim data-db-1 (dry run: false)
	// Delete Pod db-1 (dry run: false)
	// ready: 1 condemned: [1]
}
