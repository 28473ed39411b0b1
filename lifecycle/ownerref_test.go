package lifecycle

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	owner = Ref{APIVersion: "db.example.com/v1", Kind: "Cluster", Name: "db", UID: "owner-uid"}
	pod   = Ref{APIVersion: "v1", Kind: "Pod", Name: "db-1", UID: "pod-uid"}
	yes   = true
	no    = false
)

func ctl(r Ref) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID, Controller: &yes, BlockOwnerDeletion: &yes}
}

func plain(r Ref) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID}
}

func with(r Ref, f func(*Ref)) Ref { f(&r); return r }

func refs(rs ...metav1.OwnerReference) []metav1.OwnerReference { return rs }

func mustPolicy(n Name) Policy {
	p, err := n.Policy()
	if err != nil {
		panic(err)
	}
	return p
}

func TestOwnerReferences(t *testing.T) {
	other := Ref{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs-uid"}
	userRef := plain(Ref{APIVersion: "v1", Kind: "ConfigMap", Name: "note", UID: "cm-uid"})
	otherCtl := ctl(other)
	staleOwner := ctl(with(owner, func(r *Ref) { r.UID = "old-owner" }))
	stalePod := ctl(with(pod, func(r *Ref) { r.UID = "old-pod" }))
	stalePodPlain := plain(with(pod, func(r *Ref) { r.UID = "old-pod" }))
	ownerOtherVersion := ctl(with(owner, func(r *Ref) { r.APIVersion = "db.example.com/v1beta1" }))
	ownerNotController := plain(owner)
	ownerControllerNoBlock := metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: &yes}

	cases := []struct {
		desc      string
		policy    Name
		condemned bool
		noPod     bool
		current   []metav1.OwnerReference
		want      []metav1.OwnerReference
		status    PlanStatus
	}{
		// The four policies on a fresh claim.
		{desc: "retain, pod in range: no reference", policy: Retain, want: nil, status: PlanUpToDate},
		{desc: "retain, pod condemned: no reference", policy: Retain, condemned: true, want: nil, status: PlanUpToDate},
		{desc: "owner deletion only, pod in range: owner", policy: DeleteOnOwnerDeletionOnly, want: refs(ctl(owner)), status: PlanUpdate},
		{desc: "owner deletion only, pod condemned: owner stays, no pod", policy: DeleteOnOwnerDeletionOnly, condemned: true, current: refs(ctl(owner)), want: refs(ctl(owner)), status: PlanUpToDate},
		{desc: "scale-down only, pod in range: no reference", policy: DeleteOnScaledownOnly, want: nil, status: PlanUpToDate},
		{desc: "scale-down only, pod condemned: pod", policy: DeleteOnScaledownOnly, condemned: true, want: refs(ctl(pod)), status: PlanUpdate},
		{desc: "both, pod in range: owner", policy: DeleteOnScaledownAndOwnerDeletion, want: refs(ctl(owner)), status: PlanUpdate},
		{desc: "both, pod condemned: owner replaced by pod", policy: DeleteOnScaledownAndOwnerDeletion, condemned: true, current: refs(ctl(owner)), want: refs(ctl(pod)), status: PlanUpdate},
		{desc: "both, no pod yet: owner only", policy: DeleteOnScaledownAndOwnerDeletion, noPod: true, want: refs(ctl(owner)), status: PlanUpdate},

		// Policy mutation.
		{desc: "to retain: owner and pod references removed, user reference kept", policy: Retain, condemned: true, current: refs(userRef, ctl(owner), ctl(pod)), want: refs(userRef), status: PlanUpdate},
		{desc: "from retain to owner deletion: owner added after user reference", policy: DeleteOnOwnerDeletionOnly, current: refs(userRef), want: refs(userRef, ctl(owner)), status: PlanUpdate},
		{desc: "scale-down only on a claim the owner held: owner removed", policy: DeleteOnScaledownOnly, current: refs(ctl(owner)), want: nil, status: PlanUpdate},

		// Upgrade of our own references.
		{desc: "our owner reference without controller is upgraded in place", policy: DeleteOnOwnerDeletionOnly, current: refs(userRef, ownerNotController, plain(other)), want: refs(userRef, ctl(owner), plain(other)), status: PlanUpdate},
		{desc: "our pod reference with controller false is upgraded", policy: DeleteOnScaledownOnly, condemned: true,
			current: refs(metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &no}), want: refs(ctl(pod)), status: PlanUpdate},
		{desc: "controller reference without blockOwnerDeletion is left as it is", policy: DeleteOnOwnerDeletionOnly, current: refs(ownerControllerNoBlock), want: refs(ownerControllerNoBlock), status: PlanUpToDate},
		{desc: "owner referenced with another version of its API is ours", policy: DeleteOnOwnerDeletionOnly, current: refs(ownerOtherVersion), want: refs(ownerOtherVersion), status: PlanUpToDate},
		{desc: "duplicate references to the owner are reduced to one", policy: DeleteOnOwnerDeletionOnly, current: refs(ctl(owner), ctl(owner)), want: refs(ctl(owner)), status: PlanUpdate},

		// Stale references.
		{desc: "stale owner reference: nothing added", policy: DeleteOnOwnerDeletionOnly, current: refs(staleOwner), want: refs(staleOwner), status: PlanStale},
		{desc: "stale pod reference on condemned pod: nothing changed", policy: DeleteOnScaledownAndOwnerDeletion, condemned: true, current: refs(ctl(owner), stalePodPlain), want: refs(ctl(owner), stalePodPlain), status: PlanStale},
		{desc: "stale owner reference under retain: not removed either", policy: Retain, current: refs(staleOwner), want: refs(staleOwner), status: PlanStale},
		{desc: "pod not created yet: any reference to its name is stale", policy: DeleteOnScaledownOnly, noPod: false, current: refs(stalePod), want: refs(stalePod), status: PlanStale},

		// Conflicting controllers.
		{desc: "other controller: nothing added", policy: DeleteOnOwnerDeletionOnly, current: refs(otherCtl), want: refs(otherCtl), status: PlanConflict},
		{desc: "other controller: our references removed, others kept", policy: DeleteOnScaledownAndOwnerDeletion, condemned: true, current: refs(userRef, ctl(owner), otherCtl, ctl(pod)), want: refs(userRef, otherCtl), status: PlanConflict},
		{desc: "other controller under retain: not a conflict", policy: Retain, current: refs(otherCtl), want: refs(otherCtl), status: PlanUpToDate},
		{desc: "other owner without controller: kept, not a conflict", policy: DeleteOnOwnerDeletionOnly, current: refs(plain(other)), want: refs(plain(other), ctl(owner)), status: PlanUpdate},
		{desc: "controller reference to another pod of ours is a conflict", policy: DeleteOnScaledownOnly, condemned: true,
			current: refs(ctl(with(pod, func(r *Ref) { r.Name, r.UID = "db-0", "pod0" }))), want: refs(ctl(with(pod, func(r *Ref) { r.Name, r.UID = "db-0", "pod0" }))), status: PlanConflict},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			o := Ownership{Policy: mustPolicy(c.policy), Owner: owner, Pod: pod, Condemned: c.condemned}
			if c.noPod {
				o.Pod = Ref{}
			}
			if c.desc == "pod not created yet: any reference to its name is stale" {
				o.Pod.UID = ""
			}
			before := append([]metav1.OwnerReference(nil), c.current...)
			plan, err := OwnerReferences(o, c.current)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, plan.OwnerReferences, cmp.Comparer(func(a, b []metav1.OwnerReference) bool {
				return len(a) == 0 && len(b) == 0 || equalRefs(a, b)
			})); diff != "" {
				t.Errorf("references (-want +got):\n%s", diff)
			}
			if plan.Status != c.status {
				t.Errorf("status = %s, want %s", plan.Status, c.status)
			}
			if plan.Changed != !(len(c.want) == 0 && len(c.current) == 0 || equalRefs(c.want, c.current)) {
				t.Errorf("Changed = %v", plan.Changed)
			}
			if (c.status == PlanStale || c.status == PlanConflict) != (plan.Found != nil) {
				t.Errorf("Found = %v for status %s", plan.Found, plan.Status)
			}
			if !equalRefs(before, c.current) {
				t.Errorf("input modified")
			}
			// Applying the plan again is a fixed point.
			again, err := OwnerReferences(o, plan.OwnerReferences)
			if err != nil || again.Changed {
				t.Errorf("second pass changed %v again to %v (%v)", plan.OwnerReferences, again.OwnerReferences, err)
			}
			// At most one controller reference, as the API server requires.
			n := 0
			for _, r := range plan.OwnerReferences {
				if isController(&r) {
					n++
				}
			}
			if n > 1 {
				t.Errorf("%d controller references", n)
			}
		})
	}
}

func TestOwnerReferencesRejectsBadInput(t *testing.T) {
	for desc, o := range map[string]Ownership{
		"owner without UID":     {Owner: with(owner, func(r *Ref) { r.UID = "" })},
		"owner without kind":    {Owner: with(owner, func(r *Ref) { r.Kind = "" })},
		"condemned pod, no UID": {Owner: owner, Pod: with(pod, func(r *Ref) { r.UID = "" }), Condemned: true},
		"unknown policy":        {Owner: owner, Policy: Policy{WhenScaled: "Later"}},
	} {
		_, err := OwnerReferences(o, nil)
		if !errors.Is(err, ErrInvalidInput) && !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: err = %v", desc, err)
		}
	}
}
