package plugin

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

func TestFates(t *testing.T) {
	now := metav1.Now()
	claims := []corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "data-db-0"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "data-db-1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "data-db-2", DeletionTimestamp: &now}},
		{ObjectMeta: metav1.ObjectMeta{Name: "data-db-4"}},  // left by an earlier scale-down
		{ObjectMeta: metav1.ObjectMeta{Name: "data-dbx-1"}}, // another StatefulSet's
		{ObjectMeta: metav1.ObjectMeta{Name: "data-db-01"}}, // not an ordinal
		{ObjectMeta: metav1.ObjectMeta{Name: "other-db-1"}}, // another template's
	}
	for _, tc := range []struct {
		name    lifecycle.Name
		scaling bool
		want    map[string]string
	}{
		{lifecycle.Retain, true, map[string]string{"data-db-0": "kept", "data-db-1": "kept", "data-db-2": "deleted", "data-db-4": "kept"}},
		{lifecycle.DeleteOnScaledownOnly, true, map[string]string{"data-db-0": "kept", "data-db-1": "deleted", "data-db-2": "deleted", "data-db-4": "kept"}},
		{lifecycle.DeleteOnScaledownOnly, false, map[string]string{"data-db-0": "kept", "data-db-1": "kept", "data-db-2": "deleted", "data-db-4": "kept"}},
		{lifecycle.DeleteOnOwnerDeletionOnly, false, map[string]string{"data-db-0": "deleted", "data-db-1": "deleted", "data-db-2": "deleted", "data-db-4": "deleted"}},
	} {
		p, err := tc.name.Policy()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, f := range fates(templateOrdinals([]string{"data"}, "db", claims), "db", p, tc.scaling, 1, 3) {
			got[f.Claim] = f.Fate
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s (scaling %v): fates of %v, want of %v", tc.name, tc.scaling, got, tc.want)
		}
		for c, w := range tc.want {
			if got[c] != w {
				t.Errorf("%s (scaling %v to 1 of 3): %s %s, want %s", tc.name, tc.scaling, c, got[c], w)
			}
		}
	}
}

// setOrdinals finds a claim set's claims' ordinals by the pods that mount
// them, else by the pod that owns them; a claim neither mounted nor owned
// by a pod of the set has none, and a scale-down never condemns it.
func TestSetOrdinals(t *testing.T) {
	pod := func(name, claim string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
	}
	pods := []corev1.Pod{pod("db-0", "wal-a"), pod("db-1", "wal-b"), pod("dbx-2", "wal-c"), pod("db-01", "wal-d")}
	claims := []corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "wal-a"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "wal-b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "wal-c"}}, // mounted by another owner's pod
		{ObjectMeta: metav1.ObjectMeta{Name: "wal-d"}}, // mounted by a pod that is no ordinal of db
		{ObjectMeta: metav1.ObjectMeta{Name: "wal-e", OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "db-2"}}}}, // its pod is terminating, say
		{ObjectMeta: metav1.ObjectMeta{Name: "wal-f", OwnerReferences: []metav1.OwnerReference{{Kind: "ConfigMap", Name: "db-3"}}}},
	}
	got := map[string]int{}
	for _, oc := range setOrdinals("db", pods, claims) {
		got[oc.claim.Name] = oc.ordinal
	}
	want := map[string]int{"wal-a": 0, "wal-b": 1, "wal-c": -1, "wal-d": -1, "wal-e": 2, "wal-f": -1}
	for c, w := range want {
		if got[c] != w {
			t.Errorf("ordinal of %s: %d, want %d", c, got[c], w)
		}
	}
	p, err := lifecycle.DeleteOnScaledownOnly.Policy()
	if err != nil {
		t.Fatal(err)
	}
	fate := map[string]string{}
	for _, f := range fates(setOrdinals("db", pods, claims), "db", p, true, 0, 3) {
		fate[f.Claim] = f.Fate
	}
	for c, w := range map[string]string{"wal-a": "deleted", "wal-b": "deleted", "wal-c": "kept", "wal-d": "kept", "wal-e": "deleted", "wal-f": "kept"} {
		if fate[c] != w {
			t.Errorf("scale of db to 0 under DeleteOnScaledownOnly: %s %s, want %s", c, fate[c], w)
		}
	}
}
