package crt_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// The events lifecycle records on an owner about two of its claims stay
// two events on the API server through an events.k8s.io recorder, each
// naming its claim as the related object: without the related object the
// recorder folds them into one series with the first claim's message.
func TestEventsNameTheClaim(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: env.Client.EventsV1()})
	stop := make(chan struct{})
	broadcaster.StartRecordingToSink(stop)
	t.Cleanup(func() { close(stop); broadcaster.Shutdown() })

	m, err := lifecycle.New(lifecycle.Config{
		Client:   lifecycle.ClientGo(env.Client.CoreV1()),
		Recorder: crt.Events(broadcaster.NewRecorder(scheme.Scheme, "crt-test")),
	})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := env.Client.CoreV1().ConfigMaps(env.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := lifecycle.RefTo(owner, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	claims := []string{"data-db-0", "data-db-1"}
	for _, name := range claims {
		_, err := env.Client.CoreV1().PersistentVolumeClaims(env.Namespace).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o := lifecycle.Ownership{Owner: ref, Policy: lifecycle.Policy{WhenDeleted: lifecycle.ActionDelete, WhenScaled: lifecycle.ActionRetain}}
		if plan, err := m.SyncClaim(ctx, env.Namespace, o, name, nil, nil); err != nil || !plan.Changed {
			t.Fatalf("SyncClaim(%s) = %+v, %v; want the owner reference written", name, plan, err)
		}
	}

	deadline := time.Now().Add(2 * time.Minute)
	for {
		list, err := env.Client.EventsV1().Events(env.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var related []string
		for _, e := range list.Items {
			if e.Reason != lifecycle.ReasonClaimOwnersUpdated || e.Regarding.Name != "db" {
				continue
			}
			if e.Related == nil {
				related = append(related, "no related object: "+e.Note)
				continue
			}
			related = append(related, fmt.Sprintf("%s %s", e.Related.Kind, e.Related.Name))
		}
		sort.Strings(related)
		if len(related) == 2 && related[0] == "PersistentVolumeClaim data-db-0" && related[1] == "PersistentVolumeClaim data-db-1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events %s on ConfigMap db: %q, want one naming each of %v", lifecycle.ReasonClaimOwnersUpdated, related, claims)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
