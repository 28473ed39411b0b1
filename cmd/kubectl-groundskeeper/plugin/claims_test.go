package plugin_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestClaims(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := context.Background()
	ann := lifecycle.Annotations{}
	claim := func(name string, a map[string]string) {
		t.Helper()
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: a},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
		if _, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, claim string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "db", Image: "db"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			},
		}
		if _, err := k.Client.CoreV1().Pods(k.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	day := 24 * time.Hour
	claim("data-db-0", map[string]string{ann.PodNameKey(): "db-0", ann.TTLKey(): "2d"})
	pod("db-0", "data-db-0")
	claim("data-db-1", map[string]string{ann.PodNameKey(): "db-1", ann.TTLKey(): "2d", ann.LastUnmountedKey(): t0.Format(time.RFC3339)})
	claim("data-db-2", map[string]string{ann.PodNameKey(): "db-2", ann.TTLKey(): "1d", ann.LastUnmountedKey(): t0.Add(-3 * day).Format(time.RFC3339)})
	claim("data-db-3", map[string]string{ann.PodNameKey(): "db-3", ann.TTLKey(): "1d", ann.LastUnmountedKey(): t0.Add(-3 * day).Format(time.RFC3339)})
	pod("db-3", "data-db-3")
	claim("data-db-4", map[string]string{ann.PodNameKey(): "db-4", ann.TTLKey(): "soon", ann.LastUnmountedKey(): t0.Format(time.RFC3339)})
	claim("data-db-5", map[string]string{ann.PodNameKey(): "db-5", ann.LastUnmountedKey(): t0.Add(-10 * day).Format(time.RFC3339)})
	claim("scratch", nil)

	opts := plugin.Options{Clock: clocktesting.NewFakeClock(t0.Add(time.Hour))}
	r := run(t, opts, kube(k, "claims")...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	golden(t, "claims.txt", r.out, k)
	r = run(t, opts, kube(k, "claims", "--default-ttl", "7d", "-o", "json")...)
	golden(t, "claims-default-ttl.json", r.out, k)

	// A dry run: every claim is still there.
	l, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 7 {
		t.Errorf("%d claims after claims, want the 7 created", len(l.Items))
	}
}
