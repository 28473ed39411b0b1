package lifecycle

import (
	"fmt"
	"strings"
	"time"

	"github.com/groundskeeper-io/groundskeeper/retention"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultAnnotationPrefix is the prefix of the unmount tracking annotations
// when Annotations.Prefix is empty.
const DefaultAnnotationPrefix = "groundskeeper.io/"

// AerospikeAnnotationPrefix is the prefix aerospike-operator uses, for
// operators that must keep reading and writing its annotations.
const AerospikeAnnotationPrefix = "aerospike.travelaudience.com/"

// The annotation names after the prefix, as in aerospike-operator's garbage
// collection design.
const (
	// TTLSuffix: how long the claim may stay unmounted, in
	// retention.ParseDuration syntax ("30d", "12h").
	TTLSuffix = "pvc-ttl"
	// PodNameSuffix: the pod the claim belongs to.
	PodNameSuffix = "pod-name"
	// LastUnmountedSuffix: the RFC 3339 instant the claim was last unmounted
	// (its pod deleted). Absent while the claim is mounted.
	LastUnmountedSuffix = "last-unmounted-on"
)

// Annotations names the unmount tracking annotations, and says whether the
// claims' Unused condition stands in for last-unmounted-on. The zero value
// uses DefaultAnnotationPrefix and the annotations alone.
type Annotations struct {
	// Prefix is prepended to the annotation names; it normally ends with
	// "/". Empty means DefaultAnnotationPrefix.
	Prefix string
	// UnusedCondition takes "unmounted since" from the claim's Unused
	// condition (Kubernetes 1.37, KEP-5541, feature gate
	// PersistentVolumeClaimUnusedSinceTime) where the claim has one, instead
	// of the last-unmounted-on annotation: kube-controller-manager's
	// pvc-protection controller keeps it on Bound claims, True since the
	// last pod that named the claim went (its lastTransitionTime), False
	// while a pod does. So no annotation is written (MarkUnmounted writes
	// none on such a claim) and no pod-delete event can be missed.
	//
	// It applies only to claims this package tracks (carrying the pod-name,
	// pvc-ttl or last-unmounted-on annotation), so that opting in never
	// makes a claim collectable that was not before. A claim without the
	// condition (an older cluster, the gate off, a claim not Bound) is
	// tracked by the annotations as without this option; a condition of
	// status Unknown is ignored the same way. A claim no pod has mounted yet
	// is Unused from the moment it is bound: its TTL runs from then, which
	// is the condition's meaning (no pod uses the claim) and lets a claim
	// whose pod was never created expire, which the annotations never do.
	// Choose a TTL longer than a pod takes to appear after its claim binds.
	UnusedCondition bool
}

// unusedCondition is the type of the claim condition of KEP-5541
// (corev1.PersistentVolumeClaimUnused from k8s.io/api v0.37), spelled out
// because this package builds against older k8s.io/api too.
const unusedCondition corev1.PersistentVolumeClaimConditionType = "Unused"

// unusedSince returns the claim's Unused condition when a applies it (see
// UnusedCondition): ok is false when the annotations decide.
func (a Annotations) unusedSince(claim *corev1.PersistentVolumeClaim) (since time.Time, unused, ok bool) {
	if !a.UnusedCondition {
		return time.Time{}, false, false
	}
	ann := claim.Annotations
	if _, p := ann[a.PodNameKey()]; !p {
		if _, t := ann[a.TTLKey()]; !t {
			if _, l := ann[a.LastUnmountedKey()]; !l {
				return time.Time{}, false, false
			}
		}
	}
	for _, c := range claim.Status.Conditions {
		if c.Type != unusedCondition {
			continue
		}
		switch c.Status {
		case corev1.ConditionTrue:
			return c.LastTransitionTime.UTC(), true, true
		case corev1.ConditionFalse:
			return time.Time{}, false, true
		}
	}
	return time.Time{}, false, false
}

func (a Annotations) prefix() string {
	if a.Prefix == "" {
		return DefaultAnnotationPrefix
	}
	return a.Prefix
}

// TTLKey returns the key of the time-to-live annotation.
func (a Annotations) TTLKey() string { return a.prefix() + TTLSuffix }

// PodNameKey returns the key of the pod name annotation.
func (a Annotations) PodNameKey() string { return a.prefix() + PodNameSuffix }

// LastUnmountedKey returns the key of the last-unmounted-on annotation.
func (a Annotations) LastUnmountedKey() string { return a.prefix() + LastUnmountedSuffix }

// Track returns the annotations to set on a new claim: the pod it belongs to
// and, when ttl > 0, its time-to-live once unmounted. Merge them into the
// claim's annotations before creating it.
func (a Annotations) Track(podName string, ttl time.Duration) map[string]string {
	m := map[string]string{a.PodNameKey(): podName}
	if ttl > 0 {
		m[a.TTLKey()] = retention.Format(ttl)
	}
	return m
}

// Unmount describes a claim's unmount tracking state.
type Unmount struct {
	// Pod is the pod-name annotation ("" when absent).
	Pod string
	// Since is the last-unmounted-on instant, or with
	// Annotations.UnusedCondition the Unused condition's; zero when the
	// claim is mounted (or was never tracked).
	Since time.Time
	// FromCondition reports that Since (zero or not) comes from the claim's
	// Unused condition, not the annotation.
	FromCondition bool
	// TTL is the claim's own pvc-ttl; zero when absent.
	TTL time.Duration
	// HasTTL reports that the pvc-ttl annotation is present.
	HasTTL bool
}

// Read returns the claim's unmount tracking state. A value that does not
// parse is an error wrapping ErrInvalidInput that names the claim, the key
// and the value; such a claim is never treated as expired. With
// UnusedCondition, the claim's Unused condition gives Since where it
// applies (see UnusedCondition), and last-unmounted-on is then not read.
func (a Annotations) Read(claim *corev1.PersistentVolumeClaim) (Unmount, error) {
	var u Unmount
	ann := claim.Annotations
	u.Pod = ann[a.PodNameKey()]
	if since, _, ok := a.unusedSince(claim); ok {
		u.Since, u.FromCondition = since, true
	} else if s, ok := ann[a.LastUnmountedKey()]; ok {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return Unmount{}, fmt.Errorf("%w: claim %s/%s: annotation %s = %q: not an RFC 3339 time", ErrInvalidInput, claim.Namespace, claim.Name, a.LastUnmountedKey(), s)
		}
		u.Since = t
	}
	if s, ok := ann[a.TTLKey()]; ok {
		d, err := retention.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return Unmount{}, fmt.Errorf("%w: claim %s/%s: annotation %s: %w", ErrInvalidInput, claim.Namespace, claim.Name, a.TTLKey(), err)
		}
		u.TTL, u.HasTTL = d, true
	}
	return u, nil
}

// Expiry returns when an unmounted claim expires: Since + TTL, where TTL is
// the claim's own annotation or else def. It returns the zero Time when the
// claim is mounted, or when no TTL applies (def <= 0 and no annotation): such
// a claim never expires. A TTL of zero expires at once.
func (u Unmount) Expiry(def time.Duration) time.Time {
	if u.Since.IsZero() {
		return time.Time{}
	}
	ttl := def
	if u.HasTTL {
		ttl = u.TTL
	} else if def <= 0 {
		return time.Time{}
	}
	return u.Since.Add(ttl)
}

// MarkUnmounted returns the annotation changes that record that the claim's
// pod was deleted at now: last-unmounted-on = now (RFC 3339, UTC, seconds),
// and pod-name when it is missing. A claim already marked keeps its earlier
// instant, so that deleting a pod twice does not extend the claim's life; nil
// means nothing to change. Values are *string: nil removes a key.
func (a Annotations) MarkUnmounted(claim *corev1.PersistentVolumeClaim, podName string, now time.Time) map[string]*string {
	changes := map[string]*string{}
	if _, ok := claim.Annotations[a.LastUnmountedKey()]; !ok {
		s := now.UTC().Truncate(time.Second).Format(time.RFC3339)
		changes[a.LastUnmountedKey()] = &s
	}
	if podName != "" && claim.Annotations[a.PodNameKey()] != podName {
		p := podName
		changes[a.PodNameKey()] = &p
	}
	if len(changes) == 0 {
		return nil
	}
	return changes
}

// MarkMounted returns the annotation changes that record that podName mounts
// the claim again: last-unmounted-on is removed and pod-name set. Nil means
// nothing to change. It does not check expiry: use Reuse first.
func (a Annotations) MarkMounted(claim *corev1.PersistentVolumeClaim, podName string) map[string]*string {
	changes := map[string]*string{}
	if _, ok := claim.Annotations[a.LastUnmountedKey()]; ok {
		changes[a.LastUnmountedKey()] = nil
	}
	if podName != "" && claim.Annotations[a.PodNameKey()] != podName {
		p := podName
		changes[a.PodNameKey()] = &p
	}
	if len(changes) == 0 {
		return nil
	}
	return changes
}

// clearUnmounted returns the change that removes last-unmounted-on, or nil
// when the claim carries none. pod-name is left as it is.
func (a Annotations) clearUnmounted(claim *corev1.PersistentVolumeClaim) map[string]*string {
	if _, ok := claim.Annotations[a.LastUnmountedKey()]; !ok {
		return nil
	}
	return map[string]*string{a.LastUnmountedKey(): nil}
}

// Verdict is the answer of Reuse.
type Verdict int

const (
	// VerdictReuse: the claim may be mounted by the new pod.
	VerdictReuse Verdict = iota
	// VerdictCreate: the claim does not exist; create it.
	VerdictCreate
	// VerdictWait: do not create the pod now; requeue. The claim is being
	// deleted, still belongs to an earlier pod or owner, belongs to another
	// owner (Manager.CheckReuse with a selector), or had expired while a pod
	// mounts it (Manager.CheckReuse then removed the stale mark).
	VerdictWait
	// VerdictDeleteFirst: the claim has expired; delete it (with preconditions),
	// then wait for it to be gone and create a fresh one. Never reuse it.
	VerdictDeleteFirst
)

func (v Verdict) String() string {
	switch v {
	case VerdictReuse:
		return "Reuse"
	case VerdictCreate:
		return "Create"
	case VerdictWait:
		return "Wait"
	case VerdictDeleteFirst:
		return "DeleteFirst"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// ReuseDecision says whether a pod about to be created may mount a claim.
type ReuseDecision struct {
	Verdict Verdict
	// Reason explains a VerdictWait or VerdictDeleteFirst, for logs and events.
	Reason string
	// Expiry is the claim's expiry, when it is unmounted and has a TTL.
	Expiry time.Time
	// UID is the UID of the claim decided on (Manager.CheckReuse; empty
	// for VerdictCreate and from Annotations.Reuse).
	UID types.UID
}

// Reuse decides, before an operator creates pod podName (not yet created:
// podUID is empty, or the UID it will mount the claim as), whether the claim
// it would mount may be reused. claim nil means the claim does not exist. It
// never answers VerdictReuse for:
//
//   - a claim being deleted (deletionTimestamp set): Wait;
//   - a claim that refers to a pod named podName with another UID: an earlier
//     pod was condemned and the garbage collector will delete the claim: Wait
//     (this is the StatefulSet controller's scale-up check);
//   - a claim whose unmounted time plus TTL (its own annotation, else
//     defaultTTL when > 0) is not after now: VerdictDeleteFirst.
//
// Annotations that do not parse give an error, and no verdict.
func (a Annotations) Reuse(claim *corev1.PersistentVolumeClaim, podName string, podUID types.UID, defaultTTL time.Duration, now time.Time) (ReuseDecision, error) {
	if claim == nil {
		return ReuseDecision{Verdict: VerdictCreate}, nil
	}
	if claim.DeletionTimestamp != nil {
		return ReuseDecision{Verdict: VerdictWait, Reason: fmt.Sprintf("claim %s is being deleted", claim.Name)}, nil
	}
	pod := Ref{APIVersion: "v1", Kind: "Pod", Name: podName, UID: podUID}
	for i := range claim.OwnerReferences {
		ref := &claim.OwnerReferences[i]
		if pod.matches(ref) && ref.UID != podUID {
			return ReuseDecision{Verdict: VerdictWait, Reason: fmt.Sprintf("claim %s still belongs to an earlier pod %s (uid %s)", claim.Name, podName, ref.UID)}, nil
		}
	}
	u, err := a.Read(claim)
	if err != nil {
		return ReuseDecision{}, err
	}
	exp := u.Expiry(defaultTTL)
	if !exp.IsZero() && !now.Before(exp) {
		return ReuseDecision{Verdict: VerdictDeleteFirst, Expiry: exp, Reason: fmt.Sprintf("claim %s expired at %s (unmounted since %s)",
			claim.Name, exp.UTC().Format(time.RFC3339), u.Since.UTC().Format(time.RFC3339))}, nil
	}
	return ReuseDecision{Verdict: VerdictReuse, Expiry: exp}, nil
}
