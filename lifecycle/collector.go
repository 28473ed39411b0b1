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
// listed is never deleted.
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
	log := logr.FromContextOrDiscard(ctx).WithValues("namespace", opts.Namespace)
	now := m.clock.Now()
	claims, err := m.listClaims(ctx, opts.Scope)
	if err != nil {
		return res, err
	}
	res.Listed = len(claims)

	var marked []tracked
	for _, c := range claims {
		if c.DeletionTimestamp != nil {
			continue
		}
		u, err := m.ann.Read(c)
		if err != nil {
			res.Skipped = append(res.Skipped, Skip{Claim: c.Name, Reason: SkipInvalid, Detail: err.Error()})
			continue
		}
		if !u.Since.IsZero() {
			marked = append(marked, tracked{c, u})
		}
	}
	if len(marked) == 0 {
		return res, nil
	}
	var errs []error
	mt, err := m.listMounters(ctx, opts.Scope, false)
	if err != nil {
		return res, err
	}
	marked = m.keepMounted(ctx, opts, mt, marked, &res, &errs)
	expired, err := m.expired(now, marked, &res)
	if err != nil {
		return res, err
	}
	if len(expired) > 0 && (opts.Pods != nil || opts.PodSelector != nil) {
		// The first read may have missed a pod: confirm on the API server.
		if mt, err = m.listMounters(ctx, opts.Scope, true); err != nil {
			return res, err
		}
		expired = m.keepMounted(ctx, opts, mt, expired, &res, &errs)
	}
	if len(expired) == 0 {
		return res, errors.Join(errs...)
	}

	// Decide everything first, then delete: the deletes are independent and
	// run on a few workers; outcomes land in per-claim slots so the result
	// does not depend on their timing.
	todo := make([]Deletion, 0, len(expired))
	for _, t := range expired {
		c := t.claim
		exp := t.u.Expiry(m.defaultTTL)
		todo = append(todo, Deletion{Claim: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion, Pod: t.u.Pod,
			UnmountedSince: t.u.Since, Expired: exp,
			Reason: fmt.Sprintf("claim %s unmounted since %s expired at %s", c.Name,
				t.u.Since.UTC().Format(time.RFC3339), exp.UTC().Format(time.RFC3339))})
	}
	if opts.DryRun {
		res.Deleted = todo
		return res, errors.Join(errs...)
	}
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
			errs = append(errs, fmt.Errorf("lifecycle: delete expired claim %s/%s: %w", opts.Namespace, d.Claim, ctx.Err()))
		case err == nil:
			res.Deleted = append(res.Deleted, d)
			log.V(1).Info("deleted expired claim", "claim", d.Claim, "expired", d.Expired)
			m.event(opts.Namespace, opts.Owner, corev1.EventTypeNormal, ReasonClaimCollected, d.Reason)
		case apierrors.IsConflict(err):
			res.Skipped = append(res.Skipped, Skip{Claim: d.Claim, Reason: SkipChanged, Detail: err.Error()})
		case apierrors.IsNotFound(err):
			res.Skipped = append(res.Skipped, Skip{Claim: d.Claim, Reason: SkipGone})
		default:
			errs = append(errs, fmt.Errorf("lifecycle: delete expired claim %s/%s: %w", opts.Namespace, d.Claim, err))
		}
	}
	return res, errors.Join(errs...)
}

// tracked is a claim marked unmounted, with its annotations read.
type tracked struct {
	claim *corev1.PersistentVolumeClaim
	u     Unmount
}

// keepMounted returns the claims of ts that no pod mounts. A mounted one is
// reported as SkipMounted and, outside a dry run, its out-of-date mark is
// removed (guarded by its resourceVersion); a failed removal goes to errs.
func (m *Manager) keepMounted(ctx context.Context, opts CollectOptions, mt mounters, ts []tracked, res *CollectResult, errs *[]error) []tracked {
	out := ts[:0:0]
	for _, t := range ts {
		pods := mt[t.claim.Name]
		if len(pods) == 0 {
			out = append(out, t)
			continue
		}
		detail := fmt.Sprintf("pod %s mounts it; its %s annotation is out of date", strings.Join(pods, ", "), m.ann.LastUnmountedKey())
		if !opts.DryRun {
			removed := false
			_, err := m.mutate(ctx, opts.Namespace, t.claim.Name, t.claim, func(c *corev1.PersistentVolumeClaim) (map[string]any, error) {
				if c.UID != t.claim.UID {
					return nil, nil // recreated: the next pass decides on it
				}
				patch := annotationPatch(m.ann.clearUnmounted(c))
				removed = patch != nil
				return patch, nil
			})
			switch {
			case err == nil && removed:
				detail += " and was removed"
			case err == nil:
			case apierrors.IsNotFound(err):
			default:
				*errs = append(*errs, err)
			}
		}
		res.Skipped = append(res.Skipped, Skip{Claim: t.claim.Name, Reason: SkipMounted, Detail: detail})
	}
	return out
}

// expired evaluates the TTL of each claim of ts at now, and returns those
// whose TTL has run out; it sets res.Next and res.RequeueAfter for the rest.
func (m *Manager) expired(now time.Time, ts []tracked, res *CollectResult) ([]tracked, error) {
	// Group the claims by TTL: retention.TTL has a single After.
	groups := map[time.Duration][]tracked{}
	for _, t := range ts {
		ttl := m.defaultTTL
		if t.u.HasTTL {
			ttl = t.u.TTL
		} else if ttl <= 0 {
			continue // no TTL applies
		}
		groups[ttl] = append(groups[ttl], t)
	}
	var expired []tracked
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
		if err := retention.Evaluate(retention.TTL{After: ttl}, now, items, &eval); err != nil {
			return nil, fmt.Errorf("lifecycle: evaluate TTL %s: %w", retention.Format(ttl), err)
		}
		for i, d := range eval.Decisions {
			if !d.Keep {
				expired = append(expired, g[i])
			}
		}
		if !eval.Next.IsZero() && (res.Next.IsZero() || eval.Next.Before(res.Next)) {
			res.Next = eval.Next
		}
	}
	if !res.Next.IsZero() {
		res.RequeueAfter = res.Next.Sub(now)
		if res.RequeueAfter <= 0 {
			res.RequeueAfter = time.Nanosecond
		}
	}
	return expired, nil
}
