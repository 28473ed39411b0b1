package lifecycle

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Ref identifies an object that may own a claim: the operator's own resource
// (any kind) or a pod.
type Ref struct {
	APIVersion string
	Kind       string
	Name       string
	UID        types.UID
}

// RefTo returns the Ref of obj. Typed objects read from a clientset carry no
// kind, so the caller names it with gvk.
func RefTo(obj metav1.Object, gvk schema.GroupVersionKind) Ref {
	return Ref{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: obj.GetName(), UID: obj.GetUID()}
}

// PodRef returns the Ref of a pod; nil gives the zero Ref (no pod).
func PodRef(pod *corev1.Pod) Ref {
	if pod == nil {
		return Ref{}
	}
	return Ref{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
}

func (r Ref) String() string { return fmt.Sprintf("%s %s", r.Kind, r.Name) }

// matches reports whether ref names the same object as r by API group, kind
// and name, whatever its UID. The version is not compared: an owner reference
// may be written with any served version of the owner's API.
func (r Ref) matches(ref *metav1.OwnerReference) bool {
	if r.Name == "" || ref.Name != r.Name || ref.Kind != r.Kind {
		return false
	}
	return groupOf(ref.APIVersion) == groupOf(r.APIVersion)
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return apiVersion
	}
	return gv.Group
}

// controllerRef is the reference this package adds: a controller reference
// that blocks the owner's foreground deletion, as the StatefulSet controller
// writes it.
func (r Ref) controllerRef() metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID, Controller: &yes, BlockOwnerDeletion: &yes}
}

// Ownership is what decides a claim's owner references.
type Ownership struct {
	// Policy is the retention policy in force. It must be valid.
	Policy Policy
	// Owner is the object that owns the pods and claims (a custom resource,
	// a StatefulSet). Its UID is required.
	Owner Ref
	// Pod is the pod that mounts the claim. The zero Ref means no pod
	// (yet): then no pod reference is added, and none is judged stale. A
	// Pod with a name and no UID is one about to be created: any reference
	// to a pod of that name is then stale (it belonged to an earlier pod).
	Pod Ref
	// Condemned reports that Pod is being removed by a scale-down.
	Condemned bool
}

func (o Ownership) validate() error {
	if err := o.Policy.Validate(); err != nil {
		return err
	}
	if o.Owner.Name == "" || o.Owner.Kind == "" || o.Owner.UID == "" {
		return fmt.Errorf("%w: Owner = %+v: name, kind and UID are required", ErrInvalidInput, o.Owner)
	}
	if o.Pod.Name != "" && o.Pod.UID == "" && o.Condemned {
		return fmt.Errorf("%w: Pod %s is condemned but has no UID", ErrInvalidInput, o.Pod.Name)
	}
	return nil
}

// wantOwner and wantPod say which controller references the policy asks for.
// They mirror the shipped StatefulSet controller: the owner holds the claim
// when whenDeleted is Delete, except that once the pod is condemned under
// whenScaled: Delete the pod takes over (and the owner reference goes, so that
// there is a single controller).
func (o Ownership) wantOwner() bool {
	return o.Policy.DeletesOnOwnerDeletion() && !(o.Condemned && o.Policy.DeletesOnScaledown())
}

func (o Ownership) wantPod() bool {
	return o.Condemned && o.Policy.DeletesOnScaledown() && o.Pod.Name != ""
}

// PlanStatus classifies a Plan.
type PlanStatus int

const (
	// PlanUpToDate: the claim's references are already as the policy wants.
	PlanUpToDate PlanStatus = iota
	// PlanUpdate: Plan.OwnerReferences must be written to the claim.
	PlanUpdate
	// PlanStale: the claim refers to an earlier owner or pod of the same name
	// (another UID). Nothing is changed: the garbage collector will delete
	// the claim if that earlier object is gone, and adding a reference now
	// would fight it. Plan.Found is the stale reference.
	PlanStale
	// PlanConflict: another controller controls the claim. Only our own
	// references are removed (Plan.Changed may also be true), nothing is added.
	// Plan.Found is the other controller's reference.
	PlanConflict
)

func (s PlanStatus) String() string {
	switch s {
	case PlanUpToDate:
		return "UpToDate"
	case PlanUpdate:
		return "Update"
	case PlanStale:
		return "Stale"
	case PlanConflict:
		return "Conflict"
	}
	return fmt.Sprintf("PlanStatus(%d)", int(s))
}

// Plan is the outcome of OwnerReferences.
type Plan struct {
	// OwnerReferences is the list the claim must have. It shares no memory
	// with the input.
	OwnerReferences []metav1.OwnerReference
	// Changed reports that OwnerReferences differs from the current list.
	Changed bool
	// Status classifies the decision.
	Status PlanStatus
	// Found is the stale or conflicting reference, for Stale and Conflict.
	Found *metav1.OwnerReference
}

// OwnerReferences returns the owner references a claim must have under o,
// given its current references. It is pure and behaves as the Kubernetes
// StatefulSet controller does for the claims of its pods, for an owner of any
// kind:
//
//   - Retain: no reference to the owner or the pod;
//   - whenDeleted: Delete: a controller reference to the owner, unless the pod
//     is condemned and whenScaled is Delete;
//   - whenScaled: Delete: a controller reference to the pod once it is
//     condemned;
//   - references we add have controller and blockOwnerDeletion set, and a
//     reference to our owner or pod without controller: true is upgraded
//     (replaced in place);
//   - a reference with the owner's or the pod's API group, kind and name but
//     another UID is stale: nothing changes (Status Stale);
//   - when the policy deletes on some event and another object's controller
//     reference is on the claim, our references are removed and nothing is
//     added (Status Conflict);
//   - every other reference is kept as it is, in order.
//
// It returns an error wrapping ErrInvalidPolicy or ErrInvalidInput when o is
// not valid.
func OwnerReferences(o Ownership, current []metav1.OwnerReference) (Plan, error) {
	if err := o.validate(); err != nil {
		return Plan{}, err
	}
	for i := range current {
		ref := &current[i]
		if (o.Owner.matches(ref) && ref.UID != o.Owner.UID) || (o.Pod.matches(ref) && ref.UID != o.Pod.UID) {
			found := *ref
			return Plan{OwnerReferences: slices.Clone(current), Status: PlanStale, Found: &found}, nil
		}
	}
	ours := func(ref *metav1.OwnerReference) bool { return o.Owner.matches(ref) || o.Pod.matches(ref) }

	policy := o.Policy.Normalize()
	if policy.DeletesOnOwnerDeletion() || policy.DeletesOnScaledown() {
		for i := range current {
			ref := &current[i]
			if !ours(ref) && ref.Controller != nil && *ref.Controller {
				found := *ref
				out := make([]metav1.OwnerReference, 0, len(current))
				for j := range current {
					if !ours(&current[j]) {
						out = append(out, current[j])
					}
				}
				return Plan{OwnerReferences: out, Changed: len(out) != len(current), Status: PlanConflict, Found: &found}, nil
			}
		}
	}

	out := make([]metav1.OwnerReference, 0, len(current)+1)
	wantOwner, wantPod := o.wantOwner(), o.wantPod()
	haveOwner, havePod := false, false
	for _, ref := range current {
		switch {
		case o.Owner.matches(&ref):
			if !wantOwner || haveOwner {
				continue
			}
			haveOwner = true
			if !isController(&ref) {
				ref = o.Owner.controllerRef()
			}
		case o.Pod.matches(&ref):
			if !wantPod || havePod {
				continue
			}
			havePod = true
			if !isController(&ref) {
				ref = o.Pod.controllerRef()
			}
		}
		out = append(out, ref)
	}
	if wantOwner && !haveOwner {
		out = append(out, o.Owner.controllerRef())
	}
	if wantPod && !havePod {
		out = append(out, o.Pod.controllerRef())
	}
	changed := !equalRefs(out, current)
	st := PlanUpToDate
	if changed {
		st = PlanUpdate
	}
	return Plan{OwnerReferences: out, Changed: changed, Status: st}, nil
}

func isController(ref *metav1.OwnerReference) bool { return ref.Controller != nil && *ref.Controller }

func equalRefs(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.OwnerReference) bool {
		return x.APIVersion == y.APIVersion && x.Kind == y.Kind && x.Name == y.Name && x.UID == y.UID &&
			boolEq(x.Controller, y.Controller) && boolEq(x.BlockOwnerDeletion, y.BlockOwnerDeletion)
	})
}

func boolEq(a, b *bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
