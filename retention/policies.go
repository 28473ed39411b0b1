package retention

import (
	"fmt"
	"time"
)

// TTL keeps an item until After has passed since its Time: the item expires,
// and may be deleted, when now >= Time + After. Choose Item.Time to say what
// the time-to-live counts from:
//
//   - creation (aerospike's backup .spec.ttl, counted from creationTimestamp;
//     a maximum backup age such as etcd-druid's maxBackupAge);
//   - finish (ttlSecondsAfterFinished);
//   - an annotation's RFC 3339 timestamp (aerospike's last-unmounted-on);
//   - a deletion timestamp, with After set to the grace period (Gardener's
//     deletionGracePeriod after the owner's deletion).
//
// The zero TTL expires every item at once (After == 0: now >= Time), as
// ttlSecondsAfterFinished: 0 does. An item whose Time is after now is kept
// until Time + After like any other, and its decision has Skew set.
type TTL struct {
	// After is the time-to-live. Negative values are invalid.
	After time.Duration
	// ZeroMeansForever makes After == 0 keep items forever, for fields where
	// zero means "no expiry" (aerospike's "0d"). It has no effect when After
	// is not zero.
	ZeroMeansForever bool
}

func (p TTL) check(path string) error { return checkDuration(path, "TTL.After", p.After) }

func (p TTL) eval(e *evaluation, out []Decision) {
	items := e.items
	now := e.now
	out = out[:len(items)] // one bounds check instead of one per item
	if p.After == 0 && p.ZeroMeansForever {
		for i := range out {
			out[i] = Decision{Keep: true, Reasons: ReasonTTL}
		}
		return
	}
	after := p.After
	if !e.top {
		for i := range items {
			if at := items[i].Time.Add(after); now.Before(at) {
				out[i] = Decision{Keep: true, Reasons: ReasonTTL, DeletableAt: at}
			} else {
				out[i] = Decision{}
			}
		}
		return
	}
	// Evaluated on its own: decide, apply the item flags and count in one
	// pass, which is what makes a million items cheap.
	e.top, e.finished = false, true
	kept := 0
	var next time.Time
	for i := range items {
		it := &items[i]
		d := &out[i]
		if at := it.Time.Add(after); now.Before(at) {
			*d = Decision{Keep: true, Reasons: ReasonTTL, DeletableAt: at}
			if it.Hold || it.Force || it.Time.IsZero() || it.Time.After(now) {
				e.finish(it, d)
				continue
			}
			kept++
			if next.IsZero() || at.Before(next) {
				next = at
			}
		} else {
			*d = Decision{}
			// Expired: Time <= Time+After <= now, so not in the future.
			if it.Hold || it.Force || it.Time.IsZero() {
				e.finish(it, d)
			}
		}
	}
	e.kept += kept
	e.next = earliest(e.next, next)
}

// Newest keeps the N newest items and lets the others go: etcd-druid's
// maxBackups, or, inside Any, a guard that always keeps the newest N whatever
// the other policies say. The zero Newest keeps nothing.
//
// Items whose Time is after now are kept (ReasonFuture) but take no place
// among the N, so a wrong clock cannot push a good item out.
//
// N counts the items that did not fail, per group (Item.Group); Failed
// counts, separately, the newest failed items to keep, so that a run of
// failures never pushes a good item out.
type Newest struct {
	// N is the number of items to keep. Negative values are invalid.
	N int
	// Failed is the number of newest failed items to keep. Negative values
	// are invalid.
	Failed int
}

func (p Newest) check(path string) error {
	if err := checkCount(path, "Newest.N", p.N); err != nil {
		return err
	}
	return checkCount(path, "Newest.Failed", p.Failed)
}

func (p Newest) eval(e *evaluation, out []Decision) {
	groups := e.startRanked(out)
	for gi := range groups {
		for r, k := range groups[gi].ok {
			if r >= p.N {
				break
			}
			out[k.idx].keepUntil(ReasonNewest, time.Time{})
		}
		keepFailed(groups[gi].failed, p.Failed, out)
	}
	e.finishRanked(out)
}

// Any keeps an item when at least one of its policies keeps it: keep wins.
// An item stays until the last policy that keeps it lets it go. Combine a
// deleting rule with guards, e.g.
//
//	Any{TTL{After: 30 * Day}, Newest{N: 1}}
//
// expires items after 30 days but always keeps the newest. An empty Any is
// invalid.
type Any []Policy

func (p Any) check(path string) error { return checkComposite(path, "Any", p) }

func (p Any) eval(e *evaluation, out []Decision) {
	e.top = false
	p[0].eval(e, out)
	if len(p) == 1 {
		return
	}
	buf := e.scratch(len(out))
	defer e.release()
	for _, q := range p[1:] {
		q.eval(e, buf)
		for i := range out {
			if b := &buf[i]; b.Keep {
				out[i].keepUntil(b.Reasons, b.DeletableAt)
				out[i].Oldest |= b.Oldest
			}
		}
	}
}

// All keeps an item only when every one of its policies keeps it: delete
// wins. An item stays until the first policy that keeps it lets it go. The
// copy-backups task of etcd-druid is
//
//	All{TTL{After: maxBackupAge}, Newest{N: maxBackups}}
//
// which keeps (copies) the newest maxBackups backups that are younger than
// maxBackupAge. An empty All is invalid.
type All []Policy

func (p All) check(path string) error { return checkComposite(path, "All", p) }

func (p All) eval(e *evaluation, out []Decision) {
	e.top = false
	p[0].eval(e, out)
	if len(p) == 1 {
		return
	}
	buf := e.scratch(len(out))
	defer e.release()
	for _, q := range p[1:] {
		q.eval(e, buf)
		for i := range out {
			a, b := &out[i], &buf[i]
			switch {
			case !a.Keep:
			case !b.Keep:
				*a = Decision{}
			default:
				a.Reasons |= b.Reasons
				a.Oldest |= b.Oldest
				a.DeletableAt = earliest(a.DeletableAt, b.DeletableAt)
			}
		}
	}
}

func checkComposite(path, name string, ps []Policy) error {
	if len(ps) == 0 {
		return fmt.Errorf("%w: %s%s is empty", ErrInvalidPolicy, path, name)
	}
	for i, q := range ps {
		if q == nil {
			return fmt.Errorf("%w: %s%s[%d] is nil", ErrInvalidPolicy, path, name, i)
		}
		// Check without a path first, so that a valid policy costs no
		// allocation; name the full path only for the error.
		if q.check("") != nil {
			return q.check(fmt.Sprintf("%s%s[%d].", path, name, i))
		}
	}
	return nil
}
