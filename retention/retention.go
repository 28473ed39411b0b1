package retention

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrInvalidPolicy is returned, wrapped with the offending field and value,
// when Evaluate is given a policy it cannot apply (a negative count, a
// negative duration, an empty composite). Test for it with errors.Is.
var ErrInvalidPolicy = errclass.Terminal("retention: invalid policy")

// ErrInvalidConfig is returned, wrapped with the offending field and value,
// when Options.Evaluate is given Options it cannot apply (a negative
// MaxDeletions, an unknown TieBreak): a mistake in the caller's code, not in
// a policy read from an object. Test for it with errors.Is.
var ErrInvalidConfig = errclass.Terminal("retention: invalid configuration")

// Item is one thing that may be deleted: a backup, a claim, a finished task.
type Item struct {
	// ID names the item in the caller's terms (a name, a UID, an object key).
	// By default it breaks ties between items with equal Times, so that
	// decisions do not depend on the order of the input: of two items with
	// the same Time, the one whose ID sorts first counts as the newer (see
	// Options.TieBreak for restic's input order).
	ID string
	// Time is the instant the policy measures from: a creation timestamp, a
	// finish time, an annotation's RFC 3339 timestamp, a deletion timestamp.
	// An item with the zero Time is never deleted by a policy (see NoTime).
	// Its Location matters only to a Calendar with ItemZone set, which
	// buckets the item in the offset it was recorded with, as restic does.
	Time time.Time
	// Group names the set the item is judged in: a backup target, a
	// schedule, restic's host and paths. Ranking policies (Newest, Calendar,
	// Exponential) and the newest-successful guard apply to each group on
	// its own, so that one target's backups never push out another's. The
	// empty Group is a group like any other; when every item has the same
	// Group, there is one group.
	Group string
	// Tags are labels a Calendar's Tags option matches (restic's
	// --keep-tag).
	Tags []string
	// Outcome says whether the item is a successful or a failed attempt
	// (a backup that completed or one that failed). The zero Outcome,
	// OutcomeUnspecified, means the caller does not say: such an item ranks
	// like a successful one and the guard protects it like one, because an
	// unknown outcome is read the safe way. Callers that judge things which
	// are not attempts (claims, finished tasks), or that evaluate one item
	// at a time, turn the guard off with Options.AllowDeleteNewest.
	Outcome Outcome
	// Hold keeps the item whatever the policy and Force say.
	Hold bool
	// Force deletes the item whatever the policy says, unless Hold is set.
	// A forced item takes no place among the newest: the next item moves up,
	// so forcing the deletion of the newest backup does not take the second
	// newest with it.
	Force bool
}

// Outcome is how the attempt an item records ended.
type Outcome uint8

// The outcomes of an item.
const (
	// OutcomeUnspecified: the caller does not say how the attempt ended, or
	// the item is not an attempt. It ranks like a successful item, and the
	// guard protects it like one (the safe reading of an unknown outcome).
	OutcomeUnspecified Outcome = iota
	// OutcomeSucceeded: the item is a good backup. It takes part in
	// ranking, and the newest one of each group is protected by the guard
	// (see Options).
	OutcomeSucceeded
	// OutcomeFailed: the item is a failed attempt. It never takes a place
	// among the newest, in a bucket or in a span: no failed item displaces
	// a successful one, and "the newest item" that Within spans count from
	// is the newest item that did not fail. Failed items are kept only by
	// TTL, a tag, Hold, their own counts (Calendar.Failed, Newest.Failed)
	// or an empty Calendar, never by the guard.
	OutcomeFailed
)

func (o Outcome) String() string {
	switch o {
	case OutcomeUnspecified:
		return "unspecified"
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeFailed:
		return "failed"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Reason is a set of reasons an item is kept. Several may hold at once.
type Reason uint32

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
	// Decision.Oldest says which bucket rules.
	ReasonOldest
	// ReasonTag: the item has every tag of one of Calendar.Tags.
	ReasonTag
	// ReasonWithinHourly: the item is the newest of its hour, within
	// Calendar.WithinHourly of the newest item (restic's
	// --keep-within-hourly).
	ReasonWithinHourly
	// ReasonWithinDaily: as ReasonWithinHourly, for days.
	ReasonWithinDaily
	// ReasonWithinWeekly: as ReasonWithinHourly, for ISO weeks.
	ReasonWithinWeekly
	// ReasonWithinMonthly: as ReasonWithinHourly, for months.
	ReasonWithinMonthly
	// ReasonWithinYearly: as ReasonWithinHourly, for years.
	ReasonWithinYearly
	// ReasonFailed: the item failed and is among the newest failed items
	// kept by Calendar.Failed or Newest.Failed.
	ReasonFailed
	// ReasonGuard: the item is the newest successful item of its group,
	// which the guard never lets go (see Options.AllowDeleteNewest).
	ReasonGuard
	// ReasonMaxDeletions: the policy would delete the item, but it would
	// delete more than Options.MaxDeletions items, so nothing is deleted.
	ReasonMaxDeletions
	reasonEnd
)

var reasonNames = [...]string{
	"hold", "no-time", "future", "empty-policy", "ttl", "newest", "current-hour",
	"hourly", "daily", "weekly", "monthly", "yearly", "within", "oldest",
	"tag", "within-hourly", "within-daily", "within-weekly", "within-monthly",
	"within-yearly", "failed", "guard", "max-deletions",
}

// String lists the reasons, separated by "+", e.g. "ttl+newest"; "none" for
// the empty set.
func (r Reason) String() string {
	if r == 0 {
		return "none"
	}
	var parts []string
	for r != 0 {
		i := bits.TrailingZeros32(uint32(r))
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
	// Oldest holds the bucket reasons (ReasonHourly ... ReasonYearly,
	// ReasonWithinHourly ... ReasonWithinYearly) for which a Calendar kept
	// the item only because it is the oldest and the rule had room left
	// (restic's "oldest daily snapshot"). Reasons then has ReasonOldest.
	Oldest Reason
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
	// FailedKept and FailedDeleted count, of Kept and Deleted, the items
	// whose Outcome is Failed.
	FailedKept, FailedDeleted int
	// Skewed counts the items whose Time is after now.
	Skewed int
	// Groups has one entry per distinct Item.Group, ordered by Group: the
	// report of a group-by evaluation. It is empty when there are no items.
	Groups []GroupResult

	ev evaluation
}

// GroupResult sums up the decisions about the items of one group.
type GroupResult struct {
	// Group is the Item.Group the items share.
	Group string
	// Kept, Deleted, FailedKept and FailedDeleted count the group's
	// decisions, as the Result's fields of the same names do.
	Kept, Deleted, FailedKept, FailedDeleted int
	// Guarded is the index, in the items passed to Evaluate, of the group's
	// newest item that did not fail, which the guard kept; -1 when the guard
	// is off or the group has no present, unforced item that did not fail.
	Guarded int
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

// ErrTooManyDeletions is returned, wrapped with the cap and the count, when
// an evaluation would delete more items than Options.MaxDeletions allows.
// Test for it with errors.Is.
var ErrTooManyDeletions = errclass.Retryable("retention: too many deletions")

// TieBreak says how items with equal Times are ranked.
type TieBreak uint8

// The ways to break ties between equal Times.
const (
	// TieByID, the default, ranks the item whose ID sorts first as the
	// newer, then the one first in the input: decisions do not depend on the
	// order of the input when IDs are unique.
	TieByID TieBreak = iota
	// TieByInput ranks the item first in the input as the newer, as
	// restic's stable sort of its snapshot list does. Use it to reproduce
	// restic's decisions exactly; decisions then depend on the input order.
	TieByInput
)

// Options adjusts an evaluation. The zero Options is the default used by
// Evaluate: the guard is on, there is no cap, and ties are broken by ID.
type Options struct {
	// AllowDeleteNewest turns off the guard. With the guard on, the newest
	// item of each group that did not fail (Outcome OutcomeSucceeded or
	// OutcomeUnspecified) is always kept (ReasonGuard), whatever the policy
	// says, unless it is forced: a policy cannot delete the last good backup
	// (rancher #36492). An item whose Outcome is unset is guarded too, so
	// that a caller who forgets to set it keeps its newest backup rather
	// than losing the guard without a word. Set AllowDeleteNewest to judge
	// things that are not attempts (claims, finished tasks) by their policy
	// alone, and when evaluating one item at a time (each backup with its
	// own TTL), where the guard would keep every item.
	AllowDeleteNewest bool
	// MaxDeletions caps the number of items a policy may delete in one
	// evaluation: when the policy would delete more, Evaluate keeps every
	// one of them (ReasonMaxDeletions) and returns an error wrapping
	// ErrTooManyDeletions, so that a mistyped policy or a clock jump
	// becomes a clear error instead of a mass deletion. Forced items are
	// deleted and not counted. 0 means no cap; negative values are invalid.
	MaxDeletions int
	// TieBreak says how equal Times are ranked; the zero value is TieByID.
	TieBreak TieBreak
}

func (o Options) check() error {
	if o.MaxDeletions < 0 {
		return fmt.Errorf("%w: Options.MaxDeletions = %d: must not be negative (0 means no cap)", ErrInvalidConfig, o.MaxDeletions)
	}
	if o.TieBreak > TieByInput {
		return fmt.Errorf("%w: Options.TieBreak = %d: must be TieByID or TieByInput", ErrInvalidConfig, o.TieBreak)
	}
	return nil
}

// Evaluate applies p to items at the instant now with the default Options
// (the guard on, no cap, ties by ID); see Options.Evaluate.
func Evaluate(p Policy, now time.Time, items []Item, res *Result) error {
	return Options{}.Evaluate(p, now, items, res)
}

// Evaluate applies p to items at the instant now and stores a decision per
// item in res, reusing res's memory. Items are judged per Group. Afterwards,
// for every item:
//
//   - Hold keeps it (ReasonHold), whatever Force and the policy say;
//   - otherwise Force deletes it (Decision.Forced);
//   - otherwise an item with the zero Time is kept (ReasonNoTime);
//   - otherwise the policy decides, and the guard keeps the newest item of
//     each group that did not fail (ReasonGuard) unless AllowDeleteNewest
//     is set;
//   - then, if more than MaxDeletions items would be deleted by the policy,
//     none is (ReasonMaxDeletions) and the error wraps ErrTooManyDeletions.
//
// Evaluate leaves res empty and returns an error wrapping ErrInvalidPolicy
// when p is nil or misconfigured, or one wrapping ErrInvalidConfig when o is
// invalid. It does not read the clock
// and does not modify items.
func (o Options) Evaluate(p Policy, now time.Time, items []Item, res *Result) error {
	res.Decisions = res.Decisions[:0]
	res.Groups = res.Groups[:0]
	res.Next = time.Time{}
	res.Kept, res.Deleted, res.Skewed = 0, 0, 0
	res.FailedKept, res.FailedDeleted = 0, 0
	if p == nil {
		return fmt.Errorf("%w: nil Policy", ErrInvalidPolicy)
	}
	if err := o.check(); err != nil {
		return err
	}
	if err := p.check(""); err != nil {
		return err
	}
	now = now.Round(0) // compare wall clocks only, like stored timestamps
	res.Decisions = slices.Grow(res.Decisions, len(items))[:len(items)]
	out := res.Decisions
	e := &res.ev
	e.reset(now, items, o)
	guard := !o.AllowDeleteNewest && e.anyGuardable
	// The single-pass fast path of a lone policy needs no per-group or
	// per-outcome pass afterwards.
	e.top = !guard && o.MaxDeletions == 0 && len(e.groups) <= 1 && !e.anyFailed
	p.eval(e, out)
	if guard {
		e.guard(out)
	}
	if !e.finished {
		for i := range out {
			e.finish(&items[i], &out[i])
		}
	}
	res.Next, res.Kept, res.Skewed = e.next, e.kept, e.skewed
	res.Deleted = len(items) - e.kept
	var err error
	if o.MaxDeletions > 0 {
		err = e.cap(o.MaxDeletions, out, res)
	}
	e.report(out, res)
	e.items = nil // do not keep the caller's items alive
	clear(e.gkeys)
	return err
}

// cap keeps every item the policy would delete when there are more than max
// of them.
func (e *evaluation) cap(max int, out []Decision, res *Result) error {
	n := 0
	for i := range out {
		if !out[i].Keep && !out[i].Forced {
			n++
		}
	}
	if n <= max {
		return nil
	}
	for i := range out {
		if d := &out[i]; !d.Keep && !d.Forced {
			*d = Decision{Keep: true, Skew: d.Skew, Reasons: ReasonMaxDeletions}
		}
	}
	res.Kept += n
	res.Deleted -= n
	return fmt.Errorf("%w: Options.MaxDeletions = %d: the policy would delete %d of %d items; nothing is deleted", ErrTooManyDeletions, max, n, len(out))
}

// report fills the failed counts and the per-group summaries.
func (e *evaluation) report(out []Decision, res *Result) {
	if len(e.items) == 0 {
		return
	}
	res.Groups = slices.Grow(res.Groups, len(e.groups))[:len(e.groups)]
	for g := range e.groups {
		res.Groups[g] = GroupResult{Group: e.groups[g].key, Guarded: e.groups[g].guarded}
	}
	if len(e.groups) == 1 && !e.anyFailed {
		res.Groups[0].Kept, res.Groups[0].Deleted = res.Kept, res.Deleted
		return
	}
	for i := range out {
		g := &res.Groups[0]
		if len(e.groups) > 1 {
			g = &res.Groups[e.gidx[i]]
		}
		failed := e.items[i].Outcome == OutcomeFailed
		switch {
		case out[i].Keep && failed:
			g.Kept++
			g.FailedKept++
			res.FailedKept++
		case out[i].Keep:
			g.Kept++
		case failed:
			g.Deleted++
			g.FailedDeleted++
			res.FailedDeleted++
		default:
			g.Deleted++
		}
	}
}

// guard keeps the newest item of each group that did not fail: succeeded,
// or of unknown outcome, read the safe way.
func (e *evaluation) guard(out []Decision) {
	if !e.rankedOK {
		// The policy did not rank (a TTL, a MaxAge): one pass finds each
		// group's newest item, where a ranking would sort them all.
		e.guardLinear(out)
		return
	}
	for gi := range e.rank() {
		g := &e.groups[gi]
		for _, k := range g.ok { // g.ok holds no failed item
			d := &out[k.idx]
			d.keepUntil(ReasonGuard, time.Time{})
			// When an item from the future arrives it may be the newer
			// successful one.
			d.DeletableAt = earliest(d.DeletableAt, g.firstSkew)
			g.guarded = int(k.idx)
			break
		}
	}
}

// guardLinear is guard in one pass over the items, for when nothing ranked
// them: it takes, in each group, the item rank would put first among those
// that did not fail (present: a Time, not after now, not forced; newest,
// ties broken as rank breaks them), and notes each group's earliest Time
// after now.
func (e *evaluation) guardLinear(out []Decision) {
	multi := len(e.groups) > 1
	e.newest = slices.Grow(e.newest[:0], len(e.groups))[:len(e.groups)]
	for i := range e.newest {
		e.newest[i] = -1
	}
	for i := range e.items {
		it := &e.items[i]
		t := it.Time
		gi := int32(0)
		if multi {
			gi = e.gidx[i]
		}
		switch {
		case t.IsZero(), it.Force && !it.Hold, it.Outcome == OutcomeFailed && !t.After(e.now):
			continue
		case t.After(e.now):
			if g := &e.groups[gi]; g.firstSkew.IsZero() || t.Before(g.firstSkew) {
				g.firstSkew = t
			}
			continue
		}
		b := e.newest[gi]
		if b < 0 {
			e.newest[gi] = int32(i)
			continue
		}
		bt := e.items[b].Time
		if t.After(bt) || (t.Equal(bt) && !e.tieByInput && it.ID < e.items[b].ID) {
			e.newest[gi] = int32(i)
		}
	}
	for gi, b := range e.newest {
		if b < 0 {
			continue
		}
		g := &e.groups[gi]
		d := &out[b]
		d.keepUntil(ReasonGuard, time.Time{})
		d.DeletableAt = earliest(d.DeletableAt, g.firstSkew)
		g.guarded = int(b)
	}
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
		d.Oldest = 0
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
	now        time.Time
	items      []Item
	tieByInput bool

	// anyGuardable reports whether some item did not fail (the guard may
	// keep it); anyFailed whether some item failed.
	anyGuardable, anyFailed bool

	// groups has one entry per distinct Item.Group, ordered by Group; gidx
	// maps each item to its group when there are several.
	groups []group
	gidx   []int32
	gmap   map[string]uint64 // group key -> generation<<32 | index
	gen    uint32
	gkeys  []string
	gorder []int32
	counts []int32
	cls    []int32 // class of each ranked item, by input position

	// ranked holds the present items (Time not zero, not after now, not
	// forced) by group, successful before failed, newest first; built on
	// first use. The groups' ok and failed slices point into it.
	ranked   []rankKey
	tmp      []rankKey // scratch for sorting ranked
	rankedOK bool
	newest   []int32 // guardLinear's newest item of each group; -1 when none

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

// group is one group's share of the ranking.
type group struct {
	key string
	// ok holds the group's present items that did not fail, failed those
	// that did, each newest first.
	ok, failed []rankKey
	firstSkew  time.Time // earliest Time after now in the group; zero when none
	guarded    int
}

type rankKey struct {
	sec  int64 // Unix seconds, floored
	nsec int32
	idx  int32
}

// reset prepares e to evaluate items at now: it groups them, reusing every
// buffer of the last evaluation. Long for a reason: the buffers are reused
// in place so that an evaluation in steady state allocates nothing (the
// benchmarks' allocs/op), which a split into functions returning slices
// would give up.
func (e *evaluation) reset(now time.Time, items []Item, o Options) {
	e.now = now
	e.items = items
	e.tieByInput = o.TieBreak == TieByInput
	e.ranked = e.ranked[:0]
	e.rankedOK = false
	e.depth = 0
	e.top, e.finished = false, false
	e.kept, e.skewed = 0, 0
	e.next = time.Time{}
	e.anyGuardable, e.anyFailed = false, false
	multi := false
	for i := range items {
		if items[i].Outcome == OutcomeFailed {
			e.anyFailed = true
		} else {
			e.anyGuardable = true
		}
		if !multi && items[i].Group != items[0].Group {
			multi = true
		}
	}
	e.groups = e.groups[:0]
	if len(items) == 0 {
		return
	}
	if !multi {
		e.groups = append(e.groups, group{key: items[0].Group, guarded: -1})
		return
	}
	// Several groups: number them by first appearance, then renumber them
	// in the order of their keys, so that the report does not depend on the
	// input order.
	//
	// The map outlives the call, its values tagged with the evaluation's
	// generation, because clearing a large map and filling it again
	// allocates; it is cleared only when stale keys outnumber live ones.
	if e.gmap == nil {
		e.gmap = make(map[string]uint64)
	}
	e.gen++
	if e.gen == 0 {
		clear(e.gmap)
		e.gen = 1
	}
	gen := uint64(e.gen) << 32
	e.gkeys = e.gkeys[:0]
	e.gidx = slices.Grow(e.gidx[:0], len(items))[:len(items)]
	last, lastG := items[0].Group, int32(-1)
	for i := range items {
		k := items[i].Group
		if lastG < 0 || k != last {
			v, ok := e.gmap[k]
			g := int32(uint32(v))
			if !ok || v&^(1<<32-1) != gen {
				g = int32(len(e.gkeys))
				e.gmap[k] = gen | uint64(uint32(g))
				e.gkeys = append(e.gkeys, k)
			}
			last, lastG = k, g
		}
		e.gidx[i] = lastG
	}
	if len(e.gmap) > 2*len(e.gkeys)+64 {
		clear(e.gmap) // mostly stale: let the old keys go
	}
	n := len(e.gkeys)
	e.gorder = slices.Grow(e.gorder[:0], 2*n)[:n]
	for g := range e.gorder {
		e.gorder[g] = int32(g)
	}
	keys := e.gkeys
	slices.SortFunc(e.gorder, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
	remap := e.gorder[n : 2*n]
	for newG, oldG := range e.gorder {
		remap[oldG] = int32(newG)
	}
	for i := range e.gidx {
		e.gidx[i] = remap[e.gidx[i]]
	}
	e.groups = slices.Grow(e.groups, n)[:n]
	for newG, oldG := range e.gorder {
		e.groups[newG] = group{key: keys[oldG], guarded: -1}
	}
}

// rank returns the groups with their present items ranked: later Time
// first, equal Times by ID then by position in the input (or by position
// alone with TieByInput). Long for the same reason as reset: it sorts in
// place, in buffers kept across evaluations.
func (e *evaluation) rank() []group {
	if e.rankedOK {
		return e.groups
	}
	e.rankedOK = true
	multi := len(e.groups) > 1
	anyFailed := false
	for i := range e.items {
		it := &e.items[i]
		t := it.Time
		switch {
		case t.IsZero(), it.Force && !it.Hold:
			// Unknown age, or deleted whatever the policy says: neither may
			// take a place among the newest, or a forced deletion of the
			// newest item would take the next one with it.
		case t.After(e.now):
			g := &e.groups[0]
			if multi {
				g = &e.groups[e.gidx[i]]
			}
			if g.firstSkew.IsZero() || t.Before(g.firstSkew) {
				g.firstSkew = t
			}
		default:
			e.ranked = append(e.ranked, rankKey{sec: t.Unix(), nsec: int32(t.Nanosecond()), idx: int32(i)})
			anyFailed = anyFailed || it.Outcome == OutcomeFailed
		}
	}
	if len(e.groups) == 0 {
		return e.groups
	}
	if !multi && !anyFailed {
		e.tmp = sortNewestFirst(e.ranked, e.tmp, e.items, e.tieByInput)
		e.groups[0].ok, e.groups[0].failed = e.ranked, nil
		return e.groups
	}
	// Ties are broken by ID within each class only: items of different
	// groups often share a scheduled instant, and ordering those long runs
	// by ID would cost more than the rest of the ranking.
	// A stable counting sort by (group, failed) keeps the ranking within
	// each class.
	classes := 2 * len(e.groups)
	e.counts = slices.Grow(e.counts[:0], classes+1)[:classes+1]
	clear(e.counts)
	// The class of each ranked item, by input position, read in input
	// order: the placement below then reads a small array, not the items.
	e.cls = slices.Grow(e.cls[:0], len(e.items))[:len(e.items)]
	for _, k := range e.ranked {
		c := int32(0)
		if multi {
			c = 2 * e.gidx[k.idx]
		}
		if e.items[k.idx].Outcome == OutcomeFailed {
			c++
		}
		e.cls[k.idx] = c
		e.counts[c+1]++
	}
	class := func(k rankKey) int32 { return e.cls[k.idx] }
	e.tmp = sortByInstant(e.ranked, e.tmp, e.items)
	for c := 1; c <= classes; c++ {
		e.counts[c] += e.counts[c-1]
	}
	for g := range e.groups {
		s, m, end := e.counts[2*g], e.counts[2*g+1], e.counts[2*g+2]
		e.groups[g].ok = e.ranked[s:m:m]
		e.groups[g].failed = e.ranked[m:end:end]
	}
	e.tmp = slices.Grow(e.tmp[:0], len(e.ranked))[:len(e.ranked)]
	for _, k := range e.ranked {
		c := class(k)
		e.tmp[e.counts[c]] = k
		e.counts[c]++
	}
	copy(e.ranked, e.tmp)
	if !e.tieByInput {
		for g := range e.groups {
			sortTies(e.groups[g].ok, e.items)
			sortTies(e.groups[g].failed, e.items)
		}
	}
	return e.groups
}

// startRanked prepares out for a policy that ranks items: every decision is
// reset to delete, and items whose Time is after now are kept with
// ReasonFuture until their Time, when they are judged for the first time.
func (e *evaluation) startRanked(out []Decision) []group {
	e.top = false
	groups := e.rank()
	for i := range out {
		out[i] = Decision{}
		if t := e.items[i].Time; t.After(e.now) {
			out[i].keepUntil(ReasonFuture, t)
		}
	}
	return groups
}

// finishRanked bounds the release instants of the kept present items by the
// first future Time of their group: when that item's Time comes it joins the
// ranking, and every decision in the group may change.
func (e *evaluation) finishRanked(out []Decision) {
	for gi := range e.groups {
		g := &e.groups[gi]
		if g.firstSkew.IsZero() {
			continue
		}
		for _, ks := range [2][]rankKey{g.ok, g.failed} {
			for _, k := range ks {
				if d := &out[k.idx]; d.Keep {
					d.DeletableAt = earliest(d.DeletableAt, g.firstSkew)
				}
			}
		}
	}
}

// keepFailed keeps the n newest of a group's failed items (all of them for
// Unlimited).
func keepFailed(failed []rankKey, n int, out []Decision) {
	for r, k := range failed {
		if n != Unlimited && r >= n {
			break
		}
		out[k.idx].keepUntil(ReasonFailed, time.Time{})
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
