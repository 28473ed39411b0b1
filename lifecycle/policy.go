package lifecycle

import (
	appsv1 "k8s.io/api/apps/v1"
)

// Action says what happens to a claim on one event (deletion of the owner, or
// scale-down of its pod). It is the value type of the whenDeleted and
// whenScaled fields that Kubernetes shipped.
type Action string

// The two actions. The empty Action means Retain, as an unset field does in a
// StatefulSet.
const (
	ActionRetain Action = "Retain"
	ActionDelete Action = "Delete"
)

// Name is one of KEP-1847's four named policies. The KEP's
// "StatefulSetDeletion" is "OwnerDeletion" here, because the owner may be of
// any kind; ParseName accepts both spellings.
type Name string

// The four named policies.
const (
	// Retain never deletes claims. It is the default.
	Retain Name = "Retain"
	// DeleteOnOwnerDeletionOnly deletes claims when their owner is deleted
	// (cascading), and keeps them on scale-down for reuse on scale-up. KEP
	// name: DeleteOnStatefulSetDeletionOnly.
	DeleteOnOwnerDeletionOnly Name = "DeleteOnOwnerDeletionOnly"
	// DeleteOnScaledownOnly deletes the claims of a pod removed by a
	// scale-down, and keeps all claims when the owner is deleted.
	DeleteOnScaledownOnly Name = "DeleteOnScaledownOnly"
	// DeleteOnScaledownAndOwnerDeletion combines the two. KEP name:
	// DeleteOnScaledownAndStatefulSetDeletion.
	DeleteOnScaledownAndOwnerDeletion Name = "DeleteOnScaledownAndOwnerDeletion"
)

// Policy is a claim retention policy in the form Kubernetes shipped
// (StatefulSet spec.persistentVolumeClaimRetentionPolicy). The zero Policy is
// Retain on both events.
type Policy struct {
	// WhenDeleted applies when the owner is deleted with cascading deletion.
	WhenDeleted Action `json:"whenDeleted,omitempty"`
	// WhenScaled applies to the claims of a pod that a scale-down removes
	// (a condemned pod).
	WhenScaled Action `json:"whenScaled,omitempty"`
}

// Validate rejects actions other than Retain, Delete and empty, with a
// *PolicyError that names the field and the value.
func (p Policy) Validate() error {
	if _, err := parseAction("whenDeleted", p.WhenDeleted); err != nil {
		return err
	}
	_, err := parseAction("whenScaled", p.WhenScaled)
	return err
}

func parseAction(field string, a Action) (bool, error) {
	switch a {
	case "", ActionRetain:
		return false, nil
	case ActionDelete:
		return true, nil
	}
	return false, &PolicyError{Field: field, Value: string(a)}
}

// DeletesOnOwnerDeletion reports whether claims go with their owner.
// It is false for an invalid policy: validate first.
func (p Policy) DeletesOnOwnerDeletion() bool { return p.WhenDeleted == ActionDelete }

// DeletesOnScaledown reports whether claims go with their condemned pod.
// It is false for an invalid policy: validate first.
func (p Policy) DeletesOnScaledown() bool { return p.WhenScaled == ActionDelete }

// Normalize spells empty actions as Retain.
func (p Policy) Normalize() Policy {
	if p.WhenDeleted == "" {
		p.WhenDeleted = ActionRetain
	}
	if p.WhenScaled == "" {
		p.WhenScaled = ActionRetain
	}
	return p
}

// Name returns the KEP-1847 name of a valid policy. Name and Name.Policy are
// inverse: every valid policy has exactly one name and back.
func (p Policy) Name() (Name, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	switch {
	case p.DeletesOnOwnerDeletion() && p.DeletesOnScaledown():
		return DeleteOnScaledownAndOwnerDeletion, nil
	case p.DeletesOnOwnerDeletion():
		return DeleteOnOwnerDeletionOnly, nil
	case p.DeletesOnScaledown():
		return DeleteOnScaledownOnly, nil
	}
	return Retain, nil
}

// Policy returns the whenDeleted/whenScaled form of a named policy, with both
// actions spelled out. The empty Name is Retain; an unknown name is rejected
// with a *PolicyError.
func (n Name) Policy() (Policy, error) {
	switch n {
	case "", Retain:
		return Policy{WhenDeleted: ActionRetain, WhenScaled: ActionRetain}, nil
	case DeleteOnOwnerDeletionOnly, "DeleteOnStatefulSetDeletionOnly":
		return Policy{WhenDeleted: ActionDelete, WhenScaled: ActionRetain}, nil
	case DeleteOnScaledownOnly:
		return Policy{WhenDeleted: ActionRetain, WhenScaled: ActionDelete}, nil
	case DeleteOnScaledownAndOwnerDeletion, "DeleteOnScaledownAndStatefulSetDeletion":
		return Policy{WhenDeleted: ActionDelete, WhenScaled: ActionDelete}, nil
	}
	return Policy{}, &PolicyError{Field: "policy", Value: string(n)}
}

// ParseName parses a policy name: ours, or KEP-1847's spelling with
// "StatefulSetDeletion". It returns the canonical Name (ours).
func ParseName(s string) (Name, error) {
	p, err := Name(s).Policy()
	if err != nil {
		return "", err
	}
	return p.Name()
}

// FromStatefulSet converts a StatefulSet's retention policy; nil is Retain.
// Unknown values are rejected with a *PolicyError.
func FromStatefulSet(sp *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy) (Policy, error) {
	if sp == nil {
		return Policy{}.Normalize(), nil
	}
	p := Policy{WhenDeleted: Action(sp.WhenDeleted), WhenScaled: Action(sp.WhenScaled)}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p.Normalize(), nil
}

// StatefulSet returns the policy as a StatefulSet field, both actions spelled
// out. It does not validate: call Validate first.
func (p Policy) StatefulSet() *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	p = p.Normalize()
	return &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenDeleted: appsv1.PersistentVolumeClaimRetentionPolicyType(p.WhenDeleted),
		WhenScaled:  appsv1.PersistentVolumeClaimRetentionPolicyType(p.WhenScaled),
	}
}
