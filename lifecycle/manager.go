package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/groundskeeper-io/groundskeeper/internal/event"
	"github.com/groundskeeper-io/groundskeeper/internal/pager"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// EventRecorder is the part of client-go's record.EventRecorder this package
// uses; a record.EventRecorder satisfies it as is. It is the same type as
// subreconcile.EventRecorder, so one recorder serves both packages.
type EventRecorder = event.Recorder

// EventFunc adapts a function to an EventRecorder (for example a
// k8s.io/client-go/tools/events recorder; crt.Events does that for a
// controller-runtime manager). It is the same type as subreconcile.EventFunc.
type EventFunc = event.Func

// Event reasons emitted on the owner.
const (
	ReasonConflictingController = "ConflictingController"
	ReasonClaimOwnersUpdated    = "ClaimOwnersUpdated"
	ReasonClaimOwnersFailed     = "ClaimOwnersUpdateFailed"
	ReasonExpiredClaimDeleted   = "ExpiredClaimDeleted"
	ReasonClaimCollected        = "ClaimCollected"
)

// Config configures a Manager. Only Client is required.
type Config struct {
	// Client reads and writes claims and reads pods: ClientGo over a
	// client-go clientset, or crt/claims.Client over a controller-runtime
	// manager.
	Client Client
	// Recorder receives events about the owner; nil records none. A
	// recorder that also has EventRelated(regarding, related, eventtype,
	// reason, message), as crt.Events does, is given the claim as the
	// related object.
	Recorder EventRecorder
	// Clock is read for unmount times and TTL evaluation; nil is the real
	// clock.
	Clock clock.PassiveClock
	// Annotations names the unmount tracking annotations, and opts in to
	// the claims' Unused condition (Annotations.UnusedCondition).
	Annotations Annotations
	// DefaultTTL applies to unmounted claims without a pvc-ttl annotation.
	// Zero: such claims never expire.
	DefaultTTL time.Duration
	// MaxAttempts bounds the read-modify-write attempts on one claim when it
	// keeps changing under us (HTTP 409). Zero means 5.
	MaxAttempts int
	// PageSize is the page size of list requests. Zero means 500.
	PageSize int64
	// DeleteWorkers is how many deletes the collector sends at once. Zero
	// means 4. The client's own rate limit still applies.
	DeleteWorkers int
}

// Manager applies retention policies, tracks unmounts and collects expired
// claims. It is safe for concurrent use.
type Manager struct {
	client      Client
	recorder    EventRecorder
	clock       clock.PassiveClock
	ann         Annotations
	defaultTTL  time.Duration
	maxAttempts int
	pageSize    int64
	workers     int
}

// New validates cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: Config.Client is nil", ErrInvalidConfig)
	}
	if cfg.DefaultTTL < 0 {
		return nil, fmt.Errorf("%w: Config.DefaultTTL = %s: must not be negative", ErrInvalidConfig, cfg.DefaultTTL)
	}
	if cfg.MaxAttempts < 0 {
		return nil, fmt.Errorf("%w: Config.MaxAttempts = %d: must not be negative", ErrInvalidConfig, cfg.MaxAttempts)
	}
	if cfg.DeleteWorkers < 0 {
		return nil, fmt.Errorf("%w: Config.DeleteWorkers = %d: must not be negative", ErrInvalidConfig, cfg.DeleteWorkers)
	}
	if cfg.PageSize < 0 {
		return nil, fmt.Errorf("%w: Config.PageSize = %d: must not be negative", ErrInvalidConfig, cfg.PageSize)
	}
	m := &Manager{client: cfg.Client, recorder: cfg.Recorder, clock: cfg.Clock, ann: cfg.Annotations,
		defaultTTL: cfg.DefaultTTL, maxAttempts: cfg.MaxAttempts, pageSize: cfg.PageSize, workers: cfg.DeleteWorkers}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.maxAttempts == 0 {
		m.maxAttempts = 5
	}
	if m.workers == 0 {
		m.workers = 4
	}
	if m.pageSize == 0 {
		m.pageSize = 500
	}
	return m, nil
}

// Annotations returns the annotation names in use.
func (m *Manager) Annotations() Annotations { return m.ann }

// event records an event on owner about the claim claimName of namespace.
func (m *Manager) event(namespace string, owner *Ref, claimName, eventtype, reason, msg string) {
	if m.recorder == nil || owner == nil || owner.Name == "" {
		return
	}
	event.Record(m.recorder,
		&corev1.ObjectReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, Namespace: namespace, UID: owner.UID},
		&corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: claimName, Namespace: namespace},
		eventtype, reason, msg)
}

// mutate is a read-modify-write of one claim: compute returns the merge patch
// of metadata fields to apply to the claim it is given (nil: nothing to do).
// The patch carries the claim's resourceVersion, so the server rejects it if
// the claim changed since it was read; then the claim is read again and
// compute runs again on the fresh copy. Nothing is ever written over a
// version we have not seen.
func (m *Manager) mutate(ctx context.Context, namespace, name string, claim *corev1.PersistentVolumeClaim,
	compute func(*corev1.PersistentVolumeClaim) (map[string]any, error)) (*corev1.PersistentVolumeClaim, error) {
	for attempt := 0; ; attempt++ {
		if claim == nil {
			var err error
			claim, err = m.client.GetClaim(ctx, namespace, name)
			if err != nil {
				return nil, fmt.Errorf("lifecycle: get claim %s/%s: %w", namespace, name, err)
			}
		}
		meta, err := compute(claim)
		if err != nil || meta == nil {
			return claim, err
		}
		if attempt >= m.maxAttempts {
			return claim, fmt.Errorf("%w: claim %s/%s after %d attempts", ErrTooManyConflicts, namespace, name, attempt)
		}
		meta["resourceVersion"] = claim.ResourceVersion
		body, err := json.Marshal(map[string]any{"metadata": meta})
		if err != nil {
			return claim, fmt.Errorf("lifecycle: patch claim %s/%s: %w", namespace, name, err)
		}
		patched, err := m.client.PatchClaim(ctx, namespace, name, body)
		switch {
		case err == nil:
			return patched, nil
		case apierrors.IsConflict(err):
			logr.FromContextOrDiscard(ctx).V(1).Info("claim changed since read, reading it again", "claim", name, "resourceVersion", claim.ResourceVersion)
			claim = nil
		default:
			return claim, fmt.Errorf("lifecycle: patch claim %s/%s: %w", namespace, name, err)
		}
	}
}

// SyncClaim brings the owner references of one claim to what o asks for
// (see OwnerReferences), with at most one patch per attempt, guarded by the
// claim's resourceVersion (a conflict is retried on a fresh read). claim is the copy the caller has (from a
// cache, say), or nil to read it; it is not modified.
//
// For a claim controlled by someone else it removes only our references,
// records a ConflictingController warning on the owner and returns the plan
// with a *ConflictError. For a stale reference it changes nothing and
// returns the plan with an error wrapping ErrStaleOwnerReference. A claim
// that does not exist is an error for which apierrors.IsNotFound is true.
//
// With opts.DryRun it decides the same on the claim given (or read) and
// writes nothing and records no event: the plan says what would be written
// (Changed, OwnerReferences), and a conflict or stale reference is returned
// as without a dry run. opts nil means no dry run.
func (m *Manager) SyncClaim(ctx context.Context, namespace string, o Ownership, claimName string, claim *corev1.PersistentVolumeClaim, opts *SyncOptions) (Plan, error) {
	if err := o.validate(); err != nil {
		return Plan{}, err
	}
	dryRun := opts != nil && opts.DryRun
	log := logr.FromContextOrDiscard(ctx).WithValues("claim", claimName, "owner", o.Owner.String(), "dryRun", dryRun)
	var plan Plan
	conflictReported := false
	updated, err := m.mutate(ctx, namespace, claimName, claim, func(c *corev1.PersistentVolumeClaim) (map[string]any, error) {
		var err error
		plan, err = OwnerReferences(o, c.OwnerReferences)
		if err != nil {
			return nil, err
		}
		if plan.Status == PlanConflict && !conflictReported && !dryRun {
			conflictReported = true
			m.event(namespace, &o.Owner, claimName, corev1.EventTypeWarning, ReasonConflictingController,
				fmt.Sprintf("PersistentVolumeClaim %s has a conflicting controller %s %s; the retention policy is ignored for this claim",
					claimName, plan.Found.Kind, plan.Found.Name))
		}
		if !plan.Changed || dryRun {
			return nil, nil
		}
		refs := plan.OwnerReferences
		if refs == nil {
			refs = []metav1.OwnerReference{}
		}
		return map[string]any{"ownerReferences": refs}, nil
	})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return plan, err
		}
		if !dryRun {
			m.event(namespace, &o.Owner, claimName, corev1.EventTypeWarning, ReasonClaimOwnersFailed,
				fmt.Sprintf("update owner references of PersistentVolumeClaim %s: %v", claimName, err))
		}
		return plan, err
	}
	if plan.Changed && dryRun {
		log.V(1).Info("dry run: would update claim owner references", "status", plan.Status.String())
	}
	if plan.Changed && !dryRun {
		log.V(1).Info("updated claim owner references", "status", plan.Status.String(), "resourceVersion", updated.ResourceVersion)
		m.event(namespace, &o.Owner, claimName, corev1.EventTypeNormal, ReasonClaimOwnersUpdated,
			fmt.Sprintf("owner references of PersistentVolumeClaim %s set for policy whenDeleted=%s whenScaled=%s",
				claimName, o.Policy.Normalize().WhenDeleted, o.Policy.Normalize().WhenScaled))
	}
	switch plan.Status {
	case PlanConflict:
		return plan, &ConflictError{Claim: namespace + "/" + claimName, Controller: *plan.Found}
	case PlanStale:
		log.Info("claim refers to an earlier object of the same name; leaving it to the garbage collector", "reference", plan.Found.UID)
		return plan, fmt.Errorf("%w: claim %s/%s refers to %s %s uid %s", ErrStaleOwnerReference, namespace, claimName, plan.Found.Kind, plan.Found.Name, plan.Found.UID)
	}
	return plan, nil
}

// SyncOptions are the per-call settings of SyncOwner and SyncClaim; nil
// means the defaults (no dry run).
type SyncOptions struct {
	// DryRun decides on what was read and writes nothing: each plan says
	// what would be written, and no event is recorded.
	DryRun bool
}

// Member is one pod slot of an owner: the pod (zero Ref when it does not
// exist), whether a scale-down removes it, and the names of its claims.
type Member struct {
	Pod       Ref
	Condemned bool
	Claims    []string
}

// Scope says where an owner's claims and pods are: a namespace and a label
// selector, read with paginated list requests, or from informer caches.
type Scope struct {
	Namespace string
	// Selector selects the owner's claims; nil selects every claim in the
	// namespace.
	Selector labels.Selector
	// PodSelector selects the pods the collector checks for mounts; nil
	// selects every pod in the namespace.
	PodSelector labels.Selector
	// Claims, when set, is read instead of listing claims from the API
	// server: a cache (InformerClaims over a client-go lister, or
	// crt/claims.Cache over a controller-runtime cache).
	Claims ClaimLister
	// Pods, when set, is read instead of listing pods from the API server
	// for the first mount check: a cache (InformerPods, crt/claims.PodCache). The
	// check before a deletion always lists pods from the API server.
	Pods PodLister
}

// validate rejects a scope that would send deletes to the wrong namespace:
// claims are namespaced, and every delete goes to Scope.Namespace.
func (s Scope) validate() error {
	if s.Namespace == "" {
		return fmt.Errorf("%w: Scope.Namespace = %q: a namespace is required (claims are deleted in it)", ErrInvalidInput, s.Namespace)
	}
	return nil
}

func selectorOrEverything(s labels.Selector) labels.Selector {
	if s == nil {
		return labels.Everything()
	}
	return s
}

func (m *Manager) listClaims(ctx context.Context, s Scope) ([]*corev1.PersistentVolumeClaim, error) {
	var out []*corev1.PersistentVolumeClaim
	err := m.eachClaimPage(ctx, s, func(page []*corev1.PersistentVolumeClaim) error {
		out = append(out, page...)
		return nil
	})
	return out, err
}

// eachClaimPage hands the claims of s to f a page at a time, as the API
// server returns them (the whole list at once from s.Claims), so that a
// caller that keeps only some of them holds one page, not the list.
func (m *Manager) eachClaimPage(ctx context.Context, s Scope, f func([]*corev1.PersistentVolumeClaim) error) error {
	sel := selectorOrEverything(s.Selector)
	if s.Claims != nil {
		all, err := s.Claims.ListClaims(ctx, s.Namespace, sel)
		if err != nil {
			return fmt.Errorf("lifecycle: list claims in %s from cache: %w", s.Namespace, err)
		}
		// A cluster-wide lister serves every namespace: keep the scope's.
		out := all[:0:0]
		for _, c := range all {
			if c.Namespace == s.Namespace {
				out = append(out, c)
			}
		}
		return f(out)
	}
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: m.pageSize}
	page := make([]*corev1.PersistentVolumeClaim, 0, m.pageSize)
	err := pager.Each(ctx, opts, func(ctx context.Context, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error) {
		return m.client.ListClaims(ctx, s.Namespace, opts)
	}, func(list *corev1.PersistentVolumeClaimList) error {
		page = page[:0]
		for i := range list.Items {
			page = append(page, &list.Items[i])
		}
		return f(page)
	})
	if err != nil {
		return fmt.Errorf("lifecycle: list claims in %s (%q): %w", s.Namespace, opts.LabelSelector, err)
	}
	return nil
}

// listPods reads the pods of s. A live read is a paginated list of every pod
// of the namespace from the API server, whatever s.PodSelector says: it is
// the read a deletion or an unmount mark rests on. Otherwise the pods of
// s.PodSelector are read from s.Pods when it is set (those of other
// namespaces left out), or listed from the API server.
func (m *Manager) listPods(ctx context.Context, s Scope, live bool) ([]*corev1.Pod, error) {
	if !live && s.Pods != nil {
		all, err := s.Pods.ListPods(ctx, s.Namespace, selectorOrEverything(s.PodSelector))
		if err != nil {
			return nil, fmt.Errorf("lifecycle: list pods in %s from cache: %w", s.Namespace, err)
		}
		out := all[:0:0]
		for _, p := range all {
			if p.Namespace == s.Namespace { // a cluster-wide lister serves every namespace
				out = append(out, p)
			}
		}
		return out, nil
	}
	sel := labels.Everything()
	if !live {
		sel = selectorOrEverything(s.PodSelector)
	}
	var out []*corev1.Pod
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: m.pageSize}
	err := pager.Each(ctx, opts, func(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
		return m.client.ListPods(ctx, s.Namespace, opts)
	}, func(list *corev1.PodList) error {
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: list pods in %s (%q): %w", s.Namespace, opts.LabelSelector, err)
	}
	return out, nil
}

// ClaimSync is the outcome of SyncOwner for one claim.
type ClaimSync struct {
	Claim string
	// Missing reports that the claim does not exist (yet).
	Missing bool
	Plan    Plan
	Err     error
}

// SyncOwner re-converges the owner references of every claim of every member
// to policy: call it on every reconcile of the owner, and in particular
// after the policy changed (to or from Retain) and before deleting condemned
// pods. Claims are read with one paginated list of scope (or its cache), and
// only claims that must change are patched. The returned error joins the
// per-claim errors (conflicting controllers, stale references, failed
// patches); each is also in its ClaimSync. With opts.DryRun it reads the
// same and writes nothing (see SyncClaim); opts nil means no dry run.
func (m *Manager) SyncOwner(ctx context.Context, scope Scope, owner Ref, policy Policy, members []Member, opts *SyncOptions) ([]ClaimSync, error) {
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	if err := scope.validate(); err != nil {
		return nil, err
	}
	claims, err := m.listClaims(ctx, scope)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*corev1.PersistentVolumeClaim, len(claims))
	for _, c := range claims {
		byName[c.Name] = c
	}
	var out []ClaimSync
	var errs []error
	for _, mem := range members {
		o := Ownership{Policy: policy, Owner: owner, Pod: mem.Pod, Condemned: mem.Condemned}
		for _, name := range mem.Claims {
			c, ok := byName[name]
			if !ok {
				out = append(out, ClaimSync{Claim: name, Missing: true})
				continue
			}
			plan, err := m.SyncClaim(ctx, scope.Namespace, o, name, c, opts)
			if apierrors.IsNotFound(err) {
				out = append(out, ClaimSync{Claim: name, Missing: true})
				continue
			}
			out = append(out, ClaimSync{Claim: name, Plan: plan, Err: err})
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return out, errors.Join(errs...)
}

// PodClaim names a pod and one claim it mounts, or will mount, in one
// namespace: the argument of every call about one pod's claim (CheckReuse,
// MarkUnmounted), so that the pod's and the claim's names, both strings,
// cannot be given in the wrong order.
type PodClaim struct {
	Namespace string
	Pod       string
	Claim     string
}

// validate names the first missing field; pod says whether Pod is required.
func (pc PodClaim) validate(call string, pod bool) error {
	switch {
	case pc.Namespace == "":
		return fmt.Errorf("%w: %s: PodClaim.Namespace = %q: required", ErrInvalidInput, call, pc.Namespace)
	case pc.Claim == "":
		return fmt.Errorf("%w: %s: PodClaim.Claim = %q: required", ErrInvalidInput, call, pc.Claim)
	case pod && pc.Pod == "":
		return fmt.Errorf("%w: %s: PodClaim.Pod = %q: required", ErrInvalidInput, call, pc.Pod)
	}
	return nil
}

// ReuseOptions are the per-call settings of CheckReuse; nil means the
// defaults (no owner, no dry run).
type ReuseOptions struct {
	// Owner is the object the pods and claims belong to, when known (see
	// CheckReuse).
	Owner *Ref
	// OwnerLabel, when set, is the key of a label whose value is the name
	// of the owner a claim belongs to (a set's label, say); it needs Owner.
	// Claim names are built from parts (template, owner, ordinal) and can
	// collide across owners: a claim whose OwnerLabel names another owner
	// is that owner's claim of the same name, and is neither reused,
	// written to nor deleted: VerdictWait, with a ConflictingController
	// event on the owner. A claim without the label (made by hand for a
	// restore, say) is judged as without OwnerLabel.
	OwnerLabel string
	// DryRun decides and writes nothing.
	DryRun bool
}

// CheckReuse is the check an operator makes before creating pod pc.Pod
// that will mount claim pc.Claim (see Annotations.Reuse). It reads the claim
// and:
//
//   - VerdictCreate: the claim does not exist;
//   - VerdictWait: the claim is terminating or belongs to an earlier pod, or
//     it had expired but some pod of the namespace mounts it (a debug or
//     backup pod, say, created without CheckReuse): its out-of-date
//     last-unmounted-on annotation has then been removed;
//   - VerdictDeleteFirst: the claim had expired and no pod mounts it, as a
//     fresh list of every pod of the namespace from the API server says (the
//     rule Collect follows too); the version decided on has been deleted
//     here, with UID and resourceVersion preconditions (an
//     ExpiredClaimDeleted event is recorded on the owner when given; if the
//     claim changed in between, nothing is deleted). Requeue: wait for it
//     to be gone, then create a fresh one;
//   - VerdictReuse: the claim may be mounted. Its last-unmounted-on annotation
//     has been removed (and pod-name set), guarded by its resourceVersion, so
//     a collector that decided on the earlier version cannot delete it.
//
// With opts.Owner given, a claim controlled by another object (neither the
// owner nor the pod pc.Pod) is left as it is: it may be reused, its
// annotations untouched; expired, it is not deleted but answered VerdictWait, with
// a ConflictingController event on the owner. A claim that refers to an
// earlier owner of the same name (another UID) is answered Wait. With
// opts.OwnerLabel given too, a claim whose label names another owner is
// that owner's claim of the same name: Wait, and nothing is written or
// deleted. OwnerLabel without Owner is an error wrapping ErrInvalidInput.
//
// With opts.DryRun it decides the same (pod list included) and writes
// nothing: VerdictDeleteFirst leaves the claim as it is, VerdictReuse and
// VerdictWait leave its mark, and no event is recorded. opts nil means no
// owner and no dry run. A PodClaim without a namespace, pod or claim name is
// an error wrapping ErrInvalidInput that names the field.
func (m *Manager) CheckReuse(ctx context.Context, pc PodClaim, opts *ReuseOptions) (ReuseDecision, error) {
	if err := pc.validate("CheckReuse", true); err != nil {
		return ReuseDecision{}, err
	}
	if opts == nil {
		opts = &ReuseOptions{}
	}
	if opts.OwnerLabel != "" && opts.Owner == nil {
		return ReuseDecision{}, fmt.Errorf("%w: CheckReuse: ReuseOptions.OwnerLabel = %q needs ReuseOptions.Owner, whose name the label carries", ErrInvalidInput, opts.OwnerLabel)
	}
	var dec ReuseDecision
	var decidedOn *corev1.PersistentVolumeClaim
	_, err := m.mutate(ctx, pc.Namespace, pc.Claim, nil, func(c *corev1.PersistentVolumeClaim) (map[string]any, error) {
		decidedOn = c
		var (
			patch map[string]any
			err   error
		)
		dec, patch, err = m.decideReuse(c, pc, opts)
		return patch, err
	})
	switch {
	case apierrors.IsNotFound(err):
		return ReuseDecision{Verdict: VerdictCreate}, nil
	case err != nil:
		return ReuseDecision{}, err
	}
	dec.UID = decidedOn.UID
	if dec.Verdict != VerdictDeleteFirst {
		return dec, nil
	}
	return m.deleteBeforeReuse(ctx, pc, decidedOn, dec, opts)
}

// decideReuse decides CheckReuse's verdict on claim c as read, and returns
// the patch that marks it mounted when it is reused (nil: nothing to
// write). A claim of another owner of the same name, of an earlier owner,
// or controlled by another object is answered Wait.
func (m *Manager) decideReuse(c *corev1.PersistentVolumeClaim, pc PodClaim, opts *ReuseOptions) (ReuseDecision, map[string]any, error) {
	owner := opts.Owner
	dec, err := m.ann.Reuse(c, pc.Pod, "", m.defaultTTL, m.clock.Now())
	if err != nil {
		return dec, nil, err
	}
	if other, ok := c.Labels[opts.OwnerLabel]; ok && opts.OwnerLabel != "" && other != owner.Name {
		dec = ReuseDecision{Verdict: VerdictWait, Reason: fmt.Sprintf(
			"claim %s belongs to another owner of the same claim name (label %s=%s, not %s): not reused, not deleted",
			c.Name, opts.OwnerLabel, other, owner.Name)}
		if !opts.DryRun {
			m.event(pc.Namespace, owner, pc.Claim, corev1.EventTypeWarning, ReasonConflictingController, dec.Reason)
		}
		return dec, nil, nil
	}
	if stale := staleOwner(c, owner); stale != nil {
		// The owner was deleted and recreated under its name: the
		// garbage collector will delete this claim with the earlier
		// owner. Reusing it now would give the new pod a claim that is
		// about to go.
		return ReuseDecision{Verdict: VerdictWait, Expiry: dec.Expiry, Reason: fmt.Sprintf(
			"claim %s still belongs to an earlier %s %s (uid %s); the garbage collector deletes it with that owner",
			c.Name, stale.Kind, stale.Name, stale.UID)}, nil, nil
	}
	if ctl := foreignController(c, owner, pc.Pod); ctl != nil {
		// Another object controls the claim: it is neither deleted nor
		// written to here.
		if dec.Verdict == VerdictDeleteFirst {
			dec = ReuseDecision{Verdict: VerdictWait, Expiry: dec.Expiry, Reason: fmt.Sprintf(
				"%s, but it is controlled by %s %s: not deleted; its controller must release it, or delete it by hand", dec.Reason, ctl.Kind, ctl.Name)}
			if !opts.DryRun {
				m.event(pc.Namespace, owner, pc.Claim, corev1.EventTypeWarning, ReasonConflictingController, dec.Reason)
			}
		}
		return dec, nil, nil
	}
	if dec.Verdict != VerdictReuse || opts.DryRun {
		return dec, nil, nil
	}
	return dec, annotationPatch(m.ann.MarkMounted(c, pc.Pod)), nil
}

// deleteBeforeReuse acts on CheckReuse's VerdictDeleteFirst: the mark says
// claim decidedOn expired; whether it may be deleted now is the shared
// rule's answer, on a fresh pod list. A mounted claim has its stale mark
// removed and is answered Wait; otherwise exactly the version decided on is
// deleted.
func (m *Manager) deleteBeforeReuse(ctx context.Context, pc PodClaim, decidedOn *corev1.PersistentVolumeClaim, dec ReuseDecision, opts *ReuseOptions) (ReuseDecision, error) {
	namespace, claimName := pc.Namespace, pc.Claim
	log := logr.FromContextOrDiscard(ctx).WithValues("claim", claimName, "pod", pc.Pod, "dryRun", opts.DryRun)
	u, err := m.ann.Read(decidedOn)
	if err != nil {
		return ReuseDecision{}, err
	}
	_, mounted, err := m.mayDelete(ctx, namespace, []tracked{{decidedOn, u}}, nil)
	if err != nil {
		return ReuseDecision{}, err
	}
	if len(mounted) > 0 {
		dec = ReuseDecision{Verdict: VerdictWait, Reason: m.ann.mountedSkip(mounted[0]).Detail}
		if opts.DryRun {
			return dec, nil
		}
		removed, err := m.clearStaleMark(ctx, namespace, decidedOn)
		if err != nil {
			return dec, err
		}
		if removed {
			dec.Reason += " and was removed"
		}
		log.Info("expired claim is mounted: not deleted", "reason", dec.Reason)
		return dec, nil
	}
	if opts.DryRun {
		log.Info("dry run: would delete expired claim before reuse", "reason", dec.Reason)
		return dec, nil
	}
	// Delete exactly the version decided on: if it changed since (a pod
	// re-mounted it through CheckReuse, say), the preconditions fail and
	// we wait.
	uid, rv := decidedOn.UID, decidedOn.ResourceVersion
	err = m.client.DeleteClaim(ctx, namespace, claimName, metav1.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case err == nil:
		log.Info("deleted expired claim before reuse", "reason", dec.Reason)
		m.event(namespace, opts.Owner, claimName, corev1.EventTypeNormal, ReasonExpiredClaimDeleted, dec.Reason)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone or changed: the caller waits and checks again.
	default:
		return dec, fmt.Errorf("lifecycle: delete expired claim %s/%s: %w", namespace, claimName, err)
	}
	return dec, nil
}

// MarkUnmounted records on claim pc.Claim that its pod pc.Pod is gone: call
// it after the pod was deleted (from a pod-delete event, however late). It
// decides on a fresh read, never on the event: it reads the claim and lists
// every pod of the namespace from the API server, and
//
//   - when no pod mounts the claim, it sets last-unmounted-on to now (see
//     Annotations.MarkUnmounted: a claim already marked keeps its earlier
//     instant);
//   - when some pod mounts it (the pod was recreated, or another pod uses
//     the claim), it writes no mark, and removes one the claim carries: that
//     mark is out of date.
//
// The write carries the resourceVersion of the claim read before the pods
// were listed, so a claim changed meanwhile (CheckReuse removing the mark
// for a new pod) is read and decided again. A claim that does not exist or
// is being deleted is left alone and is not an error. Each call costs one
// get, one paginated pod list and at most one patch per attempt. pc.Pod may
// be empty (pod-name is then left as it is); pc.Namespace and pc.Claim are
// required.
//
// With Annotations.UnusedCondition, a claim whose Unused condition applies
// gets no mark: the condition records the instant.
//
// unmounted reports that the claim now carries last-unmounted-on (written
// now or earlier), or that no pod mounts a claim whose Unused condition
// applies; false when a pod mounts it, or it is gone or going.
func (m *Manager) MarkUnmounted(ctx context.Context, pc PodClaim) (unmounted bool, err error) {
	if err := pc.validate("MarkUnmounted", false); err != nil {
		return false, err
	}
	namespace, claimName, podName := pc.Namespace, pc.Claim, pc.Pod
	now := m.clock.Now()
	_, err = m.mutate(ctx, namespace, claimName, nil, func(c *corev1.PersistentVolumeClaim) (map[string]any, error) {
		unmounted = false
		if c.DeletionTimestamp != nil {
			return nil, nil
		}
		pods, err := m.listPods(ctx, Scope{Namespace: namespace}, true)
		if err != nil {
			return nil, err
		}
		if pods := mountersOf(pods)[types.NamespacedName{Namespace: namespace, Name: c.Name}]; len(pods) > 0 {
			logr.FromContextOrDiscard(ctx).V(1).Info("claim is mounted: not marked unmounted", "claim", c.Name, "pods", pods)
			return annotationPatch(m.ann.clearUnmounted(c)), nil
		}
		unmounted = true
		if _, _, ok := m.ann.unusedSince(c); ok {
			// The claim's Unused condition records it; nothing to write.
			return nil, nil
		}
		return annotationPatch(m.ann.MarkUnmounted(c, podName, now)), nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return unmounted && err == nil, err
}

func annotationPatch(changes map[string]*string) map[string]any {
	if changes == nil {
		return nil
	}
	ann := make(map[string]any, len(changes))
	for k, v := range changes {
		if v == nil {
			ann[k] = nil
		} else {
			ann[k] = *v
		}
	}
	return map[string]any{"annotations": ann}
}

// staleOwner returns a reference of claim to an object with owner's group,
// kind and name but another UID: an earlier owner of the same name. Nil when
// owner or its UID is not known.
func staleOwner(claim *corev1.PersistentVolumeClaim, owner *Ref) *metav1.OwnerReference {
	if owner == nil || owner.UID == "" {
		return nil
	}
	for i := range claim.OwnerReferences {
		ref := &claim.OwnerReferences[i]
		if owner.matches(ref) && ref.UID != owner.UID {
			return ref
		}
	}
	return nil
}

// foreignController returns the controller reference of claim when owner is
// known and the controller is neither owner nor a pod named podName.
func foreignController(claim *corev1.PersistentVolumeClaim, owner *Ref, podName string) *metav1.OwnerReference {
	if owner == nil {
		return nil
	}
	pod := Ref{APIVersion: "v1", Kind: "Pod", Name: podName}
	for i := range claim.OwnerReferences {
		ref := &claim.OwnerReferences[i]
		if isController(ref) && !owner.matches(ref) && !pod.matches(ref) {
			return ref
		}
	}
	return nil
}
