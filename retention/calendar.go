package retention

import (
	"fmt"
	"time"
)

// Unlimited, as a Calendar count, keeps the newest item of every bucket
// (restic's "unlimited").
const Unlimited = -1

// Calendar keeps items in calendar buckets the way restic's "forget" does.
// An item is kept when any option keeps it:
//
//   - Last: the Last newest items;
//   - Hourly, Daily, Weekly, Monthly, Yearly: for the newest n hours (days,
//     ISO weeks starting on Monday, months, years) that hold at least one
//     item, the newest item of each;
//   - Within: every item less than Within older than the newest item (an
//     item exactly Within older is not kept).
//
// As restic does since 0.17, when a bucket option still has room after the
// oldest bucket, the oldest item is kept too (ReasonOldest along with the
// option's reason), so that the history kept is as long as the counts allow.
//
// A count of 0 turns an option off; Unlimited keeps one item per bucket for
// every bucket. The zero Calendar has no option set and, like restic's empty
// policy, keeps every item (ReasonEmptyPolicy).
//
// Differences from restic, by design: buckets are computed in UTC, never in
// the timestamp's own zone, so that daylight saving time cannot merge or
// split a day; Within is a fixed duration (see ParseDuration: "30d", "2w"),
// not a calendar span of months and years; keep-tag and the
// keep-within-{hourly,daily,...} options do not exist; and items whose Time is
// after now are kept (ReasonFuture) without taking part in the counting,
// while restic counts them.
//
// Calendar decisions do not change with time alone: DeletableAt is zero for
// every item it keeps, unless an item with a future Time exists.
type Calendar struct {
	// Counts of items or buckets to keep: 0 is off, Unlimited keeps all,
	// other negative values are invalid.
	Last, Hourly, Daily, Weekly, Monthly, Yearly int
	// Within keeps the items less than Within older than the newest item; 0
	// is off, negative values are invalid.
	Within time.Duration
}

func (p Calendar) check(path string) error {
	for _, c := range [...]struct {
		name string
		n    int
	}{
		{"Last", p.Last}, {"Hourly", p.Hourly}, {"Daily", p.Daily},
		{"Weekly", p.Weekly}, {"Monthly", p.Monthly}, {"Yearly", p.Yearly},
	} {
		if c.n < Unlimited {
			return fmt.Errorf("%w: %sCalendar.%s = %d: must be a count or Unlimited", ErrInvalidPolicy, path, c.name, c.n)
		}
	}
	return checkDuration(path, "Calendar.Within", p.Within)
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

func (p Calendar) eval(e *evaluation, out []Decision) {
	ranked := e.startRanked(out)
	defer e.finishRanked(out)
	if p == (Calendar{}) {
		for _, k := range ranked {
			out[k.idx].keepUntil(ReasonEmptyPolicy, time.Time{})
		}
		return
	}
	if len(ranked) == 0 {
		return
	}
	var cutSec int64
	var cutNsec int32
	if p.Within > 0 {
		cut := e.items[ranked[0].idx].Time.Add(-p.Within)
		cutSec, cutNsec = cut.Unix(), int32(cut.Nanosecond())
	}
	left := [numBuckets]int{p.Last, p.Hourly, p.Daily, p.Weekly, p.Monthly, p.Yearly}
	civil := p.Monthly != 0 || p.Yearly != 0
	var (
		prev [numBuckets]int64
		seen [numBuckets]bool
		val  [numBuckets]int64

		lastDay int64
	)
	for nr, k := range ranked {
		d := &out[k.idx]
		if p.Within > 0 && (k.sec > cutSec || k.sec == cutSec && k.nsec > cutNsec) {
			d.keepUntil(ReasonWithin, time.Time{})
		}
		day := floorDiv(k.sec, secDay)
		val[bucketLast] = int64(nr)
		val[bucketHour] = floorDiv(k.sec, secHour)
		val[bucketDay] = day
		val[bucketWeek] = floorDiv(day+3, 7)      // 1970-01-01 was a Thursday
		if civil && (nr == 0 || day != lastDay) { // items come sorted: most share a day
			y, m, _ := time.Unix(k.sec, 0).UTC().Date()
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
				r |= ReasonOldest
			}
			d.keepUntil(r, time.Time{})
			prev[b], seen[b] = val[b], true
			if left[b] > 0 {
				left[b]--
			}
		}
	}
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
