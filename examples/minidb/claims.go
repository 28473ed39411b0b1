package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/examples/minidb/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/locking/lockstep"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

const dbLabel = "minidb.example.com/name"

func claimSets(mgr manager.Manager) claims.Sets[*api.MiniDB] {
	return claims.Sets[*api.MiniDB]{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		GVK: api.GroupVersion.WithKind("MiniDB"), Label: dbLabel,
		Spec: func(db *api.MiniDB) (int, lifecycle.Policy, error) {
			p, err := lifecycle.FromStatefulSet(db.Spec.ClaimRetention)
			return int(db.Spec.Replicas), p, err
		}}
}

// claimsStep brings the database's pods and claims to its spec.
func claimsStep(mgr manager.Manager, lm *lifecycle.Manager) subreconcile.Named[*api.MiniDB, *lockstep.State] {
	sets := claimSets(mgr)
	return subreconcile.NamedFunc("Claims", func(ctx context.Context, db *api.MiniDB, _ subreconcile.Loop[*lockstep.State]) *subreconcile.Requeue {
		set, err := sets.For(db)
		if err != nil {
			return subreconcile.RequeueOnError(err)
		}
		set.UseTemplates(corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: db.Spec.Image,
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}},
			[]corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}})
		res, err := lm.SyncSet(ctx, set, nil)
		db.Status.Replicas = int32(res.Ready)
		meta.SetStatusCondition(&db.Status.Conditions, res.Condition("ClaimsReady", err))
		if err != nil {
			return subreconcile.RequeueOnError(err)
		}
		if res.RequeueAfter > 0 {
			return subreconcile.DelayedRequeueAfter(res.RequeueAfter, "waiting for claims")
		}
		return nil
	})
}
