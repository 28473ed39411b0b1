package collect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/retention"
)

// verdict is the policy's decision about one backup.
type verdict struct {
	expired bool
	until   time.Time // kept: when it becomes deletable by time; zero: not by time
	why     string    // kept: why
	err     error     // the policy, time or outcome could not be read
}

// decide applies the policies to objs (none of them being deleted) at now.
// It is a function of (objs, now) and the policies of Config.Keep read.
// With both a GroupPolicy and a BackupPolicy (Combined), a backup is kept
// while either keeps it (combine).
func (c *Collector[T]) decide(ctx context.Context, objs []T, now time.Time) map[types.UID]verdict {
	switch {
	case c.group == nil && c.each == nil:
		out := make(map[types.UID]verdict, len(objs))
		for _, o := range objs {
			out[o.GetUID()] = verdict{why: "no policy: collected only when deleted"}
		}
		return out
	case c.group == nil:
		return c.decideAlone(objs, now)
	case c.each == nil:
		return c.decideGroups(ctx, objs, now)
	}
	out := c.decideGroups(ctx, objs, now)
	for uid, own := range c.decideAlone(objs, now) {
		out[uid] = combine(out[uid], own)
	}
	return out
}

// combine is the verdict of two policies that both must let a backup go:
// expired when both expired; kept, with the reasons of those that keep it,
// until both let it go (the later time; zero when either keeps it not by
// time); an error of either keeps it.
func combine(group, own verdict) verdict {
	switch {
	case group.err != nil || own.err != nil:
		return verdict{err: errors.Join(group.err, own.err)}
	case group.expired && own.expired:
		return verdict{expired: true}
	case group.expired:
		return verdict{until: own.until, why: "its own policy: " + own.why}
	case own.expired:
		return verdict{until: group.until, why: "its group's policy: " + group.why}
	}
	until := group.until
	if group.until.IsZero() || own.until.IsZero() {
		until = time.Time{}
	} else if own.until.After(until) {
		until = own.until
	}
	return verdict{until: until, why: "its group's policy: " + group.why + "; its own policy: " + own.why}
}

// decideAlone judges each backup by its own policy (BackupPolicy), with
// retention's newest-backup guard off.
func (c *Collector[T]) decideAlone(objs []T, now time.Time) map[types.UID]verdict {
	out := make(map[types.UID]verdict, len(objs))
	var res retention.Result
	alone := retention.Options{AllowDeleteNewest: true}
	for _, o := range objs {
		p, err := c.each(o)
		if err == nil {
			err = alone.Evaluate(p, now, []retention.Item{{ID: o.GetName(), Time: c.cfg.Time(o)}}, &res)
		}
		if err != nil {
			out[o.GetUID()] = verdict{err: err}
			continue
		}
		out[o.GetUID()] = verdictOf(res.Decisions[0])
	}
	return out
}

// decideGroups judges the backups of each group (GroupPolicy.Group)
// together by the group's policy, those of unknown outcome left out and
// kept.
func (c *Collector[T]) decideGroups(ctx context.Context, objs []T, now time.Time) map[types.UID]verdict {
	out := make(map[types.UID]verdict, len(objs))
	var res retention.Result
	gp := c.group
	groups := map[string][]T{}
	for _, o := range objs {
		g := ""
		if gp.Group != nil {
			g = gp.Group(o)
		}
		groups[g] = append(groups[g], o)
	}
	for g, members := range groups {
		p, err := gp.Policy(ctx, g)
		var judged []T
		var items []retention.Item
		for _, o := range members {
			if gp.Outcome(o) == retention.OutcomeUnspecified {
				// Neither deleted nor allowed to push a good backup out.
				out[o.GetUID()] = verdict{why: "outcome unknown"}
				continue
			}
			it := retention.Item{ID: o.GetName(), Time: c.cfg.Time(o), Outcome: gp.Outcome(o)}
			if gp.Tags != nil {
				it.Tags = gp.Tags(o)
			}
			judged, items = append(judged, o), append(items, it)
		}
		if err == nil {
			err = retention.Evaluate(p, now, items, &res)
		}
		for i, o := range judged {
			if err != nil {
				out[o.GetUID()] = verdict{err: fmt.Errorf("group %q: %w", g, err)}
			} else {
				out[o.GetUID()] = verdictOf(res.Decisions[i])
			}
		}
	}
	return out
}

func verdictOf(d retention.Decision) verdict {
	if !d.Keep {
		return verdict{expired: true}
	}
	return verdict{until: d.DeletableAt, why: d.Reasons.String()}
}

// Pass runs the retention pass over the backups of namespace: it decides
// on the list (which may come from a cache), and deletes each deletable
// backup's data and then the resource, each on a fresh read decided again,
// the resource with UID and resourceVersion preconditions. With a
// Finalizer, it deletes the resource and leaves the data to Finalize.
// Errors that concern one backup are in its Outcome, its event and its
// condition; the error is for what stopped the pass.
func (c *Collector[T]) Pass(ctx context.Context, namespace string) (Report, error) {
	now := c.cfg.Clock.Now()
	rep := Report{Now: now}
	var next time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	list, err := c.cfg.Objects.List(ctx, namespace)
	if err != nil {
		return rep, fmt.Errorf("collect: list the backups of namespace %q: %w", namespace, err)
	}
	slices.SortFunc(list, func(a, b T) int { return cmp.Compare(a.GetName(), b.GetName()) })
	c.forget(namespace, list)
	live := present(list)
	verdicts := c.decide(ctx, live, now)
	near := c.neighbours()
	for _, o := range live {
		if t, ok := c.retryAt(o.GetUID()); ok && now.Before(t) {
			soonest(t)
			continue
		}
		v := verdicts[o.GetUID()]
		var out Outcome
		switch {
		case v.err != nil:
			// Never delete on the strength of a field we cannot read.
			out = c.keep(ctx, o, c.cfg.Reasons.InvalidPolicy, v.err.Error())
		case !v.expired:
			rep.Kept = append(rep.Kept, Kept{Name: o.GetName(), Why: v.why, Until: v.until})
			soonest(v.until)
			continue
		default:
			out = c.collect(ctx, o, list, near)
		}
		if !out.Deleted && !c.cfg.DryRun.Enabled && out.Reason != "" {
			if out.RetryAt.IsZero() {
				out.RetryAt = now.Add(c.cfg.RetryAfter)
			}
			c.setRetryAt(o, out.RetryAt)
			soonest(out.RetryAt)
		}
		if out.Name != "" {
			rep.Backups = append(rep.Backups, out)
		}
	}
	if !next.IsZero() {
		rep.RequeueAfter = max(next.Sub(now), time.Nanosecond)
	}
	return rep, nil
}

// collect deletes a deletable backup's data, then the resource. It reads
// the backup afresh and decides again first: the cache may be behind a
// change of the policy's fields.
func (c *Collector[T]) collect(ctx context.Context, cached T, all []T, near *neighbours[T]) Outcome {
	log := logr.FromContextOrDiscard(ctx).WithValues("backup", cached.GetName())
	o, err := c.cfg.Objects.Get(ctx, cached.GetNamespace(), cached.GetName())
	switch {
	case apierrors.IsNotFound(err):
		return Outcome{}
	case err != nil:
		return Outcome{Name: cached.GetName(), Reason: c.cfg.Reasons.DeletionFailed, Message: fmt.Sprintf("read backup: %v", err)}
	case o.GetUID() != cached.GetUID() || o.GetDeletionTimestamp() != nil:
		return Outcome{}
	}
	all = replace(all, o)
	if v := c.decide(ctx, present(all), c.cfg.Clock.Now())[o.GetUID()]; v.err != nil || !v.expired {
		return Outcome{} // changed since: the next pass decides on the new version
	}
	why := "its retention policy lets it go"
	if c.cfg.Describe != nil {
		why = c.cfg.Describe(o)
	}
	var msg string
	var keys []string
	if c.fin.Name != "" && slices.Contains(o.GetFinalizers(), c.fin.Name) {
		// The data goes through the finalizer, whoever deletes the backup.
		msg = "deleted the resource; its data is deleted before the finalizer " + c.fin.Name + " is removed"
		if c.cfg.DryRun.Enabled {
			// Say what Finalize would find: the keys, or why it would keep
			// the data.
			d := c.deleteData(ctx, o, near, false)
			if d.kept != nil {
				return *d.kept
			}
			msg, keys = "dry run: would delete the resource, then through the finalizer "+c.fin.Name+" (after its grace period): "+d.msg, d.keys
		}
	} else {
		d := c.deleteData(ctx, o, near, false)
		if d.kept != nil {
			return *d.kept
		}
		msg, keys = d.msg+" ("+why+")", d.keys
		if c.cfg.DryRun.Enabled {
			msg = fmt.Sprintf("dry run: %s, then the resource", msg)
		}
	}
	if c.cfg.DryRun.Enabled {
		log.Info("dry run: would collect the backup", "message", msg)
		if c.cfg.DryRun.Report && c.lacks(o, c.cfg.Reasons.DryRun, msg) {
			c.cfg.Recorder.Event(o, corev1.EventTypeNormal, c.cfg.Reasons.DryRun, msg)
			c.setCondition(ctx, o, c.cfg.Reasons.DryRun, msg)
		}
		return Outcome{Name: o.GetName(), Deleted: true, Message: msg, Keys: keys}
	}
	err = c.cfg.Objects.Delete(ctx, o.GetNamespace(), o.GetName(), o.GetUID(), o.GetResourceVersion())
	switch {
	case err == nil, apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		// Changed after the fresh read: the next pass decides again; if it
		// is still deletable, the deletion finds no data and goes on.
		log.Info("backup changed while its data was deleted; deciding again", "error", err)
		msg += "; the resource changed meanwhile and is decided on again"
		if c.fin.Name == "" || !slices.Contains(o.GetFinalizers(), c.fin.Name) {
			// Its data is gone now: the resource must say so, whatever
			// the next pass decides.
			c.dataGone(ctx, o, msg)
		}
		return Outcome{Name: o.GetName(), Message: msg}
	default:
		return c.keep(ctx, o, c.cfg.Reasons.DeletionFailed, msg+"; deleting the resource failed: "+err.Error())
	}
	c.forgetUID(o.GetUID())
	if c.fin.Name == "" {
		msg += ", then the resource"
	}
	log.Info("collected backup", "message", msg)
	c.cfg.Recorder.Event(o, corev1.EventTypeNormal, c.cfg.Reasons.Collected, msg)
	return Outcome{Name: o.GetName(), Deleted: true, Message: msg}
}

// dataGone records on a fresh read of o, kept because it changed after its
// data was deleted, that its data is gone: the condition True with
// Reasons.Collected and a Warning event, so that nobody reads the kept
// resource as a backup that can be restored.
func (c *Collector[T]) dataGone(ctx context.Context, o T, msg string) {
	c.cfg.Recorder.Event(o, corev1.EventTypeWarning, c.cfg.Reasons.Collected, msg)
	if _, ok := any(o).(ConditionSetter); !ok {
		return
	}
	fresh, err := c.cfg.Objects.Get(ctx, o.GetNamespace(), o.GetName())
	if err != nil || fresh.GetUID() != o.GetUID() {
		return
	}
	putCondition(fresh, metav1.Condition{
		Type: c.cfg.ConditionType, Status: metav1.ConditionTrue, Reason: c.cfg.Reasons.Collected, Message: msg,
		ObservedGeneration: fresh.GetGeneration(), LastTransitionTime: metav1.NewTime(c.cfg.Clock.Now()),
	})
	if err := c.cfg.Objects.UpdateStatus(ctx, fresh); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "record that the data is gone", "backup", o.GetName())
	}
}

// present returns the objects of list that are not being deleted.
func present[T Object](list []T) []T {
	var out []T
	for _, o := range list {
		if o.GetDeletionTimestamp() == nil {
			out = append(out, o)
		}
	}
	return out
}

// replace returns a copy of list with o in place of the object of its name.
func replace[T Object](list []T, o T) []T {
	out := slices.Clone(list)
	for i, x := range out {
		if x.GetName() == o.GetName() {
			out[i] = o
			return out
		}
	}
	return append(out, o)
}

func (c *Collector[T]) retryAt(uid types.UID) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.notBefore[uid]
	return r.at, ok
}

func (c *Collector[T]) setRetryAt(o T, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.notBefore[o.GetUID()] = retry{namespace: o.GetNamespace(), at: t}
}

func (c *Collector[T]) forgetUID(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.notBefore, uid)
}

// RetryAt returns when the next attempt at the backup with this UID is due
// after a failure; false if none is pending.
func (c *Collector[T]) RetryAt(uid types.UID) (time.Time, bool) { return c.retryAt(uid) }

// forget drops the retry times of the backups of namespace that are not in
// list: gone.
func (c *Collector[T]) forget(namespace string, list []T) {
	seen := map[types.UID]bool{}
	for _, o := range list {
		seen[o.GetUID()] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, r := range c.notBefore {
		if r.namespace == namespace && !seen[uid] {
			delete(c.notBefore, uid)
		}
	}
}
