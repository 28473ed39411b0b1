package lifecycle

import (
	"context"
	"fmt"
	"slices"
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
	// SkipMounted: the pod named by pod-name exists and mounts the claim;
	// its last-unmounted-on annotation is out of date.
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

// Skip is a claim the collector left alone although it looked expired (or
// whose annotations do not parse).
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
	// Skipped are expired claims left alone, and claims with bad
	// annotations.
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
//   - the pod named by its pod-name annotation does not exist, or does not
//     mount it;
//
// and it is deleted with UID and resourceVersion preconditions, so that a
// claim that changed (re-mounted, re-annotated) or was recreated since it was
// listed is never deleted. Claims and pods are read with paginated lists (or
// the caches in scope): never one request per claim, except the deletes.
// Pods are listed only when some claim has expired.
//
// The error reports a failed list, or failed deletes (other than
// precondition failures and NotFound, which are reported in Skipped); the
// result holds everything decided so far.
func (m *Manager) Collect(ctx context.Context, opts CollectOptions) (CollectResult, error) {
	log := logr.FromContextOrDiscard(ctx).WithValues("namespace", opts.Namespace)
	now := m.clock.Now()
	var res CollectResult
	claims, err := m.listClaims(ctx, opts.Scope)
	if err != nil {
		return res, err
	}
	res.Listed = len(claims)

	// Group the tracked claims by TTL: retention.TTL has a single After.
	type tracked struct {
		claim *corev1.PersistentVolumeClaim
		u     Unmount
	}
	groups := map[time.Duration][]tracked{}
	for _, c := range claims {
		if c.DeletionTimestamp != nil {
			continue
		}
		u, err := m.ann.Read(c)
		if err != nil {
			res.Skipped = append(res.Skipped, Skip{Claim: c.Name, Reason: SkipInvalid, Detail: err.Error()})
			continue
		}
		if u.Since.IsZero() {
			continue // mounted, or not tracked
		}
		ttl := m.defaultTTL
		if u.HasTTL {
			ttl = u.TTL
		} else if ttl <= 0 {
			continue // no TTL applies
		}
		groups[ttl] = append(groups[ttl], tracked{c, u})
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
			return res, fmt.Errorf("lifecycle: evaluate TTL %s: %w", retention.Format(ttl), err)
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
	if len(expired) == 0 {
		return res, nil
	}

	pods, err := m.listPods(ctx, opts.Scope)
	if err != nil {
		return res, err
	}
	// Decide everything first, then delete: the deletes are independent and
	// run on a few workers; outcomes land in per-claim slots so the result
	// does not depend on their timing.
	var todo []Deletion
	for _, t := range expired {
		c := t.claim
		if pod, ok := pods[t.u.Pod]; ok && mounts(pod, c.Name) {
			res.Skipped = append(res.Skipped, Skip{Claim: c.Name, Reason: SkipMounted,
				Detail: fmt.Sprintf("pod %s mounts it; its %s annotation is out of date", pod.Name, m.ann.LastUnmountedKey())})
			continue
		}
		exp := t.u.Expiry(m.defaultTTL)
		todo = append(todo, Deletion{Claim: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion, Pod: t.u.Pod,
			UnmountedSince: t.u.Since, Expired: exp,
			Reason: fmt.Sprintf("claim %s unmounted since %s expired at %s", c.Name,
				t.u.Since.UTC().Format(time.RFC3339), exp.UTC().Format(time.RFC3339))})
	}
	if opts.DryRun {
		res.Deleted = todo
		return res, nil
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
				outcomes[i] = m.client.PersistentVolumeClaims(opts.Namespace).Delete(ctx, d.Claim, metav1.DeleteOptions{
					Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
			}
		})
	}
	wg.Wait()
	var errs []error
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
	if len(errs) > 0 {
		return res, joinErrs(errs)
	}
	return res, nil
}
