package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/internal/event"
)

// Event reasons of SyncSet, recorded on the owner with the pod or claim
// concerned as the related object.
const (
	ReasonCreated         = "SuccessfulCreate"
	ReasonDeleted         = "SuccessfulDelete"
	ReasonClaimReused     = "ClaimReused"
	ReasonWaitingForClaim = "WaitingForClaim"
	ReasonDryRun          = "DryRun"
)

// CondemnedSuffix names, after the annotation prefix, the annotation that
// SyncSet writes on a pod before it deletes it on scale-down: the
// resourceVersion of the owner read that condemned it.
const CondemnedSuffix = "condemned-by-owner-version"

// Owner is the state of a claim set's owner that a decision rests on.
type Owner struct {
	// Ref is the owner; its UID is required.
	Ref Ref
	// Replicas is the number of pods it asks for (ordinals 0 to Replicas-1).
	Replicas int
	// Policy is its claim retention policy. It must be valid.
	Policy Policy
	// Version is the resourceVersion of the read: SyncSet records the one of
	// its fresh read on a pod it condemns.
	Version string
	// Deleting reports that the owner's deletion was requested.
	Deleting bool
}

// ClaimSet is an owner that makes its own pods, numbered as a StatefulSet's
// (pod <owner>-<ordinal>), each with claims of its own, and what SyncSet
// needs to bring them to the owner's spec. The owner may be of any kind.
type ClaimSet struct {
	// Namespace of the owner, its pods and its claims.
	Namespace string
	// Owner as read for this reconcile (from a cache, say).
	Owner Owner
	// Reread reads the owner again from the API server, never a cache,
	// before a pod is deleted on scale-down, all of it (Policy included: a
	// scale-down whose fresh policy differs from Owner.Policy gives up);
	// nil Owner and nil error mean the owner is gone. Required.
	Reread func(ctx context.Context) (*Owner, error)
	// Label is the key of a label whose value is the owner's name: SyncSet
	// puts it on the pods and claims it creates, lists pods by it, and a
	// claim labelled with another owner is never reused (two owners can name
	// the same claim: template data-db of set x and template data of set db-x
	// both give data-db-x-0). Required.
	Label string
	// Pod returns pod ordinal's spec and labels. SyncSet sets its name
	// (<owner>-<ordinal>), namespace, Label and a controller reference to the
	// owner. It must mount the claims Claims names. Required.
	Pod func(ordinal int) (*corev1.Pod, error)
	// Claims returns the claims of pod ordinal (name and spec; labels and
	// annotations kept). SyncSet sets their namespace, Label, the unmount
	// tracking annotations and the owner references the policy asks for.
	// The names must depend on the ordinal only, never on the spec of the
	// moment: a claim is found again by its name. Nil: pods have no claims.
	Claims func(ordinal int) ([]*corev1.PersistentVolumeClaim, error)
	// PodCache and ClaimCache, when set, are read instead of listing from
	// the API server (crt/claims.PodCache, crt/claims.Cache; InformerPods,
	// InformerClaims). Every write that follows carries a precondition.
	PodCache   PodLister
	ClaimCache ClaimLister
	// TTL, when positive, is written on new claims as their pvc-ttl
	// (Annotations.Track): how long they may stay unmounted (see Collect).
	TTL time.Duration
	// CondemnedAnnotation is the key of the annotation that records, on a pod
	// condemned by a scale-down, the owner's resourceVersion it was decided
	// on. Empty: the Manager's annotation prefix + CondemnedSuffix.
	CondemnedAnnotation string
}

// SetOptions are the per-call settings of SyncSet; nil means the defaults.
type SetOptions struct {
	// DryRun decides on the same reads and changes nothing: no claim or pod
	// is created, patched or deleted. The actions not taken have DryRun set,
	// and events with reason DryRun say what would be done.
	DryRun bool
	// CreateMissing, with DryRun, still creates the missing claims (without
	// owner references) and pods, so that a dry run shows the destructive
	// steps (owner references, scale-down, expired claims) of a set that
	// runs.
	CreateMissing bool
}

// Verb is what a SetAction does.
type Verb string

// The verbs of SyncSet's actions.
const (
	VerbCreate             Verb = "Create"
	VerbDelete             Verb = "Delete"
	VerbReuse              Verb = "Reuse"
	VerbWait               Verb = "Wait"
	VerbSetOwnerReferences Verb = "SetOwnerReferences"
)

// SetAction is one thing SyncSet did, or in a dry run would do.
type SetAction struct {
	Verb Verb
	// Kind is Pod or PersistentVolumeClaim; Name and UID (when known) the
	// object.
	Kind string
	Name string
	UID  types.UID
	// Ordinal is the pod slot the action is about.
	Ordinal int
	// DryRun reports that the action was not taken.
	DryRun bool
	// Message says what and why, as in the event.
	Message string
}

// SetResult is the outcome of SyncSet.
type SetResult struct {
	// Actions are what was done (or, with DryRun, would be done), in order.
	Actions []SetAction
	// Ready is the number of pods in range that exist and are not being
	// deleted, those created in this call included (in a dry run that
	// creates nothing, those it would create): the owner's status.
	Ready int
	// Waiting says, per pod that could not be created, why (a claim being
	// deleted, or still belonging to an earlier pod or another owner).
	Waiting []string
	// Conflicts are claims controlled by another object: the policy does not
	// apply to them (see SyncOwner).
	Conflicts []string
	// Stale are claims that refer to an earlier owner or pod of the same
	// name: left to the garbage collector.
	Stale []string
	// Condemned are the ordinals at or above Replicas whose pods still
	// exist, highest first; at most the first was deleted in this call.
	Condemned []int
	// RequeueAfter is when to look again although no watch may wake the
	// owner: set while pods wait for claims or a condemned pod terminates.
	RequeueAfter time.Duration
	// Policy is the KEP-1847 name of the owner's policy.
	Policy Name
}

// Reasons of SetResult.Condition besides the event reasons.
const (
	ReasonReconciled          = "Reconciled"
	ReasonStaleOwnerReference = "StaleOwnerReference"
)

// Condition summarizes a SyncSet call as a status condition of the owner,
// of type conditionType, given the call's error: False with
// ReasonClaimOwnersFailed and the error; else False with
// ReasonConflictingController, ReasonStaleOwnerReference or
// ReasonWaitingForClaim (the first that applies), naming the claims or why
// pods wait; else True with ReasonReconciled. The caller sets
// ObservedGeneration; meta.SetStatusCondition sets the transition time.
func (r SetResult) Condition(conditionType string, err error) metav1.Condition {
	c := metav1.Condition{Type: conditionType, Status: metav1.ConditionFalse}
	switch {
	case err != nil:
		c.Reason, c.Message = ReasonClaimOwnersFailed, err.Error()
	case len(r.Conflicts) > 0:
		c.Reason, c.Message = ReasonConflictingController,
			fmt.Sprintf("claims %s are controlled by another object; the policy does not apply to them", strings.Join(r.Conflicts, ", "))
	case len(r.Stale) > 0:
		c.Reason, c.Message = ReasonStaleOwnerReference,
			fmt.Sprintf("claims %s refer to an earlier owner or pod of the same name; left to the garbage collector", strings.Join(r.Stale, ", "))
	case len(r.Waiting) > 0:
		c.Reason, c.Message = ReasonWaitingForClaim, strings.Join(r.Waiting, "; ")
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonReconciled, fmt.Sprintf("claims follow policy %s", r.Policy)
	}
	return c
}

// setRequeue is SetResult.RequeueAfter while something is awaited: the
// claim or pod watches normally wake the owner first.
const setRequeue = 10 * time.Second

// SyncSet is one reconcile of a claim set: it brings the owner's pods and
// claims to its spec under KEP-1847's policy, and is meant to be the only
// call about them in the reconcile. In order:
//
//  1. an owner being deleted: nothing (the garbage collector removes the
//     pods and, by their owner references, the claims the policy deletes);
//  2. for each ordinal in range without a pod: CheckReuse on each of its
//     claims (reuse, create, or wait: a claim being deleted, one that
//     belongs to an earlier pod or owner of the same name, or labelled with
//     another owner; an expired one is deleted first), the missing claims
//     created with the owner references the policy asks for
//     (OwnerReferences), then the pod: claims before pods, as the
//     StatefulSet controller does;
//  3. SyncOwner over every pod in range and every condemned pod (ordinal at
//     or above Replicas), so that a condemned pod's claims carry their
//     references while it still exists;
//  4. scale-down, one pod at a time, highest ordinal first, only when no
//     condemned pod is terminating and every claim's references were
//     written: the owner is read again from the API server (Reread), and
//     the pod is deleted only if that read still condemns it (same UID, not
//     being deleted, ordinal at or above its Replicas) and has the policy
//     the claims' owner references were just written from (Owner.Policy,
//     both spelled out): a policy changed since gives up, and the next call
//     writes the references from the newer one and decides again. The
//     version of that read is recorded on the pod (CondemnedAnnotation, a
//     patch guarded by the pod's UID), then the pod is deleted with its UID
//     as precondition.
//
// It never deletes a claim, except an expired one through CheckReuse: the
// garbage collector does, by the owner references. The error joins the
// failures of SyncOwner (the result holds what was done); conflicting
// controllers and stale references are in the result, not the error.
//
// Not guaranteed: a scale-up or policy change written after the fresh read
// and before the delete does not stop it (no precondition spans the owner and the pod);
// the window is one read and two writes long, and the annotation says which
// state of the owner the deletion was decided on. The next call creates the
// pod again. Not done: rolling updates (existing pods are not compared with
// Pod), readiness ordering (all missing pods are created at once), and claims
// of a template added after the pods exist.
func (m *Manager) SyncSet(ctx context.Context, set ClaimSet, opts *SetOptions) (SetResult, error) {
	if opts == nil {
		opts = &SetOptions{}
	}
	if err := set.validate(); err != nil {
		return SetResult{}, err
	}
	s := &setRun{m: m, set: set, opts: *opts, owner: set.Owner.Ref, ordinals: map[string]int{}}
	s.res.Policy, _ = set.Owner.Policy.Name()
	if set.Owner.Deleting {
		return s.res, nil
	}
	if s.set.CondemnedAnnotation == "" {
		s.set.CondemnedAnnotation = m.ann.prefix() + CondemnedSuffix
	}
	return s.run(ctx)
}

func (s ClaimSet) validate() error {
	bad := func(field, value string) error {
		return fmt.Errorf("%w: ClaimSet.%s = %s", ErrInvalidInput, field, value)
	}
	switch {
	case s.Namespace == "":
		return bad("Namespace", `""`)
	case s.Owner.Ref.Name == "" || s.Owner.Ref.UID == "" || s.Owner.Ref.Kind == "" || s.Owner.Ref.APIVersion == "":
		return bad("Owner.Ref", fmt.Sprintf("%+v: apiVersion, kind, name and UID are required", s.Owner.Ref))
	case s.Owner.Replicas < 0:
		return bad("Owner.Replicas", strconv.Itoa(s.Owner.Replicas))
	case s.Label == "":
		return bad("Label", `""`)
	case s.Pod == nil:
		return bad("Pod", "nil")
	case s.Reread == nil:
		return bad("Reread", "nil")
	}
	if err := s.Owner.Policy.Validate(); err != nil {
		return fmt.Errorf("ClaimSet.Owner.Policy: %w", err)
	}
	return nil
}

// setRun is the state of one SyncSet call.
type setRun struct {
	m     *Manager
	set   ClaimSet
	opts  SetOptions
	owner Ref
	res   SetResult
	// ordinals maps the claims of the members to their pod's ordinal.
	ordinals map[string]int
}

// podName is the name of pod ordinal i.
func (s *setRun) podName(i int) string { return s.owner.Name + "-" + strconv.Itoa(i) }

// ordinal parses <owner>-<ordinal>.
func (s *setRun) ordinal(pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, s.owner.Name+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

func (s *setRun) run(ctx context.Context) (SetResult, error) {
	ns, policy, replicas := s.set.Namespace, s.set.Owner.Policy.Normalize(), s.set.Owner.Replicas
	pods, err := s.m.listPods(ctx, Scope{Namespace: ns, PodSelector: labels.SelectorFromSet(labels.Set{s.set.Label: s.owner.Name}), Pods: s.set.PodCache}, false)
	if err != nil {
		return s.res, err
	}
	byOrdinal := map[int]*corev1.Pod{}
	for _, pod := range pods {
		ctl := metav1.GetControllerOf(pod)
		if n, ok := s.ordinal(pod.Name); ok && ctl != nil && ctl.UID == s.owner.UID {
			byOrdinal[n] = pod
		}
	}

	var members []Member
	for i := range replicas {
		pod := byOrdinal[i]
		claims, err := s.claims(i)
		if err != nil {
			return s.res, err
		}
		if pod == nil {
			ready, err := s.ensureClaims(ctx, i, claims)
			if err != nil {
				return s.res, err
			}
			if !ready {
				continue
			}
			if pod, err = s.createPod(ctx, i); err != nil {
				return s.res, err
			}
			if pod == nil { // dry run
				s.res.Ready++
				continue
			}
		}
		if pod.DeletionTimestamp == nil {
			s.res.Ready++
			members = append(members, Member{Pod: PodRef(pod), Claims: s.names(claims, i)})
		}
	}
	terminating := false
	for _, i := range slices.Backward(slices.Sorted(maps.Keys(byOrdinal))) {
		pod := byOrdinal[i]
		if i < replicas {
			break
		}
		if pod.DeletionTimestamp != nil {
			terminating = true
			continue
		}
		claims, err := s.claims(i)
		if err != nil {
			return s.res, err
		}
		s.res.Condemned = append(s.res.Condemned, i)
		members = append(members, Member{Pod: PodRef(pod), Condemned: true, Claims: s.names(claims, i)})
	}

	failed := s.syncOwner(ctx, policy, members)
	if len(s.res.Condemned) > 0 && !terminating && failed == nil {
		i := s.res.Condemned[0]
		if err := s.scaleDown(ctx, i, byOrdinal[i], policy); err != nil {
			return s.res, err
		}
	}
	if len(s.res.Waiting) > 0 || terminating || len(s.res.Condemned) > 0 {
		s.res.RequeueAfter = setRequeue
	}
	if failed != nil {
		return s.res, fmt.Errorf("lifecycle: claim owner references of %s not updated: %w", s.owner, failed)
	}
	return s.res, nil
}

// claims returns the claims of pod i, named and in the set's namespace.
func (s *setRun) claims(i int) ([]*corev1.PersistentVolumeClaim, error) {
	if s.set.Claims == nil {
		return nil, nil
	}
	claims, err := s.set.Claims(i)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: claims of pod %s: %w", s.podName(i), err)
	}
	for j, c := range claims {
		if c == nil || c.Name == "" {
			return nil, fmt.Errorf("%w: ClaimSet.Claims(%d)[%d]: a claim without a name", ErrInvalidInput, i, j)
		}
	}
	return claims, nil
}

// names returns the names of the claims of pod i, and remembers their
// ordinal for the actions about them.
func (s *setRun) names(claims []*corev1.PersistentVolumeClaim, i int) []string {
	out := make([]string, len(claims))
	for j, c := range claims {
		out[j] = c.Name
		s.ordinals[c.Name] = i
	}
	return out
}

// record appends an action to the result and records it as an event on
// the owner, with the pod or claim as the related object.
func (s *setRun) record(a SetAction, eventtype, reason string) {
	a.DryRun = s.opts.DryRun && reason == ReasonDryRun
	s.res.Actions = append(s.res.Actions, a)
	if s.m.recorder == nil {
		return
	}
	ns := s.set.Namespace
	regarding := &corev1.ObjectReference{APIVersion: s.owner.APIVersion, Kind: s.owner.Kind, Name: s.owner.Name, Namespace: ns, UID: s.owner.UID}
	related := &corev1.ObjectReference{APIVersion: "v1", Kind: a.Kind, Name: a.Name, Namespace: ns, UID: a.UID}
	event.Record(s.m.recorder, regarding, related, eventtype, reason, a.Message)
}

// ensureClaims makes sure the claims of pod i exist and may be mounted by a
// new pod, creating the missing ones. It reports whether the pod may be
// created; when not, the reason is in the result's Waiting.
func (s *setRun) ensureClaims(ctx context.Context, i int, claims []*corev1.PersistentVolumeClaim) (bool, error) {
	podName, ns := s.podName(i), s.set.Namespace
	dryRun := s.opts.DryRun && !s.opts.CreateMissing
	for _, want := range claims {
		name := want.Name
		// Never mount a claim that is going away, or that still belongs to
		// a condemned earlier pod of this name: the garbage collector is
		// about to delete it (KEP-1847, "DeleteOnScaledownOnly").
		dec, err := s.m.CheckReuse(ctx, PodClaim{Namespace: ns, Pod: podName, Claim: name},
			&ReuseOptions{Owner: &s.owner, OwnerLabel: s.set.Label, DryRun: s.opts.DryRun})
		if err != nil {
			return false, err
		}
		claimAction := SetAction{Kind: "PersistentVolumeClaim", Name: name, UID: dec.UID, Ordinal: i}
		switch dec.Verdict {
		case VerdictWait, VerdictDeleteFirst:
			if s.opts.DryRun && dec.Verdict == VerdictDeleteFirst {
				a := claimAction
				a.Verb, a.Message = VerbDelete, "would delete Claim "+name+": "+dec.Reason
				s.record(a, corev1.EventTypeNormal, ReasonDryRun)
			}
			why := fmt.Sprintf("pod %s waits: %s", podName, dec.Reason)
			claimAction.Verb, claimAction.Message = VerbWait, why
			s.record(claimAction, corev1.EventTypeNormal, ReasonWaitingForClaim)
			s.res.Waiting = append(s.res.Waiting, why)
			return false, nil
		case VerdictReuse:
			claimAction.Verb, claimAction.Message = VerbReuse, fmt.Sprintf("pod %s reuses claim %s (uid %s)", podName, name, dec.UID)
			s.record(claimAction, corev1.EventTypeNormal, ReasonClaimReused)
			continue
		}
		// The claim is created with the owner references the policy wants,
		// so that it is never without them; in a dry run with none
		// (SyncOwner's dry run then says what they would be).
		plan, err := OwnerReferences(Ownership{Policy: s.set.Owner.Policy, Owner: s.owner, Pod: Ref{Name: podName}}, nil)
		if err != nil {
			return false, err
		}
		claim := want.DeepCopy()
		claim.Namespace = ns
		claim.Labels = withEntry(claim.Labels, s.set.Label, s.owner.Name)
		for k, v := range s.m.ann.Track(podName, s.set.TTL) {
			claim.Annotations = withEntry(claim.Annotations, k, v)
		}
		if !s.opts.DryRun {
			claim.OwnerReferences = append(claim.OwnerReferences, plan.OwnerReferences...)
		}
		if dryRun {
			claimAction.Verb, claimAction.Message = VerbCreate, fmt.Sprintf("would create Claim %s for Pod %s", name, podName)
			s.record(claimAction, corev1.EventTypeNormal, ReasonDryRun)
			continue
		}
		created, err := s.m.client.CreateClaim(ctx, claim)
		switch {
		case apierrors.IsAlreadyExists(err):
			why := fmt.Sprintf("claim %s appeared; checking it again", name)
			s.res.Waiting = append(s.res.Waiting, why)
			return false, nil
		case err != nil:
			return false, fmt.Errorf("lifecycle: create claim %s/%s: %w", ns, name, err)
		}
		claimAction.Verb, claimAction.UID = VerbCreate, created.UID
		claimAction.Message = fmt.Sprintf("create Claim %s (uid %s) for Pod %s", name, created.UID, podName)
		s.record(claimAction, corev1.EventTypeNormal, ReasonCreated)
	}
	return true, nil
}

func withEntry(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// createPod creates pod i, controlled by the owner. It returns nil in a
// dry run that creates nothing.
func (s *setRun) createPod(ctx context.Context, i int) (*corev1.Pod, error) {
	name := s.podName(i)
	pod, err := s.set.Pod(i)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: pod %s: %w", name, err)
	}
	if pod == nil {
		return nil, fmt.Errorf("%w: ClaimSet.Pod(%d) = nil", ErrInvalidInput, i)
	}
	pod = pod.DeepCopy()
	pod.Name, pod.Namespace, pod.GenerateName = name, s.set.Namespace, ""
	pod.Labels = withEntry(pod.Labels, s.set.Label, s.owner.Name)
	yes := true
	pod.OwnerReferences = append(slices.DeleteFunc(pod.OwnerReferences, func(r metav1.OwnerReference) bool { return isController(&r) }), metav1.OwnerReference{
		APIVersion: s.owner.APIVersion, Kind: s.owner.Kind, Name: s.owner.Name, UID: s.owner.UID, Controller: &yes, BlockOwnerDeletion: &yes})
	a := SetAction{Verb: VerbCreate, Kind: "Pod", Name: name, Ordinal: i}
	if s.opts.DryRun && !s.opts.CreateMissing {
		a.Message = "would create Pod " + name
		s.record(a, corev1.EventTypeNormal, ReasonDryRun)
		return nil, nil
	}
	created, err := s.m.client.CreatePod(ctx, pod)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: create pod %s/%s: %w", s.set.Namespace, name, err)
	}
	a.UID, a.Message = created.UID, fmt.Sprintf("create Pod %s (uid %s)", name, created.UID)
	s.record(a, corev1.EventTypeNormal, ReasonCreated)
	return created, nil
}

// syncOwner is SyncOwner over the members; it sorts the per-claim outcomes
// into the result and returns the failures that must stop a scale-down.
func (s *setRun) syncOwner(ctx context.Context, policy Policy, members []Member) error {
	syncs, syncErr := s.m.SyncOwner(ctx, Scope{Namespace: s.set.Namespace, Claims: s.set.ClaimCache}, s.owner, policy, members,
		&SyncOptions{DryRun: s.opts.DryRun})
	var failures []error
	for _, cs := range syncs {
		switch {
		case cs.Err == nil:
			if cs.Plan.Changed {
				a := SetAction{Verb: VerbSetOwnerReferences, Kind: "PersistentVolumeClaim", Name: cs.Claim, Ordinal: s.ordinals[cs.Claim]}
				if s.opts.DryRun {
					a.Message = fmt.Sprintf("would set the owner references of Claim %s to [%s]", cs.Claim, refsString(cs.Plan.OwnerReferences))
					s.record(a, corev1.EventTypeNormal, ReasonDryRun)
				} else {
					// SyncOwner recorded its own ClaimOwnersUpdated event.
					a.Message = fmt.Sprintf("set the owner references of Claim %s to [%s]", cs.Claim, refsString(cs.Plan.OwnerReferences))
					s.res.Actions = append(s.res.Actions, a)
				}
			}
		case errors.Is(cs.Err, ErrConflictingController):
			// Not ours to manage: SyncOwner removed only our references and
			// recorded why.
			s.res.Conflicts = append(s.res.Conflicts, cs.Claim)
		case errors.Is(cs.Err, ErrStaleOwnerReference):
			// It refers to an earlier owner or pod of the same name: the
			// garbage collector is about to decide its fate.
			s.res.Stale = append(s.res.Stale, cs.Claim)
		default:
			failures = append(failures, cs.Err)
		}
	}
	if syncErr != nil && syncs == nil {
		failures = append(failures, syncErr) // the claims could not be listed
	}
	return errors.Join(failures...)
}

func refsString(refs []metav1.OwnerReference) string {
	var parts []string
	for _, r := range refs {
		p := r.Kind + " " + r.Name
		if isController(&r) {
			p += " (controller)"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// scaleDown deletes condemned pod i if a fresh read of the owner still
// condemns it under policy, the one its claims' references were written
// from. Under whenScaled: Delete the pod's claims go with it, so a
// scale-down that the first read showed but that was undone since, or a
// policy changed since, must not delete it; the next call decides again on
// the newer owner.
func (s *setRun) scaleDown(ctx context.Context, i int, pod *corev1.Pod, policy Policy) error {
	now, err := s.set.Reread(ctx)
	if err != nil {
		return fmt.Errorf("lifecycle: read %s again before scale-down: %w", s.owner, err)
	}
	if now == nil || now.Ref.UID != s.owner.UID || now.Deleting || i < now.Replicas {
		logr.FromContextOrDiscard(ctx).V(1).Info("scale-down undone since the first read: pod kept", "pod", pod.Name)
		return nil
	}
	// The claims' owner references were written from the first read's
	// policy: deleting the pod carries that policy out (whenScaled: Delete
	// lets the garbage collector take the claims with the pod). When the
	// fresh read's policy differs, they say what the owner no longer asks
	// for; the next call writes them from the newer policy and decides again.
	if fresh := now.Policy.Normalize(); fresh != policy {
		logr.FromContextOrDiscard(ctx).V(1).Info("policy changed since the first read: pod kept", "pod", pod.Name,
			"policy", policy, "freshPolicy", fresh)
		return nil
	}
	then := "its claims stay (whenScaled=Retain)"
	if policy.DeletesOnScaledown() {
		then = "the garbage collector deletes its claims (whenScaled=Delete)"
	}
	a := SetAction{Verb: VerbDelete, Kind: "Pod", Name: pod.Name, UID: pod.UID, Ordinal: i}
	if s.opts.DryRun {
		a.Message = fmt.Sprintf("would delete Pod %s (uid %s) on scale-down; %s", pod.Name, pod.UID, then)
		s.record(a, corev1.EventTypeNormal, ReasonDryRun)
		return nil
	}
	deleted, err := s.m.deleteCondemned(ctx, pod, s.set.CondemnedAnnotation, now.Version)
	if err != nil || !deleted {
		return err
	}
	a.Message = fmt.Sprintf("delete Pod %s (uid %s) on scale-down; %s", pod.Name, pod.UID, then)
	s.record(a, corev1.EventTypeNormal, ReasonDeleted)
	return nil
}

// deleteCondemned deletes exactly the pod decided on (UID precondition): a
// pod recreated under the same name since is neither annotated nor deleted.
// First it records on the pod, under annotation, the owner's version the
// deletion was decided on. deleted is false when the pod is gone or another
// pod now has its name: the next pass decides again.
func (m *Manager) deleteCondemned(ctx context.Context, pod *corev1.Pod, annotation, ownerVersion string) (deleted bool, err error) {
	patch := fmt.Sprintf(`{"metadata":{"uid":%q,"annotations":{%q:%q}}}`, pod.UID, annotation, ownerVersion)
	err = m.client.PatchPod(ctx, pod.Namespace, pod.Name, []byte(patch))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
		return false, nil // the uid in the patch differs: another pod
	case err != nil:
		return false, fmt.Errorf("lifecycle: annotate pod %s/%s before its deletion: %w", pod.Namespace, pod.Name, err)
	}
	uid := pod.UID
	err = m.client.DeletePod(ctx, pod.Namespace, pod.Name, metav1.Preconditions{UID: &uid})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lifecycle: delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return true, nil
}
