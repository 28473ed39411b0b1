package collect

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/retention"
)

// Prepare adds the Collector's Finalizer to o if it is missing and o is not
// being deleted, so that whoever deletes o, its data goes first. It does
// nothing without a Finalizer, and writes nothing in a dry run.
func (c *Collector[T]) Prepare(ctx context.Context, o T) error {
	f := c.cfg.Finalizer
	if f == "" || c.cfg.DryRun || o.GetDeletionTimestamp() != nil || slices.Contains(o.GetFinalizers(), f) {
		return nil
	}
	o = o.DeepCopyObject().(T)
	o.SetFinalizers(append(o.GetFinalizers(), f))
	if err := c.cfg.Objects.Update(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("collect: add finalizer %s to backup %s/%s: %w", f, o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// graceUntil decides, from o and now alone, whether a deleted backup's data
// must still be kept, and until when: a TTL of GracePeriod from the
// deletion timestamp, unless Force says otherwise.
func (c *Collector[T]) graceUntil(o T, now time.Time) (bool, time.Time) {
	forced := c.cfg.Force != nil && c.cfg.Force(o)
	var res retention.Result
	// One backup judged alone: the guard would keep it forever.
	alone := retention.Options{AllowDeleteNewest: true}
	item := retention.Item{ID: o.GetName(), Time: o.GetDeletionTimestamp().Time, Force: forced}
	if err := alone.Evaluate(retention.TTL{After: c.cfg.GracePeriod}, now, []retention.Item{item}, &res); err != nil {
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
// event say why. It returns what it did and when to look again (0: when
// the backup changes).
func (c *Collector[T]) Finalize(ctx context.Context, o T) (Outcome, time.Duration, error) {
	f := c.cfg.Finalizer
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
			return Outcome{}, 0, fmt.Errorf("collect: read backup %s/%s: %w", o.GetNamespace(), o.GetName(), err)
		}
		if live.GetUID() != o.GetUID() || !slices.Contains(live.GetFinalizers(), f) {
			return Outcome{}, 0, nil // another backup of the name, or done
		}
		o = live
	}
	if keep, at := c.graceUntil(o, now); keep {
		loc, _ := c.location(o)
		msg := fmt.Sprintf("the data under %s is deleted at %s (grace period %s)", loc.Where(), at.UTC().Format(time.RFC3339), retention.Format(c.cfg.GracePeriod))
		out := Outcome{Name: o.GetName(), Reason: ReasonGracePeriod, Message: msg, RetryAt: at}
		if !c.cfg.DryRun && c.hasNotCondition(o, ReasonGracePeriod) {
			c.cfg.Recorder.Event(o, corev1.EventTypeNormal, ReasonGracePeriod, msg)
			c.setCondition(ctx, o, ReasonGracePeriod, msg)
		}
		return out, max(at.Sub(now), time.Nanosecond), nil
	}
	all, err := c.cfg.Objects.List(ctx, o.GetNamespace())
	if err != nil {
		return Outcome{}, 0, fmt.Errorf("collect: list the backups of namespace %q: %w", o.GetNamespace(), err)
	}
	d := c.deleteData(ctx, o, replace(all, o))
	if d.kept != nil {
		at := d.kept.RetryAt
		if at.IsZero() {
			at = now.Add(c.cfg.RetryAfter)
		}
		d.kept.RetryAt = at
		return *d.kept, max(at.Sub(now), time.Nanosecond), nil
	}
	if c.cfg.DryRun {
		return Outcome{Name: o.GetName(), Deleted: true, Message: "dry run: " + d.msg + ", then the finalizer " + f, Keys: d.keys}, 0, nil
	}
	o = o.DeepCopyObject().(T)
	o.SetFinalizers(slices.DeleteFunc(o.GetFinalizers(), func(s string) bool { return s == f }))
	if err := c.cfg.Objects.Update(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		// The deletion is repeated, finding nothing, next time.
		return Outcome{}, 0, fmt.Errorf("collect: remove finalizer %s from backup %s/%s: %w", f, o.GetNamespace(), o.GetName(), err)
	}
	msg := d.msg + ", then removed the finalizer " + f
	logr.FromContextOrDiscard(ctx).Info("collected backup", "backup", o.GetName(), "message", msg)
	c.cfg.Recorder.Event(o, corev1.EventTypeNormal, ReasonCollected, msg)
	return Outcome{Name: o.GetName(), Deleted: true, Message: msg}, 0, nil
}

// hasNotCondition reports whether o's condition lacks reason.
func (c *Collector[T]) hasNotCondition(o T, reason string) bool {
	if c.cfg.Conditions == nil {
		return true
	}
	cond := meta.FindStatusCondition(*c.cfg.Conditions(o), c.cfg.ConditionType)
	return cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != reason
}
