package retention

import "time"

// Exponential thins items the way etcd-backup-restore's "Exponential" garbage
// collection policy thins full snapshots. With today the current UTC day:
//
//   - the newest item is always kept (ReasonNewest);
//   - every item from the current hour is kept (ReasonCurrentHour);
//   - from the earlier hours of today, the newest item of each hour
//     (ReasonHourly);
//   - from the 7 days before today, the newest item of each day
//     (ReasonDaily);
//   - from the 4 weeks before those, the newest item of each week, where the
//     weeks are the 7-day blocks ending at the start of today, so
//     [today-14d, today-7d) and so on (ReasonWeekly);
//   - nothing older.
//
// "The last 24 hours" of the upstream documentation is, in its code and here,
// the hours of the current UTC day: at 01:30 UTC only one hour of yesterday's
// items is thinned daily, not hourly.
//
// Deliberate differences from upstream, all at the edges: upstream ends its
// day at 23:59:59 and so puts an item from the last second of an hour into the
// next hour, where this policy uses exact UTC hours; when no item falls
// between 8 and 34 days before today, upstream also lets go of items from 35
// days before today, where here the weekly window is always 4 full weeks; and
// items whose Time is after now are kept (ReasonFuture) and not counted as the
// newest, where upstream would compare them by hour.
//
// Each Item.Group is thinned on its own, and failed items (Outcome Failed)
// are never kept by it: they take no place among the newest.
//
// Exponential has no configuration; its zero value is the policy. Its
// decisions change as time passes: an item kept as the newest of its hour may
// be let go when its day is thinned, and DeletableAt says when.
type Exponential struct{}

func (Exponential) check(string) error { return nil }

func (Exponential) eval(e *evaluation, out []Decision) {
	groups := e.startRanked(out)
	defer e.finishRanked(out)
	for gi := range groups {
		expGroup(groups[gi].ok, e.now.Unix(), out)
	}
}

func expGroup(ranked []rankKey, now int64, out []Decision) {
	if len(ranked) == 0 {
		return
	}
	out[ranked[0].idx].keepUntil(ReasonNewest, time.Time{})
	for j := 1; j < len(ranked); j++ {
		t, newer := ranked[j].sec, ranked[j-1].sec
		if r := expKeeps(t, newer, now); r != 0 {
			out[ranked[j].idx].keepUntil(r, expRelease(t, newer, now))
		}
	}
}

// expKeeps reports why the item at Unix second t, whose newer neighbour is at
// newer, is kept at Unix second now; 0 when it is not.
func expKeeps(t, newer, now int64) Reason {
	hour := floorDiv(now, secHour) * secHour
	today := floorDiv(now, secDay) * secDay
	switch {
	case t >= hour:
		return ReasonCurrentHour
	case t >= today:
		if floorDiv(t, secHour) != floorDiv(newer, secHour) {
			return ReasonHourly
		}
	case t >= today-7*secDay:
		if floorDiv(t, secDay) != floorDiv(newer, secDay) {
			return ReasonDaily
		}
	case t >= today-35*secDay:
		if floorDiv(t-today, secWeek) != floorDiv(newer-today, secWeek) {
			return ReasonWeekly
		}
	}
	return 0
}

// expRelease returns the first instant after now at which expKeeps no longer
// keeps the item at t. Whether it is kept changes only when the hour of t
// ends, when the day of t ends, and at each midnight from 8 to 36 days after
// the day of t (the weekly blocks move by a day every day); the item is
// certainly let go 36 days after its day began.
func expRelease(t, newer, now int64) time.Time {
	day := floorDiv(t, secDay) * secDay
	try := func(at int64) bool { return at > now && expKeeps(t, newer, at) == 0 }
	if at := floorDiv(t, secHour)*secHour + secHour; try(at) {
		return time.Unix(at, 0).UTC()
	}
	if at := day + secDay; try(at) {
		return time.Unix(at, 0).UTC()
	}
	for k := int64(8); k < 36; k++ {
		if at := day + k*secDay; try(at) {
			return time.Unix(at, 0).UTC()
		}
	}
	return time.Unix(max(day+36*secDay, now+1), 0).UTC()
}
