package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/groundskeeper-io/groundskeeper/retention"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CollectOptions configures one collector pass.
type CollectOptions struct {
	Scope
	// DryRun decides and reports, and deletes nothing.
	DryRun bool
	// Owner, when set, receives a ClaimCollected event per deleted claim.
	Owner *Ref
}

// Deletion is a claim the collector deleted (or, in a dry run, would delete)
// and why.
type Deletion struct {
	Claim           string
	UID             types.UID
	ResourceVersion string
	// Pod is the pod-name annotation.
	Pod string
	// UnmountedSince and Expired are the last-unmounted-on instant and the
	// instant the TTL ran out.
	UnmountedSince, Expired time.Time
	// Reason is a sentence for logs and events.
	Reason string
}

// SkipReason says why an expired claim was not deleted.
type SkipReason string

// The reasons an expired claim is not deleted.
const (
	// SkipMounted: a pod mounts the claim (whatever its name); its
	// last-unmounted-on annotation is out of date and is removed.
	SkipMounted SkipReason = "Mounted"
	// SkipChanged: the claim changed or was recreated between the decision
	// and the delete (the preconditions failed).
	SkipChanged SkipReason = "Changed"
	// SkipGone: the claim was deleted by someone else first.
	SkipGone SkipReason = "Gone"
	// SkipInvalid: an annotation does not parse; the claim is never deleted
	// on its strength.
	SkipInvalid SkipReason = "InvalidAnnotation"
)

// Skip is a claim the collector left alone although it was marked unmounted
// (or whose annotations do not parse).
type Skip struct {
	Claim  string
	Reason SkipReason
	Detail string
}

// CollectResult is the outcome of a collector pass.
type CollectResult struct {
	// Listed is the number of claims listed.
	Listed int
	// Deleted are the claims deleted, or those a dry run would delete.
	Deleted []Deletion
	// Skipped are claims marked unmounted that a pod mounts, expired claims
	// left alone, and claims with bad annotations.
	Skipped []Skip
	// Next is the earliest instant another claim expires; zero when none
	// expires by time alone.
	Next time.Time
	// RequeueAfter is Next minus the pass's now, or 0 when Next is zero.
	RequeueAfter time.Duration
}

// CollectPlan is what a collector pass decides from the claims and pods it
// read, at one instant, before it writes anything (see
// Annotations.PlanCollect).
type CollectPlan struct {
	// Delete are the claims to delete: marked unmounted, their TTL run out,
	// not being deleted, and mounted by no pod. Ordered by TTL, then as the
	// claims were given.
	Delete []Deletion
	// Mounted are claims marked unmounted that a pod mounts (Reason
	// SkipMounted; Detail names the pods): the mark is out of date and
	// Collect removes it.
	Mounted []Skip
	// Invalid are claims whose annotations do not parse (Reason
	// SkipInvalid): none is ever deleted on their strength.
	Invalid []Skip
	// Next is the earliest instant another claim expires; zero when none
	// expires by time alone.
	Next time.Time
	// RequeueAfter is Next minus now (at least a nanosecond), or 0 when Next
	// is zero.
	RequeueAfter time.Duration
}

// PlanCollect decides, from claims and pods at the instant now, what a
// collector pass would delete and why, and which marks it would remove:
// Manager.Collect makes this decision on what it reads, then acts on it. It
// sends no request, reads no clock and modifies nothing, so a tool can show
// what would be collected from claims and pods read anywhere (a cache, a
// dump), and a test can check the rules without an API server.
//
// A claim is in Delete when it carries last-unmounted-on, its pvc-ttl (else
// defaultTTL; zero or negative means none) has run out at now as
// retention.TTL decides, it is not being deleted, and no pod of pods in its
// namespace has a volume for it, whatever the pod's name. Pods of other
// namespaces are ignored. A claim without last-unmounted-on, or being
// deleted, appears nowhere.
//
// The plan is a decision on what was given: Collect, before it deletes,
// confirms on a fresh list of pods from the API server when the pods came
// from a cache or a selector, and deletes with UID and resourceVersion
// preconditions. The error is an invalid TTL (never one read from an
// annotation, which Read has checked).
func (a Annotations) PlanCollect(claims []*corev1.PersistentVolumeClaim, pods []*corev1.Pod, defaultTTL time.Duration, now time.Time) (CollectPlan, error) {
	var plan CollectPlan
	marked, invalid := a.marked(claims)
	plan.Invalid = invalid
	free, mounted := splitMounted(marked, mountersOf(pods))
	for _, mc := range mounted {
		plan.Mounted = append(plan.Mounted, a.mountedSkip(mc))
	}
	expired, next, err := expired(free, defaultTTL, now)
	if err != nil {
		return plan, err
	}
	for _, t := range expired {
		plan.Delete = append(plan.Delete, t.deletion(defaultTTL))
	}
	plan.Next, plan.RequeueAfter = next, requeueAfter(next, now)
	return plan, nil
}

// Collect runs one collector pass over the claims of scope. A claim is
// deleted only when all of these hold at the decision:
//
//   - it carries last-unmounted-on, and the claim's pvc-ttl (else the
//     Manager's DefaultTTL) has run out since then, as retention.TTL decides;
//   - it is not already being deleted;
//   - no pod of the namespace mounts it, whatever the pod's name: first as
//     the pods of scope (or its cache) say, then, for the claims about to be
//     deleted, as a fresh list of every pod of the namespace from the API
//     server says (a cache may not have seen a pod just created);
//
// and it is deleted with UID and resourceVersion preconditions, so that a
// claim that changed (re-mounted, re-annotated) or was recreated since it was
// listed is never deleted. The decision is Annotations.PlanCollect's, on the
// claims and pods read.
//
// A claim that carries last-unmounted-on although a pod mounts it (its pod
// was recreated; a late pod-delete event marked it) has that mark removed,
// guarded by its resourceVersion, and is reported in Skipped as
// SkipMounted; it never expires on the strength of that mark.
//
// Claims and pods are read with paginated lists (or the caches in scope):
// never one request per claim, except the deletes and the removal of
// out-of-date marks. Pods are read only when some claim is marked, and
// listed from the API server only when some claim is about to be deleted and
// the first read was from a cache or by a pod selector. A dry run makes the
// same reads and no write.
//
// The error reports an invalid scope, a failed list, or failed writes
// (other than precondition failures and NotFound, which are reported in
// Skipped); the result holds everything decided so far.
func (m *Manager) Collect(ctx context.Context, opts CollectOptions) (CollectResult, error) {
	var res CollectResult
	if err := opts.Scope.validate(); err != nil {
		return res, err
	}
	now := m.clock.Now()
	// Decide: the same steps as PlanCollect, with the reads between them
	// made only when a step needs them. The list is read a page at a time
	// and only the marked claims are kept, copied out of their page, so
	// that a pass holds the claims that may expire, not every claim.
	var marked []tracked
	err := m.eachClaimPage(ctx, opts.Scope, func(page []*corev1.PersistentVolumeClaim) error {
		res.Listed += len(page)
		mk, invalid := m.ann.marked(page)
		res.Skipped = append(res.Skipped, invalid...)
		for _, t := range mk {
			c := *t.claim
			marked = append(marked, tracked{&c, t.u})
		}
		return nil
	})
	if err != nil {
		return CollectResult{}, err
	}
	if len(marked) == 0 {
		return res, nil
	}
	pods, err := m.listPods(ctx, opts.Scope, false)
	if err != nil {
		return res, err
	}
	free, mounted := splitMounted(marked, mountersOf(pods))
	expired, next, err := expired(free, m.defaultTTL, now)
	if err != nil {
		return res, err
	}
	res.Next, res.RequeueAfter = next, requeueAfter(next, now)

	// Act.
	var errs []error
	m.unmark(ctx, opts, mounted, &res, &errs)
	if len(expired) > 0 {
		// The first read was a decision on what it saw; whether the claims
		// may be deleted now is the shared rule's answer. The first read is
		// that rule's fresh list when it listed every pod of the namespace
		// from the API server.
		var fresh []*corev1.Pod
		if opts.Pods == nil && opts.PodSelector == nil {
			fresh = pods
			if fresh == nil {
				fresh = []*corev1.Pod{} // listed, and there are none: no second list
			}
		}
		if expired, mounted, err = m.mayDelete(ctx, opts.Namespace, expired, fresh); err != nil {
			return res, err
		}
		m.unmark(ctx, opts, mounted, &res, &errs)
	}
	if len(expired) == 0 {
		return res, errors.Join(errs...)
	}
	todo := make([]Deletion, 0, len(expired))
	for _, t := range expired {
		todo = append(todo, t.deletion(m.defaultTTL))
	}
	if opts.DryRun {
		res.Deleted = todo
		return res, errors.Join(errs...)
	}
	m.delete(ctx, opts, todo, &res, &errs)
	return res, errors.Join(errs...)
}

// delete deletes the claims of todo, each with UID and resourceVersion
// preconditions, and reports each in res or errs. The deletes are
// independent and run on a few workers; outcomes land in per-claim slots so
// the result does not depend on their timing.
func (m *Manager) delete(ctx context.Context, opts CollectOptions, todo []Deletion, res *CollectResult, errs *[]error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("namespace", opts.Namespace)
	outcomes := make([]error, len(todo))
	attempted := make([]bool, len(todo))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(m.workers, len(todo)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(todo) || ctx.Err() != nil {
					return
				}
				attempted[i] = true
				d := &todo[i]
				uid, rv := d.UID, d.ResourceVersion
				outcomes[i] = m.client.DeleteClaim(ctx, opts.Namespace, d.Claim, metav1.Preconditions{UID: &uid, ResourceVersion: &rv})
			}
		})
	}
	wg.Wait()
	for i, err := range outcomes {
		d := todo[i]
		switch {
		case !attempted[i]:
			*errs = append(*errs, fmt.Errorf("lifecycle: delete expired claim %s/%s: %w", opts.Namespace, d.Claim, ctx.Err()))
		case err == nil:
			res.Deleted = append(res.Deleted, d)
			log.V(1).Info("deleted expired claim", "claim", d.Claim, "expired", d.Expired)
			m.event(opts.Namespace, opts.Owner, d.Claim, corev1.EventTypeNormal, ReasonClaimCollected, d.Reason)
		case apierrors.IsConflict(err):
			res.Skipped = append(res.Skipped, Skip{Claim: d.Claim, Reason: SkipChanged, Detail: err.Error()})
		case apierrors.IsNotFound(err):
			res.Skipped = append(res.Skipped, Skip{Claim: d.Claim, Reason: SkipGone})
		default:
			*errs = append(*errs, fmt.Errorf("lifecycle: delete expired claim %s/%s: %w", opts.Namespace, d.Claim, err))
		}
	}
}

// mayDelete is the one rule for "may these expired claims be deleted now",
// followed by every path that deletes a claim on the strength of its
// last-unmounted-on mark (Collect, CheckReuse): a claim may go only when no
// pod of its namespace mounts it, whatever the pod's name, as a list of
// every pod of the namespace from the API server says. A mark goes stale
// when a pod (a debug or backup pod, a pod of another controller) mounts
// the claim without CheckReuse, so the mark alone never decides.
//
// fresh is such a list made in this pass, or nil to list now. Claims that
// no pod mounts come back in free; the others in mounted, whose marks are
// out of date: the caller removes them (clearStaleMark) and deletes none of
// them. The deletion that follows carries the claim's UID and
// resourceVersion as preconditions.
func (m *Manager) mayDelete(ctx context.Context, namespace string, ts []tracked, fresh []*corev1.Pod) (free []tracked, mounted []mountedClaim, err error) {
	if fresh == nil {
		if fresh, err = m.listPods(ctx, Scope{Namespace: namespace}, true); err != nil {
			return nil, nil, err
		}
	}
	free, mounted = splitMounted(ts, mountersOf(fresh))
	return free, mounted, nil
}

// clearStaleMark removes the out-of-date last-unmounted-on of claim, which a
// pod mounts, guarded by its resourceVersion (a conflict is decided again on
// a fresh read). A claim recreated since (another UID) or gone is left to
// the next decision. removed reports that a mark was removed.
func (m *Manager) clearStaleMark(ctx context.Context, namespace string, claim *corev1.PersistentVolumeClaim) (removed bool, err error) {
	_, err = m.mutate(ctx, namespace, claim.Name, claim, func(c *corev1.PersistentVolumeClaim) (map[string]any, error) {
		if c.UID != claim.UID {
			return nil, nil // recreated: the next pass decides on it
		}
		patch := annotationPatch(m.ann.clearUnmounted(c))
		removed = patch != nil
		return patch, nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return removed && err == nil, err
}

// unmark reports each claim of mounted as SkipMounted and, outside a dry
// run, removes its out-of-date mark (clearStaleMark); a failed removal goes
// to errs.
func (m *Manager) unmark(ctx context.Context, opts CollectOptions, mounted []mountedClaim, res *CollectResult, errs *[]error) {
	for _, mc := range mounted {
		skip := m.ann.mountedSkip(mc)
		if !opts.DryRun {
			removed, err := m.clearStaleMark(ctx, opts.Namespace, mc.claim)
			switch {
			case err != nil:
				*errs = append(*errs, err)
			case removed:
				skip.Detail += " and was removed"
			}
		}
		res.Skipped = append(res.Skipped, skip)
	}
}

// tracked is a claim marked unmounted, with its annotations read.
type tracked struct {
	claim *corev1.PersistentVolumeClaim
	u     Unmount
}

// deletion describes the deletion of an expired claim.
func (t tracked) deletion(defaultTTL time.Duration) Deletion {
	c := t.claim
	exp := t.u.Expiry(defaultTTL)
	return Deletion{Claim: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion, Pod: t.u.Pod,
		UnmountedSince: t.u.Since, Expired: exp,
		Reason: fmt.Sprintf("claim %s unmounted since %s expired at %s", c.Name,
			t.u.Since.UTC().Format(time.RFC3339), exp.UTC().Format(time.RFC3339))}
}

// mountedClaim is a claim marked unmounted that pods mount.
type mountedClaim struct {
	tracked
	pods []string
}

func (a Annotations) mountedSkip(mc mountedClaim) Skip {
	stale := "its " + a.LastUnmountedKey() + " annotation is out of date"
	if mc.u.FromCondition {
		stale = "its Unused condition is out of date"
	}
	return Skip{Claim: mc.claim.Name, Reason: SkipMounted, Detail: fmt.Sprintf("pod %s mounts it; %s", strings.Join(mc.pods, ", "), stale)}
}

// marked returns the claims that carry last-unmounted-on and are not being
// deleted, in order, and a SkipInvalid for each claim whose annotations do
// not parse.
func (a Annotations) marked(claims []*corev1.PersistentVolumeClaim) ([]tracked, []Skip) {
	var marked []tracked
	var invalid []Skip
	for _, c := range claims {
		if c.DeletionTimestamp != nil {
			continue
		}
		u, err := a.Read(c)
		if err != nil {
			invalid = append(invalid, Skip{Claim: c.Name, Reason: SkipInvalid, Detail: err.Error()})
			continue
		}
		if !u.Since.IsZero() {
			marked = append(marked, tracked{c, u})
		}
	}
	return marked, invalid
}

// mounters maps a claim to the pods of its namespace that have a volume for
// it, whatever their names: a claim may be mounted by a pod other than the
// one its pod-name annotation names.
type mounters map[types.NamespacedName][]string

func mountersOf(pods []*corev1.Pod) mounters {
	mt := mounters{}
	for _, pod := range pods {
		for i := range pod.Spec.Volumes {
			v := pod.Spec.Volumes[i].PersistentVolumeClaim
			if v == nil {
				continue
			}
			key := types.NamespacedName{Namespace: pod.Namespace, Name: v.ClaimName}
			if !slices.Contains(mt[key], pod.Name) {
				mt[key] = append(mt[key], pod.Name)
			}
		}
	}
	return mt
}

// splitMounted returns, in order, the claims of ts that no pod mounts and
// those that some pod does.
func splitMounted(ts []tracked, mt mounters) (free []tracked, mounted []mountedClaim) {
	free = ts[:0:0]
	for _, t := range ts {
		pods := mt[types.NamespacedName{Namespace: t.claim.Namespace, Name: t.claim.Name}]
		if len(pods) == 0 {
			free = append(free, t)
		} else {
			mounted = append(mounted, mountedClaim{t, pods})
		}
	}
	return free, mounted
}

// expired evaluates the TTL of each claim of ts at now and returns those
// whose TTL has run out, ordered by TTL and then as in ts, and the earliest
// instant another one expires (zero when none expires by time alone).
func expired(ts []tracked, defaultTTL time.Duration, now time.Time) ([]tracked, time.Time, error) {
	// Group the claims by TTL: retention.TTL has a single After.
	groups := map[time.Duration][]tracked{}
	for _, t := range ts {
		ttl := defaultTTL
		if t.u.HasTTL {
			ttl = t.u.TTL
		} else if ttl <= 0 {
			continue // no TTL applies
		}
		groups[ttl] = append(groups[ttl], t)
	}
	var out []tracked
	var next time.Time
	var items []retention.Item
	var eval retention.Result
	ttls := make([]time.Duration, 0, len(groups))
	for ttl := range groups {
		ttls = append(ttls, ttl)
	}
	slices.Sort(ttls)
	for _, ttl := range ttls {
		g := groups[ttl]
		items = items[:0]
		for _, t := range g {
			items = append(items, retention.Item{ID: t.claim.Name, Time: t.u.Since})
		}
		// Claims are not attempts: no guard keeps the newest unmounted one.
		if err := (retention.Options{AllowDeleteNewest: true}).Evaluate(retention.TTL{After: ttl}, now, items, &eval); err != nil {
			return nil, time.Time{}, fmt.Errorf("lifecycle: evaluate TTL %s: %w", retention.Format(ttl), err)
		}
		for i, d := range eval.Decisions {
			if !d.Keep {
				out = append(out, g[i])
			}
		}
		if !eval.Next.IsZero() && (next.IsZero() || eval.Next.Before(next)) {
			next = eval.Next
		}
	}
	return out, next, nil
}

// requeueAfter is the wait from now until next: zero when next is zero, at
// least a nanosecond otherwise (a requeue must not turn into none).
func requeueAfter(next, now time.Time) time.Duration {
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(now), time.Nanosecond)
}
