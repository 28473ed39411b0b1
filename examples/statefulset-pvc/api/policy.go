package api

import (
	"fmt"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// DesiredReplicas is spec.replicas, 1 when unset (the CRD's default).
func (s *ReplicatedSetSpec) DesiredReplicas() int {
	if s.Replicas == nil {
		return 1
	}
	return int(*s.Replicas)
}

// RetentionPolicy returns the claim retention policy of the spec, from
// whichever of its two fields is set; neither is Retain. The CRD rejects bad
// values already; this check is for objects it did not validate, and its
// error names the field and the value.
func (s *ReplicatedSetSpec) RetentionPolicy() (lifecycle.Policy, error) {
	rp, name := s.PersistentVolumeClaimRetentionPolicy, s.PersistentVolumeClaimDeletePolicy
	switch {
	case rp != nil && name != "":
		return lifecycle.Policy{}, fmt.Errorf("%w: spec.persistentVolumeClaimRetentionPolicy and spec.persistentVolumeClaimDeletePolicy = %q are both set; set one",
			lifecycle.ErrInvalidPolicy, name)
	case name != "":
		p, err := lifecycle.Name(name).Policy()
		if err != nil {
			return lifecycle.Policy{}, fmt.Errorf("spec.persistentVolumeClaimDeletePolicy: %w", err)
		}
		return p, nil
	case rp != nil:
		p := lifecycle.Policy{WhenDeleted: lifecycle.Action(rp.WhenDeleted), WhenScaled: lifecycle.Action(rp.WhenScaled)}
		if err := p.Validate(); err != nil {
			return lifecycle.Policy{}, fmt.Errorf("spec.persistentVolumeClaimRetentionPolicy: %w", err)
		}
		return p.Normalize(), nil
	}
	return lifecycle.Policy{}.Normalize(), nil
}

// PodName is the name of the set's pod with ordinal i.
func PodName(set string, i int) string { return fmt.Sprintf("%s-%d", set, i) }
