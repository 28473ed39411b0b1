package retention

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Unlimited, as a Calendar count, keeps the newest item of every bucket
// (restic's "unlimited").
const Unlimited = -1

// Calendar keeps items in calendar buckets the way restic's "forget" does,
// for each group of items (Item.Group) on its own. An item is kept when any
// option keeps it:
//
//   - Last: the Last newest items (--keep-last);
//   - Hourly, Daily, Weekly, Monthly, Yearly: for the newest n hours (days,
//     ISO weeks starting on Monday, months, years) that hold at least one
//     item, the newest item of each (--keep-hourly and so on);
//   - WithinSpan: every item less than a calendar Span older than the newest
//     item (--keep-within 1y2m3d4h); Within does the same with a fixed
//     time.Duration;
//   - WithinHourly ... WithinYearly: the newest item of every hour (day, ...)
//     less than a Span older than the newest item (--keep-within-hourly and
//     so on);
//   - Tags: every item that has all the tags of one of the lists
//     (--keep-tag; a list [""] matches the items that have no tag);
//   - Failed: the Failed newest items whose Outcome is Failed.
//
// "The newest item" is the newest present item that did not fail: a failed
// item never takes a place among the newest, in a bucket or in a span (see
// Failed). An item exactly a span older than the newest is not within it.
//
// As restic does since 0.17, when a bucket option (counted or within) still
// has room after the oldest bucket, the oldest item is kept too
// (ReasonOldest, with Decision.Oldest naming the option), so that the history
// kept is as long as the counts allow.
//
// A count of 0 turns an option off; Unlimited keeps one item per bucket for
// every bucket. The zero Calendar has no option set and, like restic's empty
// policy, keeps every item (ReasonEmptyPolicy), failed ones included.
//
// Buckets and spans are computed in Location (UTC when nil); with ItemZone,
// each item is bucketed in the zone of its own Time and spans are counted in
// the zone of the newest item, as restic does with the offset each snapshot
// was recorded with.
//
// Differences from restic, by design: items whose Time is after now, forced
// items and failed items take no part in the counting (restic counts every
// snapshot, future ones included); restic's whole-list "oldest" rule then
// applies to the oldest counted item. See the package documentation for the
// full table.
//
// Calendar decisions do not change with time alone: DeletableAt is zero for
// every item it keeps, unless an item with a future Time exists.
type Calendar struct {
	// Counts of items or buckets to keep: 0 is off, Unlimited keeps all,
	// other negative values are invalid.
	Last, Hourly, Daily, Weekly, Monthly, Yearly int
	// Within keeps the items less than Within older than the newest item; 0
	// is off, negative values are invalid. It is a fixed duration; prefer
	// WithinSpan for restic's calendar units.
	Within time.Duration
	// WithinSpan keeps the items less than a calendar Span older than the
	// newest item (restic's --keep-within).
	WithinSpan Span
	// WithinHourly ... WithinYearly keep the newest item of each bucket less
	// than a Span older than the newest item (restic's --keep-within-hourly
	// and so on).
	WithinHourly, WithinDaily, WithinWeekly, WithinMonthly, WithinYearly Span
	// Tags keeps every item that has all the tags of at least one list (AND
	// within a list, OR across lists). The list [""] matches items without
	// tags. An empty list, or a tag with a comma, plus, equals sign, space or
	// control character, is invalid.
	Tags [][]string
	// Failed keeps the Failed newest items whose Outcome is Failed
	// (KubeStash's failedSnapshots.last); 0 keeps none of them, Unlimited all.
	Failed int
	// Location is the time zone buckets and spans are computed in; nil is
	// UTC.
	Location *time.Location
	// ItemZone buckets each item in the zone of its own Time (its recorded
	// offset), as restic does. Location must then be nil.
	ItemZone bool
}

func (p Calendar) check(path string) error {
	for _, c := range [...]struct {
		name string
		n    int
	}{
		{"Last", p.Last}, {"Hourly", p.Hourly}, {"Daily", p.Daily},
		{"Weekly", p.Weekly}, {"Monthly", p.Monthly}, {"Yearly", p.Yearly},
		{"Failed", p.Failed},
	} {
		if c.n < Unlimited {
			return fmt.Errorf("%w: %sCalendar.%s = %d: must be a count or Unlimited", ErrInvalidPolicy, path, c.name, c.n)
		}
	}
	if err := checkDuration(path, "Calendar.Within", p.Within); err != nil {
		return err
	}
	for i, sp := range p.spans() {
		if err := sp.check(path, spanFields[i]); err != nil {
			return err
		}
	}
	for i, l := range p.Tags {
		if len(l) == 0 {
			return fmt.Errorf("%w: %sCalendar.Tags[%d] is empty: it would match every item; use [\"\"] for items without tags", ErrInvalidPolicy, path, i)
		}
		for j, t := range l {
			if strings.ContainsFunc(t, badTagRune) {
				return fmt.Errorf("%w: %sCalendar.Tags[%d][%d] = %q: a tag has no comma, plus, equals sign, space or control character", ErrInvalidPolicy, path, i, j, t)
			}
		}
	}
	if p.ItemZone && p.Location != nil {
		return fmt.Errorf("%w: %sCalendar.ItemZone is set with Calendar.Location = %q: choose one", ErrInvalidPolicy, path, p.Location)
	}
	return nil
}

func badTagRune(r rune) bool {
	return r == ',' || r == '+' || r == '=' || r <= ' ' || r == 0x7f
}

var spanFields = [...]string{
	"Calendar.WithinSpan", "Calendar.WithinHourly", "Calendar.WithinDaily",
	"Calendar.WithinWeekly", "Calendar.WithinMonthly", "Calendar.WithinYearly",
}

// spans returns WithinSpan and the within-bucket spans, in the order of
// spanFields.
func (p *Calendar) spans() [6]Span {
	return [6]Span{p.WithinSpan, p.WithinHourly, p.WithinDaily, p.WithinWeekly, p.WithinMonthly, p.WithinYearly}
}

// isEmpty reports whether no keep option is set (restic's empty policy).
func (p *Calendar) isEmpty() bool {
	return p.Last == 0 && p.Hourly == 0 && p.Daily == 0 && p.Weekly == 0 &&
		p.Monthly == 0 && p.Yearly == 0 && p.Within == 0 && p.Failed == 0 &&
		len(p.Tags) == 0 && p.spans() == [6]Span{}
}

// matchTags returns the index of the first tag list it has, or -1; the rule
// is restic's Snapshot.HasTags.
func (p *Calendar) matchTags(it *Item) int {
	for i, l := range p.Tags {
		if hasTags(it.Tags, l) {
			return i
		}
	}
	return -1
}

func hasTags(have, want []string) bool {
	for _, t := range want {
		if t == "" && len(have) == 0 {
			return true
		}
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}

const (
	secHour = 3600
	secDay  = 24 * secHour
	secWeek = 7 * secDay
)

// Calendar buckets, in the order restic evaluates them.
const (
	bucketLast = iota
	bucketHour
	bucketDay
	bucketWeek
	bucketMonth
	bucketYear
	numBuckets
)

var bucketReasons = [numBuckets]Reason{
	ReasonNewest, ReasonHourly, ReasonDaily, ReasonWeekly, ReasonMonthly, ReasonYearly,
}

// withinReasons are the reasons of the within-bucket options, by bucket
// (bucketHour ... bucketYear).
var withinReasons = [numBuckets]Reason{
	0, ReasonWithinHourly, ReasonWithinDaily, ReasonWithinWeekly, ReasonWithinMonthly, ReasonWithinYearly,
}

func (p Calendar) eval(e *evaluation, out []Decision) {
	groups := e.startRanked(out)
	defer e.finishRanked(out)
	if p.isEmpty() {
		for gi := range groups {
			for _, ks := range [2][]rankKey{groups[gi].ok, groups[gi].failed} {
				for _, k := range ks {
					out[k.idx].keepUntil(ReasonEmptyPolicy, time.Time{})
				}
			}
		}
		return
	}
	for gi := range groups {
		p.evalGroup(e, &groups[gi], out)
	}
}

// instant is a point in time as a rank key holds it.
type instant struct {
	sec  int64
	nsec int32
}

func instantOf(t time.Time) instant { return instant{t.Unix(), int32(t.Nanosecond())} }

// after reports whether k is after the instant c.
func (c instant) before(k rankKey) bool {
	return k.sec > c.sec || k.sec == c.sec && k.nsec > c.nsec
}

// evalGroup decides the group's items by the calendar's rules. Its loop is
// kept in one piece for a reason: it is the evaluation's hot path (every
// item of every group, BenchmarkCalendar), and its state is a dozen arrays
// indexed by bucket that a split would pass around or allocate.
func (p *Calendar) evalGroup(e *evaluation, g *group, out []Decision) {
	p.keepTagged(e, g, out)
	if p.Failed != 0 {
		keepFailed(g.failed, p.Failed, out)
	}
	ranked := g.ok
	if len(ranked) == 0 {
		return
	}
	loc, within, spans, cuts := p.cuts(e.items[ranked[0].idx].Time)
	anyWithinBucket := spans[1] != (Span{}) || spans[2] != (Span{}) || spans[3] != (Span{}) || spans[4] != (Span{}) || spans[5] != (Span{})
	left := [numBuckets]int{p.Last, p.Hourly, p.Daily, p.Weekly, p.Monthly, p.Yearly}
	civil := p.Monthly != 0 || p.Yearly != 0 || !spans[4].IsZero() || !spans[5].IsZero()
	var (
		prev [numBuckets]int64
		seen [numBuckets]bool
		val  [numBuckets]int64

		wprev [numBuckets]int64
		wseen [numBuckets]bool

		lastDay int64
	)
	for nr, k := range ranked {
		d := &out[k.idx]
		if p.Within > 0 && within.before(k) {
			d.keepUntil(ReasonWithin, time.Time{})
		}
		if !spans[0].IsZero() && cuts[0].before(k) {
			d.keepUntil(ReasonWithin, time.Time{})
		}
		// Local seconds: the wall clock of the zone, as seconds since 1970.
		local := k.sec
		switch {
		case p.ItemZone:
			_, off := e.items[k.idx].Time.Zone()
			local += int64(off)
		case loc != nil:
			_, off := time.Unix(k.sec, 0).In(loc).Zone()
			local += int64(off)
		}
		day := floorDiv(local, secDay)
		val[bucketLast] = int64(nr)
		val[bucketHour] = floorDiv(local, secHour)
		val[bucketDay] = day
		val[bucketWeek] = floorDiv(day+3, 7)      // 1970-01-01 was a Thursday
		if civil && (nr == 0 || day != lastDay) { // items come sorted: most share a day
			y, m, _ := time.Unix(day*secDay, 0).UTC().Date()
			val[bucketMonth] = int64(y)*12 + int64(m)
			val[bucketYear] = int64(y)
			lastDay = day
		}
		oldest := nr == len(ranked)-1
		for b := range numBuckets {
			if left[b] == 0 {
				continue
			}
			if seen[b] && val[b] == prev[b] && !oldest {
				continue
			}
			r := bucketReasons[b]
			if seen[b] && val[b] == prev[b] {
				d.keepUntil(r|ReasonOldest, time.Time{})
				d.Oldest |= r
			} else {
				d.keepUntil(r, time.Time{})
			}
			prev[b], seen[b] = val[b], true
			if left[b] > 0 {
				left[b]--
			}
		}
		if !anyWithinBucket {
			continue
		}
		// restic's keep-within-<bucket>: uncounted, only inside the span,
		// with the same oldest rule.
		for b := bucketHour; b < numBuckets; b++ {
			if spans[b].IsZero() || !cuts[b].before(k) {
				continue
			}
			if wseen[b] && val[b] == wprev[b] && !oldest {
				continue
			}
			r := withinReasons[b]
			if wseen[b] && val[b] == wprev[b] {
				d.keepUntil(r|ReasonOldest, time.Time{})
				d.Oldest |= r
			} else {
				d.keepUntil(r, time.Time{})
			}
			wprev[b], wseen[b] = val[b], true
		}
	}
}

// keepTagged keeps the group's items that carry one of the calendar's
// tags, failed or not.
func (p *Calendar) keepTagged(e *evaluation, g *group, out []Decision) {
	if len(p.Tags) == 0 {
		return
	}
	for _, ks := range [2][]rankKey{g.ok, g.failed} {
		for _, k := range ks {
			if p.matchTags(&e.items[k.idx]) >= 0 {
				out[k.idx].keepUntil(ReasonTag, time.Time{})
			}
		}
	}
}

// cuts returns, for a group whose newest item is at newest, the zone the
// buckets are computed in (nil: UTC or, with ItemZone, each item's own),
// the instant after which Within keeps, and the spans of the keep-within
// rules with the instant after which each keeps.
func (p *Calendar) cuts(newest time.Time) (loc *time.Location, within instant, spans [6]Span, cuts [6]instant) {
	loc = p.Location
	if loc == time.UTC {
		loc = nil
	}
	switch {
	case p.ItemZone:
	case loc != nil:
		newest = newest.In(loc)
	default:
		newest = newest.UTC()
	}
	if p.Within > 0 {
		within = instantOf(newest.Add(-p.Within))
	}
	spans = p.spans()
	for i, sp := range spans {
		if !sp.IsZero() {
			cuts[i] = instantOf(sp.back(newest))
		}
	}
	return loc, within, spans, cuts
}

// floorDiv divides rounding towards negative infinity, so that instants
// before 1970 fall into the right bucket.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
