package api_test

import (
	"errors"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

func TestRetentionPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec api.ReplicatedSetSpec
		want lifecycle.Name
		err  string
	}{
		{name: "neither field: Retain", want: lifecycle.Retain},
		{name: "shipped form, whenScaled only", spec: api.ReplicatedSetSpec{PersistentVolumeClaimRetentionPolicy: &api.RetentionPolicy{WhenScaled: "Delete"}},
			want: lifecycle.DeleteOnScaledownOnly},
		{name: "KEP name", spec: api.ReplicatedSetSpec{PersistentVolumeClaimDeletePolicy: "DeleteOnOwnerDeletionOnly"}, want: lifecycle.DeleteOnOwnerDeletionOnly},
		{name: "unknown whenDeleted", spec: api.ReplicatedSetSpec{PersistentVolumeClaimRetentionPolicy: &api.RetentionPolicy{WhenDeleted: "Orphan"}},
			err: `spec.persistentVolumeClaimRetentionPolicy: lifecycle: invalid policy: whenDeleted = "Orphan": must be "Retain" or "Delete"`},
		{name: "unknown name", spec: api.ReplicatedSetSpec{PersistentVolumeClaimDeletePolicy: "DeleteSometimes"},
			err: `spec.persistentVolumeClaimDeletePolicy: lifecycle: invalid policy: policy = "DeleteSometimes": must be one of "Retain", "DeleteOnOwnerDeletionOnly", "DeleteOnScaledownOnly", "DeleteOnScaledownAndOwnerDeletion" (or the KEP-1847 names with "StatefulSet")`},
		{name: "both fields", spec: api.ReplicatedSetSpec{PersistentVolumeClaimRetentionPolicy: &api.RetentionPolicy{}, PersistentVolumeClaimDeletePolicy: "Retain"},
			err: `lifecycle: invalid policy: spec.persistentVolumeClaimRetentionPolicy and spec.persistentVolumeClaimDeletePolicy = "Retain" are both set; set one`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.spec.RetentionPolicy()
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, lifecycle.ErrInvalidPolicy) {
					t.Fatalf("got %v, want %s (wrapping ErrInvalidPolicy)", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := p.Name(); n != tc.want {
				t.Errorf("got %s (%+v), want %s", n, p, tc.want)
			}
		})
	}
}
