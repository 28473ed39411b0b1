package testenv_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// podBecomesRunning is the body of a test in your own module: copy it as
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
//	func TestPodBecomesRunning(t *testing.T) { ... }
//
// and run `make testenv` once in a clone of groundskeeper, which builds the
// components into a cache that the tests of every module find.
func podBecomesRunning(t testing.TB) {
	env := testenv.StartKubernetes(t)
	nodes := env.StartNodes(t, &testenv.NodeOptions{Count: 2})
	pool := env.NewVolumePool(t, nil) // claims bind when their pod is scheduled

	ctx := context.Background()
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-db-0"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &pool.StorageClass,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := env.Client.CoreV1().PersistentVolumeClaims(env.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "db", Image: "registry.example/db:1"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}},
		},
	}
	if _, err := env.Client.CoreV1().Pods(env.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Wait on what the cluster shows, never on time.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, "db-0", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	if err != nil {
		t.Fatalf("pod db-0 not Running: %v", err)
	}
	p, _ := env.Client.CoreV1().Pods(env.Namespace).Get(ctx, "db-0", metav1.GetOptions{})
	t.Logf("pod db-0 runs on %s (one of %s, %s)", p.Spec.NodeName, nodes.Items[0].Name, nodes.Items[1].Name)
}

// A test of your own module with fake nodes: the pods of the test's
// namespace are scheduled to them and become Running, and the claim of a
// pool's class binds when its pod is scheduled. The whole file is the
// example; its test is podBecomesRunning, which this package's tests run.
func Example_nodes() {}
