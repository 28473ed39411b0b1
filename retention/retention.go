package retention

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"
)

// ErrInvalidPolicy is returned, wrapped with the offending field and value,
// when Evaluate is given a policy it cannot apply (a negative count, a
// negative duration, an empty composite). Test for it with errors.Is.
var ErrInvalidPolicy = errors.New("retention: invalid policy")

// Item is one thing that may be deleted: a backup, a claim, a finished task.
type Item struct {
	// ID names the item in the caller's terms (a name, a UID, an object key).
	// It breaks ties between items with equal Times, so that decisions do not
	// depend on the order of the input: of two items with the same Time, the
	// one whose ID sorts first counts as the newer.
	ID string
	// Time is the instant the policy measures from: a creation timestamp, a
	// finish time, an annotation's RFC 3339 timestamp, a deletion timestamp.
	// An item with the zero Time is never deleted by a policy (see NoTime).
	Time time.Time
	// Hold keeps the item whatever the policy and Force say.
	Hold bool
	// Force deletes the item whatever the policy says, unless Hold is set.
	// A forced item takes no place among the newest: the next item moves up,
	// so forcing the deletion of the newest backup does not take the second
	// newest with it.
	Force bool
}

// Reason is a set of reasons an item is kept. Several may hold at once.
type Reason uint16

// The reasons an item is kept.
const (
	// ReasonHold: the item's Hold flag is set.
	ReasonHold Reason = 1 << iota
	// ReasonNoTime: the item's Time is zero, so its age is unknown.
	ReasonNoTime
	// ReasonFuture: the item's Time is after now (clock skew). Policies that
	// rank items (Newest, Calendar, Exponential) do not judge it before its
	// Time has come, and do not let it push other items out.
	ReasonFuture
	// ReasonEmptyPolicy: a Calendar with no keep option set keeps everything,
	// as restic does for an empty policy.
	ReasonEmptyPolicy
	// ReasonTTL: the item's time-to-live has not run out.
	ReasonTTL
	// ReasonNewest: the item is among the newest N (Newest, Calendar.Last),
	// or it is the newest item under Exponential.
	ReasonNewest
	// ReasonCurrentHour: under Exponential, the item is from the current hour.
	ReasonCurrentHour
	// ReasonHourly: the item is the newest of its hour.
	ReasonHourly
	// ReasonDaily: the item is the newest of its day.
	ReasonDaily
	// ReasonWeekly: the item is the newest of its week.
	ReasonWeekly
	// ReasonMonthly: the item is the newest of its month.
	ReasonMonthly
	// ReasonYearly: the item is the newest of its year.
	ReasonYearly
	// ReasonWithin: the item is within Calendar.Within of the newest item.
	ReasonWithin
	// ReasonOldest: the item is the oldest one and a Calendar bucket rule
	// still had room for it (restic's "oldest daily snapshot" and so on).
	ReasonOldest
	reasonEnd
)

var reasonNames = [...]string{
	"hold", "no-time", "future", "empty-policy", "ttl", "newest", "current-hour",
	"hourly", "daily", "weekly", "monthly", "yearly", "within", "oldest",
}

// String lists the reasons, separated by "+", e.g. "ttl+newest"; "none" for
// the empty set.
func (r Reason) String() string {
	if r == 0 {
		return "none"
	}
	var parts []string
	for r != 0 {
		i := bits.TrailingZeros16(uint16(r))
		r &^= 1 << i
		if i < len(reasonNames) {
			parts = append(parts, reasonNames[i])
		} else {
			parts = append(parts, fmt.Sprintf("reason(%d)", i))
		}
	}
	return strings.Join(parts, "+")
}

// Decision is what a policy decided about one item.
type Decision struct {
	// Keep reports whether the item must be kept now. When false, the item
	// may be deleted now.
	Keep bool
	// Skew reports that the item's Time is after now: a clock is wrong or a
	// timestamp was written by hand. A future Time never makes an item
	// deletable earlier; Skew is set however the item was decided.
	Skew bool
	// Forced reports that the item is deleted because of its Force flag,
	// overriding the policy.
	Forced bool
	// Reasons holds every reason the item is kept; it is empty when Keep is
	// false.
	Reasons Reason
	// DeletableAt is, for a kept item, the instant at which it becomes
	// deletable if no item is added, removed or changed. It is never later
	// than that instant; it is exactly that instant unless some item's Time is
	// in the future, or a non-monotonic policy (Exponential) is combined with
	// others in Any. The zero Time means the item does not become deletable
	// by the passing of time alone (it is held, among the newest N, the
	// newest of its bucket, or has no Time). It is zero for deleted items.
	DeletableAt time.Time
}

// Result is the outcome of Evaluate. Reuse one Result across calls: Evaluate
// reuses its slices and internal buffers, so evaluating a same-sized input
// again allocates nothing.
type Result struct {
	// Decisions[i] is the decision about items[i].
	Decisions []Decision
	// Next is the earliest DeletableAt among kept items: the instant to
	// evaluate again, because a decision may change then. It is zero when no
	// decision changes by the passing of time alone.
	Next time.Time
	// Kept and Deleted count the decisions each way.
	Kept, Deleted int
	// Skewed counts the items whose Time is after now.
	Skewed int

	ev evaluation
}

// RequeueAfter returns how long after now the caller should evaluate again
// (Next - now), or 0 when no decision changes by time alone. It suits
// controller-runtime's reconcile.Result{RequeueAfter: ...}.
func (r *Result) RequeueAfter(now time.Time) time.Duration {
	if r.Next.IsZero() {
		return 0
	}
	d := r.Next.Sub(now)
	if d <= 0 {
		// Next is always after the now it was computed for; a caller passing
		// a later now should evaluate again at once.
		return time.Nanosecond
	}
	return d
}

// Policy decides which items to keep. The policies are TTL, Newest, Calendar,
// Exponential and the composites Any and All; the set is closed so that every
// policy can explain its decisions and say when they change.
type Policy interface {
	// check validates the configuration; path prefixes field names in errors.
	check(path string) error
	// eval writes Keep, Reasons and DeletableAt for every item into out,
	// ignoring Hold, Force and zero Times, which Evaluate applies afterwards.
	eval(e *evaluation, out []Decision)
}

// Evaluate applies p to items at the instant now and stores a decision per
// item in res, reusing res's memory. Afterwards, for every item:
//
//   - Hold keeps it (ReasonHold), whatever Force and the policy say;
//   - otherwise Force deletes it (Decision.Forced);
//   - otherwise an item with the zero Time is kept (ReasonNoTime);
//   - otherwise the policy decides.
//
// Evaluate returns an error wrapping ErrInvalidPolicy, and leaves res empty,
// when p is nil or misconfigured. It does not read the clock and does not
// modify items.
func Evaluate(p Policy, now time.Time, items []Item, res *Result) error {
	res.Decisions = res.Decisions[:0]
	res.Next = time.Time{}
	res.Kept, res.Deleted, res.Skewed = 0, 0, 0
	if p == nil {
		return fmt.Errorf("%w: nil Policy", ErrInvalidPolicy)
	}
	if err := p.check(""); err != nil {
		return err
	}
	now = now.Round(0) // compare wall clocks only, like stored timestamps
	res.Decisions = slices.Grow(res.Decisions, len(items))[:len(items)]
	out := res.Decisions
	e := &res.ev
	e.reset(now, items)
	e.top = true
	p.eval(e, out)
	if !e.finished {
		for i := range out {
			e.finish(&items[i], &out[i])
		}
	}
	res.Next, res.Kept, res.Skewed = e.next, e.kept, e.skewed
	res.Deleted = len(items) - e.kept
	e.items = nil // do not keep the caller's items alive
	return nil
}

// finish applies Hold, Force and zero Times to the policy's decision d about
// it, and adds it to the totals.
func (e *evaluation) finish(it *Item, d *Decision) {
	d.Skew = it.Time.After(e.now)
	d.Forced = false
	switch {
	case it.Hold:
		if it.Time.IsZero() {
			d.Reasons = ReasonNoTime
		}
		d.Keep = true
		d.Reasons |= ReasonHold
		d.DeletableAt = time.Time{}
	case it.Force:
		*d = Decision{Skew: d.Skew, Forced: true}
	case it.Time.IsZero():
		d.Keep = true
		d.Reasons = ReasonNoTime
		d.DeletableAt = time.Time{}
	}
	if d.Skew {
		e.skewed++
	}
	if d.Keep {
		e.kept++
		e.next = earliest(e.next, d.DeletableAt)
	}
}

// keepUntil marks d kept for reason r until the instant until (zero: not by
// time alone). When several rules keep an item, it stays until the last of
// them lets it go.
func (d *Decision) keepUntil(r Reason, until time.Time) {
	if !d.Keep {
		d.Keep = true
		d.Reasons = r
		d.DeletableAt = until
		return
	}
	d.Reasons |= r
	d.DeletableAt = latest(d.DeletableAt, until)
}

// latest returns the later of two release instants, where zero means never.
func latest(a, b time.Time) time.Time {
	if a.IsZero() || b.IsZero() {
		return time.Time{}
	}
	if b.After(a) {
		return b
	}
	return a
}

// earliest returns the earlier of two release instants, where zero means
// never.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() {
		return b
	}
	if b.IsZero() || a.Before(b) {
		return a
	}
	return b
}

// evaluation is the per-call state shared by the policies of one Evaluate,
// kept in Result so that its buffers are reused.
type evaluation struct {
	now   time.Time
	items []Item

	// ranked holds the present items (Time not zero, not after now, not
	// forced), newest first; built on first use.
	ranked    []rankKey
	tmp       []rankKey // scratch for sorting ranked
	rankedOK  bool
	firstSkew time.Time // earliest Time after now; zero when none

	bufs  [][]Decision // scratch decisions for composites, one per depth
	depth int

	// top is true while the policy Evaluate called has not yet handed work
	// to another: that policy may then apply finish itself, in the same
	// pass, and set finished.
	top, finished bool
	// Totals gathered by finish.
	kept, skewed int
	next         time.Time
}

type rankKey struct {
	sec  int64 // Unix seconds, floored
	nsec int32
	idx  int32
}

func (e *evaluation) reset(now time.Time, items []Item) {
	e.now = now
	e.items = items
	e.ranked = e.ranked[:0]
	e.rankedOK = false
	e.firstSkew = time.Time{}
	e.depth = 0
	e.top, e.finished = false, false
	e.kept, e.skewed = 0, 0
	e.next = time.Time{}
}

// rank returns the present items newest first: later Time first, equal Times
// by ID, then by position in the input.
func (e *evaluation) rank() []rankKey {
	if e.rankedOK {
		return e.ranked
	}
	e.rankedOK = true
	for i := range e.items {
		it := &e.items[i]
		t := it.Time
		switch {
		case t.IsZero(), it.Force && !it.Hold:
			// Unknown age, or deleted whatever the policy says: neither may
			// take a place among the newest, or a forced deletion of the
			// newest item would take the next one with it.
		case t.After(e.now):
			if e.firstSkew.IsZero() || t.Before(e.firstSkew) {
				e.firstSkew = t
			}
		default:
			e.ranked = append(e.ranked, rankKey{sec: t.Unix(), nsec: int32(t.Nanosecond()), idx: int32(i)})
		}
	}
	e.tmp = sortNewestFirst(e.ranked, e.tmp, e.items)
	return e.ranked
}

// startRanked prepares out for a policy that ranks items: every decision is
// reset to delete, and items whose Time is after now are kept with
// ReasonFuture until their Time, when they are judged for the first time.
func (e *evaluation) startRanked(out []Decision) []rankKey {
	e.top = false
	ranked := e.rank()
	for i := range out {
		out[i] = Decision{}
		if t := e.items[i].Time; t.After(e.now) {
			out[i].keepUntil(ReasonFuture, t)
		}
	}
	return ranked
}

// finishRanked bounds the release instants of the kept present items by the
// first future Time: when that item's Time comes it joins the ranking, and
// every decision may change.
func (e *evaluation) finishRanked(out []Decision) {
	if e.firstSkew.IsZero() {
		return
	}
	for _, k := range e.ranked {
		if d := &out[k.idx]; d.Keep {
			d.DeletableAt = earliest(d.DeletableAt, e.firstSkew)
		}
	}
}

// scratch returns a decision buffer for the current composite depth.
func (e *evaluation) scratch(n int) []Decision {
	e.top = false
	for len(e.bufs) <= e.depth {
		e.bufs = append(e.bufs, nil)
	}
	b := slices.Grow(e.bufs[e.depth][:0], n)[:n]
	e.bufs[e.depth] = b
	e.depth++
	return b
}

func (e *evaluation) release() { e.depth-- }

func checkCount(path, field string, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: %s%s = %d: must not be negative", ErrInvalidPolicy, path, field, n)
	}
	return nil
}

func checkDuration(path, field string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: %s%s = %s: must not be negative", ErrInvalidPolicy, path, field, d)
	}
	return nil
}
