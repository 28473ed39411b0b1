package backups_test

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A writer Deployment of 3 replicas on a real API server: Pause scales it
// to 0 and records 3, and says ErrWriterRunning while a pod of its
// selector is left (the test plays the ReplicaSet controller: there is
// none); a second Pause keeps the record; Switch sets the location in the
// pod template; Resume scales it back to 3 and drops the record; a
// second Resume changes nothing.
func TestDeploymentWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	k := testenv.StartKubernetes(t)
	ctx := context.Background()
	cl, err := client.New(k.Config, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "etcd-main"}
	three := int32(3)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "etcd-main"},
		Spec: appsv1.DeploymentSpec{Replicas: &three, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}}}
	if err := cl.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "etcd-main-0", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	w := backups.DeploymentWriter{Client: cl, Reader: cl, Deployment: client.ObjectKeyFromObject(d),
		PausedAnnotation: "example.com/paused-replicas", LocationAnnotation: "example.com/location"}
	check := func(step string, replicas int32, paused, location string) {
		t.Helper()
		var got appsv1.Deployment
		if err := cl.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
			t.Fatal(err)
		}
		if *got.Spec.Replicas != replicas || got.Annotations[w.PausedAnnotation] != paused || got.Spec.Template.Annotations[w.LocationAnnotation] != location {
			t.Errorf("after %s: replicas %d, paused %q, location %q; want %d, %q, %q", step, *got.Spec.Replicas,
				got.Annotations[w.PausedAnnotation], got.Spec.Template.Annotations[w.LocationAnnotation], replicas, paused, location)
		}
	}
	if err := w.Pause(ctx); !errors.Is(err, backups.ErrWriterRunning) {
		t.Fatalf("Pause with a pod left: %v, want ErrWriterRunning", err)
	}
	check("Pause with a pod left", 0, "3", "")
	if err := cl.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := w.Pause(ctx); err != nil {
		t.Fatalf("Pause once the pods are gone: %v", err)
	}
	check("the second Pause", 0, "3", "")
	hooks := w.Hooks("shared-1/shoot--a/")
	for range 2 {
		if err := hooks.Switch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check("Switch", 0, "3", "shared-1/shoot--a/")
	for range 2 {
		if err := hooks.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		check("Resume", 3, "", "shared-1/shoot--a/")
	}
}
