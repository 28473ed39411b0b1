package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VolumeOptions configures [Kubernetes.NewVolumePool]. A nil *VolumeOptions
// means the defaults.
type VolumeOptions struct {
	// Count is the number of PersistentVolumes; 0 means 10.
	Count int
	// Capacity is each volume's capacity; zero means 10Gi. A claim binds
	// to a volume at least as large as it requests.
	Capacity resource.Quantity
	// Immediate makes the class bind a claim as soon as it is created
	// (volumeBindingMode Immediate), with no pod and no node. By default a
	// claim binds when the scheduler places its first pod
	// (WaitForFirstConsumer, as local and zonal storage does), which needs
	// [Kubernetes.StartNodes].
	Immediate bool
}

// VolumePool is a StorageClass of one test and PersistentVolumes of that
// class, which the controller manager's persistentvolume-binder binds to
// the claims that name the class.
type VolumePool struct {
	// StorageClass is the class's name: a claim whose
	// spec.storageClassName is this binds to one of the pool's volumes.
	StorageClass string
	// Volumes are the names of the PersistentVolumes.
	Volumes []string
}

// NewVolumePool creates a StorageClass of this test (no provisioner) and a
// pool of PersistentVolumes of that class, statically provisioned as an
// administrator would: each volume binds to one claim of the class, and
// once that claim is deleted it is Released, keeping its (notional) data,
// and never bound again (reclaim policy Retain): a pool has as many claims
// as volumes in its life. The volumes are hostPath volumes under a path no
// one reads (no kubelet mounts them). Class and volumes are deleted when
// the test ends; a volume still bound then goes once its claim does.
//
// A claim that names no class stays Pending: the environment has no
// default class, so that claims of tests that want none stay as they
// were.
func (k *Kubernetes) NewVolumePool(t testing.TB, o *VolumeOptions) *VolumePool {
	t.Helper()
	skipInShortMode(t)
	var opts VolumeOptions
	if o != nil {
		opts = *o
	}
	if opts.Count < 0 {
		t.Fatalf("testenv: VolumeOptions.Count is %d, want 1 or more", opts.Count)
	}
	if opts.Count == 0 {
		opts.Count = 10
	}
	if opts.Capacity.IsZero() {
		opts.Capacity = resource.MustParse("10Gi")
	}
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	if opts.Immediate {
		mode = storagev1.VolumeBindingImmediate
	}
	ctx := context.Background()
	pool := &VolumePool{StorageClass: uniqueName(t, 50)}
	class := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: pool.StorageClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &mode,
	}
	if _, err := k.Client.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: create storage class %s: %v", class.Name, err)
	}
	t.Cleanup(func() { k.removeVolumePool(pool) })
	for i := range opts.Count {
		name := fmt.Sprintf("%s-%d", pool.StorageClass, i)
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:              pool.StorageClass,
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: opts.Capacity},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: "/testenv/volumes/" + name},
				},
			},
		}
		if _, err := k.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatalf("testenv: create persistent volume %s: %v", name, err)
		}
		pool.Volumes = append(pool.Volumes, name)
	}
	return pool
}

// removeVolumePool deletes the pool's volumes and class at the end of the
// test; the control plane may be down (a test of faults stopped it), so
// errors are ignored.
func (k *Kubernetes) removeVolumePool(pool *VolumePool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range pool.Volumes {
		_ = k.Client.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{})
	}
	_ = k.Client.StorageV1().StorageClasses().Delete(ctx, pool.StorageClass, metav1.DeleteOptions{})
}
