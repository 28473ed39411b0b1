package lifecycle_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

func TestUseTemplates(t *testing.T) {
	pod := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "db", Image: "db:1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
			}}}
	claims := []corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "data", Labels: map[string]string{"tier": "hot"}},
			Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "wal"}},
	}
	var s lifecycle.ClaimSet
	s.Owner.Ref.Name = "orders"
	s.UseTemplates(pod, claims)
	// Later changes to the templates do not reach the set.
	pod.Labels["app"] = "changed"
	claims[0].Name = "changed"

	got, err := s.Claims(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "data-orders-2" || got[1].Name != "wal-orders-2" || got[0].Labels["tier"] != "hot" ||
		got[0].Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Fatalf("claims %+v, want data-orders-2 (1Gi, tier=hot) and wal-orders-2", got)
	}
	p, err := s.Pod(2)
	if err != nil {
		t.Fatal(err)
	}
	if p.Labels["app"] != "db" || p.Spec.Containers[0].Image != "db:1" {
		t.Errorf("pod %+v, want the template's labels and containers", p)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	if len(p.Spec.Volumes) != 3 || vols["data"].PersistentVolumeClaim == nil || vols["data"].PersistentVolumeClaim.ClaimName != "data-orders-2" ||
		vols["wal"].PersistentVolumeClaim == nil || vols["wal"].PersistentVolumeClaim.ClaimName != "wal-orders-2" || vols["config"].ConfigMap == nil {
		t.Errorf("volumes %+v, want data replaced by claim data-orders-2, wal added, config kept", p.Spec.Volumes)
	}
	// Each call gives its own objects.
	p.Labels["app"] = "mutated"
	if p2, _ := s.Pod(2); p2.Labels["app"] != "db" {
		t.Error("a pod shares its labels with the next")
	}
}
