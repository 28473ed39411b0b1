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
		for _, f := range fates([]string{"data"}, "db", claims, p, tc.scaling, 1, 3) {
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
