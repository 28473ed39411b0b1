package collect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// Prepare adds the Collector's Finalizer to o if it is missing and o is not
// being deleted, so that whoever deletes o, its data goes first. It does
// nothing without a Finalizer. A dry run adds it too: it deletes nothing,
// and it lets a dry run report on deletions; a dry run never removes it.
func (c *Collector[T]) Prepare(ctx context.Context, o T) error {
	f := c.fin.Name
	if f == "" || o.GetDeletionTimestamp() != nil || slices.Contains(o.GetFinalizers(), f) {
		return nil
	}
	o = o.DeepCopyObject().(T)
	o.SetFinalizers(append(o.GetFinalizers(), f))
	if err := c.cfg.Objects.Update(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("collect: add finalizer %s to backup %s: %w", f, key(o), err)
	}
	return nil
}

func key(o Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// graceUntil decides, from o and now alone, whether a deleted backup's data
// must still be kept, and until when: a TTL of GracePeriod from the
// deletion timestamp, unless Force says otherwise.
func (c *Collector[T]) graceUntil(o T, now time.Time) (bool, time.Time) {
	forced := c.fin.Force != nil && c.fin.Force(o)
	var res retention.Result
	// One backup judged alone: the guard would keep it forever.
	alone := retention.Options{AllowDeleteNewest: true}
	item := retention.Item{ID: o.GetName(), Time: o.GetDeletionTimestamp().Time, Force: forced}
	if err := alone.Evaluate(retention.TTL{After: c.fin.GracePeriod}, now, []retention.Item{item}, &res); err != nil {
		return true, time.Time{} // GracePeriod is checked in New
	}
	d := res.Decisions[0]
	return d.Keep, d.DeletableAt
}

// Finalize deletes the data of a backup that is being deleted and carries
// the Collector's Finalizer, once its grace period has passed, then
// removes the finalizer. It decides again on a fresh read before the data
// goes (a cache may lag behind the removal of a force annotation), and the
// finalizer's removal carries the resourceVersion decided on. Until the
// data is gone the finalizer stays, whatever fails; the condition and an
// event (when the condition changes) say why. It returns what it did and
// when to look again (0: when the backup changes): the end of the grace
// period, or of an Object Lock retention. Data that could not be deleted
// for another reason (the store, the Secret, the location) is also
// returned as an error, for the caller's retry with backoff.
func (c *Collector[T]) Finalize(ctx context.Context, o T) (Outcome, time.Duration, error) {
	f := c.fin.Name
	if f == "" || o.GetDeletionTimestamp() == nil || !slices.Contains(o.GetFinalizers(), f) {
		return Outcome{}, 0, nil
	}
	now := c.cfg.Clock.Now()
	if keep, _ := c.graceUntil(o, now); !keep {
		live, err := c.cfg.Objects.Get(ctx, o.GetNamespace(), o.GetName())
		if apierrors.IsNotFound(err) {
			return Outcome{}, 0, nil
		}
		if err != nil {
			return Outcome{}, 0, fmt.Errorf("collect: read backup %s: %w", key(o), err)
		}
		if live.GetUID() != o.GetUID() || live.GetDeletionTimestamp() == nil || !slices.Contains(live.GetFinalizers(), f) {
			return Outcome{}, 0, nil // another backup of the name, or done
		}
		o = live
	}
	if keep, at := c.graceUntil(o, now); keep {
		return c.grace(ctx, o, at), max(at.Sub(now), time.Nanosecond), nil
	}
	d := c.deleteData(ctx, o, c.neighbours(), true)
	if d.kept != nil {
		if at := d.kept.RetryAt; !at.IsZero() { // Object Lock: nothing helps before then
			return *d.kept, max(at.Sub(now), time.Nanosecond), nil
		}
		return *d.kept, 0, fmt.Errorf("collect: the data of backup %s was not deleted (%s): %s", key(o), d.kept.Reason, d.kept.Message)
	}
	if c.cfg.DryRun.Enabled {
		msg := "dry run: " + d.msg + ", then remove the finalizer " + f
		if c.cfg.DryRun.Report && c.lacks(o, c.cfg.Reasons.DryRun, msg) {
			c.cfg.Recorder.Event(o, corev1.EventTypeNormal, c.cfg.Reasons.DryRun, msg)
			c.setCondition(ctx, o, c.cfg.Reasons.DryRun, msg)
		}
		return Outcome{Name: o.GetName(), Deleted: true, Message: msg, Keys: d.keys}, 0, nil
	}
	// The data is gone: say so before the finalizer goes, with the object.
	c.cfg.Recorder.Event(o, corev1.EventTypeNormal, c.cfg.Reasons.Collected, d.msg)
	o = o.DeepCopyObject().(T)
	o.SetFinalizers(slices.DeleteFunc(o.GetFinalizers(), func(s string) bool { return s == f }))
	if err := c.cfg.Objects.Update(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		// The deletion is repeated, finding nothing, next time.
		return Outcome{}, 0, fmt.Errorf("collect: remove finalizer %s from backup %s: %w", f, key(o), err)
	}
	msg := d.msg + ", then removed the finalizer " + f
	logr.FromContextOrDiscard(ctx).Info("collected backup", "backup", o.GetName(), "message", msg)
	return Outcome{Name: o.GetName(), Deleted: true, Message: msg}, 0, nil
}

// grace records that o's data is kept until at: OnGrace, the condition and
// an event when they change, and with Backstop the store's own expiry.
func (c *Collector[T]) grace(ctx context.Context, o T, at time.Time) Outcome {
	loc, _ := c.location(ctx, o)
	msg := fmt.Sprintf("the data under %s is deleted at %s (grace period %s)", loc.Where(), at.UTC().Format(time.RFC3339), retention.Format(c.fin.GracePeriod))
	if loc == (Location{}) {
		msg = fmt.Sprintf("no data; the finalizer is removed at %s (grace period %s)", at.UTC().Format(time.RFC3339), retention.Format(c.fin.GracePeriod))
	} else if c.fin.Backstop {
		msg += c.backstop(ctx, o, loc, at)
	}
	out := Outcome{Name: o.GetName(), Reason: c.cfg.Reasons.GracePeriod, Message: msg, RetryAt: at}
	if c.cfg.DryRun.Enabled && !c.cfg.DryRun.Report {
		return out
	}
	o = o.DeepCopyObject().(T)
	if c.fin.OnGrace != nil {
		c.fin.OnGrace(o, at)
	}
	if c.lacks(o, c.cfg.Reasons.GracePeriod, "") {
		c.cfg.Recorder.Event(o, corev1.EventTypeNormal, c.cfg.Reasons.GracePeriod, msg)
	}
	c.setCondition(ctx, o, c.cfg.Reasons.GracePeriod, msg)
	return out
}

// backstop asks the store to expire loc's prefix itself from at, and
// returns a note for the condition; "" where the store has no lifecycle API
// or the rule could not be written (logged: the Collector still deletes
// the data at at).
func (c *Collector[T]) backstop(ctx context.Context, o T, loc Location, at time.Time) string {
	log := logr.FromContextOrDiscard(ctx).WithValues("backup", o.GetName())
	bucket, release, err := c.open(ctx, o, loc)
	if err != nil {
		log.Info("backstop lifecycle rule not installed", "error", err.Error())
		return ""
	}
	defer release()
	// The store's rule deletes everything under the prefix, with no
	// controller to ask again: it is installed only where the deletion
	// itself would go ahead, and one installed before is taken back.
	why := nestedWith(ctx, c, o, loc, c.neighbours())
	if why == "" && loc.Owner != "" {
		if why, _, err = owned(ctx, bucket, loc); err != nil {
			why = err.Error()
		}
	}
	if why != "" {
		c.dropBackstop(ctx, bucket, loc)
		log.Info("backstop lifecycle rule not installed", "why", why)
		return "; no backstop lifecycle rule: " + why
	}
	opts := &backupstore.ExpiryOptions{DryRun: c.cfg.DryRun.Enabled}
	if clk, ok := c.cfg.Clock.(clock.WithTicker); ok {
		opts.Clock = clk
	}
	res, err := backupstore.ExpirePrefix(ctx, bucket, loc.Prefix, at, opts)
	switch {
	case errors.Is(err, backupstore.ErrExpiryUnsupported):
		return ""
	case err != nil:
		log.Info("backstop lifecycle rule not installed", "error", err.Error())
		return ""
	case len(res.Rules) == 0:
		return ""
	}
	verb := "expires"
	if c.cfg.DryRun.Enabled {
		verb = "would expire (dry run: not installed)"
	}
	return fmt.Sprintf("; backstop: the store's lifecycle rule %q %s it from %s even without this controller", res.Rules[0].ID, verb, res.Rules[0].Date.Format(time.RFC3339))
}

// lacks reports whether o's condition differs from False with reason (and
// msg, unless empty): the moments worth an event.
func (c *Collector[T]) lacks(o T, reason, msg string) bool {
	conds, ok := any(o).(ConditionSetter)
	if !ok {
		return true
	}
	cond := meta.FindStatusCondition(conds.GetConditions(), c.cfg.ConditionType)
	return cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason || (msg != "" && cond.Message != msg)
}
