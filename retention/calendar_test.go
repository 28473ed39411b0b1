package retention

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// keptIDs returns the IDs of the kept items, newest first.
func keptIDs(items []Item, res *Result) []string {
	var ids []string
	for i, d := range res.Decisions {
		if d.Keep {
			ids = append(ids, items[i].ID)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		ta, tb := timeOf(items, a), timeOf(items, b)
		if c := tb.Compare(ta); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return ids
}

func timeOf(items []Item, id string) time.Time {
	for _, it := range items {
		if it.ID == id {
			return it.Time
		}
	}
	panic(id)
}

func reasonOf(items []Item, res *Result, id string) Reason {
	for i, it := range items {
		if it.ID == id {
			return res.Decisions[i].Reasons
		}
	}
	panic(id)
}

// snaps builds items named by their RFC 3339 UTC time.
func snaps(ts ...string) []Item {
	items := make([]Item, len(ts))
	for i, s := range ts {
		items[i] = Item{ID: s, Time: at(s)}
	}
	return items
}

func TestCalendarRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  Calendar
		now     string
		items   []Item
		kept    []string
		reasons map[string]Reason
	}{
		{
			name:   "keep-last 2 keeps the two most recent",
			policy: Calendar{Last: 2},
			items:  snaps("2024-03-01T10:00:00Z", "2024-03-01T11:00:00Z", "2024-03-01T12:00:00Z"),
			kept:   []string{"2024-03-01T12:00:00Z", "2024-03-01T11:00:00Z"},
		},
		{
			name:   "keep-hourly keeps the newest of each hour, hours running from :00 to :59",
			policy: Calendar{Hourly: 2},
			items:  snaps("2024-03-01T10:00:00Z", "2024-03-01T10:59:59.999999999Z", "2024-03-01T11:00:00Z", "2024-03-01T11:30:00Z"),
			kept:   []string{"2024-03-01T11:30:00Z", "2024-03-01T10:59:59.999999999Z"},
		},
		{
			name:   "keep-daily counts only days that have a snapshot",
			policy: Calendar{Daily: 2},
			items:  snaps("2024-03-01T10:00:00Z", "2024-03-05T10:00:00Z", "2024-03-05T11:00:00Z", "2024-03-09T10:00:00Z"),
			kept:   []string{"2024-03-09T10:00:00Z", "2024-03-05T11:00:00Z"},
		},
		{
			name:   "days are UTC days: 23:30 at -05:00 belongs to the next UTC day",
			policy: Calendar{Daily: Unlimited},
			items: []Item{
				{ID: "ny-evening", Time: at("2024-03-10T23:30:00-05:00")}, // 2024-03-11T04:30Z
				{ID: "utc-morning", Time: at("2024-03-11T05:00:00Z")},
				{ID: "utc-previous-day", Time: at("2024-03-10T23:00:00Z")},
			},
			kept: []string{"utc-morning", "utc-previous-day"},
		},
		{
			name:   "a daylight-saving change in the item's zone does not split or merge UTC days",
			policy: Calendar{Daily: 1},
			items: []Item{
				// Europe/Berlin switched to summer time at 2024-03-31T01:00Z.
				{ID: "before", Time: at("2024-03-31T01:30:00+01:00")}, // 00:30Z
				{ID: "after", Time: at("2024-03-31T03:30:00+02:00")},  // 01:30Z, same UTC day
			},
			kept: []string{"after"},
		},
		{
			name:   "ISO weeks start on Monday: Saturday and Sunday share a week, Monday starts a new one",
			policy: Calendar{Weekly: 2},
			items:  snaps("2024-03-09T10:00:00Z", "2024-03-10T23:59:59Z", "2024-03-11T00:00:00Z"),
			kept:   []string{"2024-03-11T00:00:00Z", "2024-03-10T23:59:59Z"},
		},
		{
			name:   "ISO week 53 of 2020 spans the new year",
			policy: Calendar{Weekly: 2},
			items:  snaps("2020-12-31T12:00:00Z", "2021-01-03T12:00:00Z", "2021-01-04T12:00:00Z"),
			kept:   []string{"2021-01-04T12:00:00Z", "2021-01-03T12:00:00Z"},
		},
		{
			name:   "the leap day belongs to February",
			policy: Calendar{Monthly: 2},
			items:  snaps("2024-02-01T00:00:00Z", "2024-02-29T23:00:00Z", "2024-03-01T00:00:00Z"),
			kept:   []string{"2024-03-01T00:00:00Z", "2024-02-29T23:00:00Z"},
		},
		{
			name:   "the leap day is a day of its own",
			policy: Calendar{Daily: 3},
			items:  snaps("2024-02-28T12:00:00Z", "2024-02-29T00:00:00Z", "2024-02-29T12:00:00Z", "2024-03-01T12:00:00Z"),
			kept:   []string{"2024-03-01T12:00:00Z", "2024-02-29T12:00:00Z", "2024-02-28T12:00:00Z"},
		},
		{
			name:   "keep-yearly keeps the last snapshot of each year, in UTC",
			policy: Calendar{Yearly: 2},
			items: []Item{
				{ID: "nye-tokyo", Time: at("2024-01-01T08:00:00+09:00")}, // 2023-12-31T23:00Z
				{ID: "2023-mid", Time: at("2023-06-01T00:00:00Z")},
				{ID: "2024-jan", Time: at("2024-01-02T00:00:00Z")},
			},
			kept: []string{"2024-jan", "nye-tokyo"},
		},
		{
			name:   "keep-within keeps what is strictly newer than the cut relative to the newest",
			policy: Calendar{Within: 2 * Day},
			now:    "2030-01-01T00:00:00Z",
			items:  snaps("2024-03-10T12:00:00Z", "2024-03-08T12:00:00.000000001Z", "2024-03-08T12:00:00Z"),
			kept:   []string{"2024-03-10T12:00:00Z", "2024-03-08T12:00:00.000000001Z"},
		},
		{
			name:   "keep-within measures from the newest present item, not from a future one",
			policy: Calendar{Within: Day},
			now:    "2024-03-10T12:00:00Z",
			items:  snaps("2024-03-20T00:00:00Z", "2024-03-10T00:00:00Z", "2024-03-09T12:00:00Z", "2024-03-08T12:00:00Z"),
			kept:   []string{"2024-03-20T00:00:00Z", "2024-03-10T00:00:00Z", "2024-03-09T12:00:00Z"},
			reasons: map[string]Reason{
				"2024-03-20T00:00:00Z": ReasonFuture,
				"2024-03-10T00:00:00Z": ReasonWithin,
				"2024-03-09T12:00:00Z": ReasonWithin,
			},
		},
		{
			name:   "a daily count with room left after the oldest day also keeps the oldest snapshot",
			policy: Calendar{Daily: 10},
			items:  snaps("2024-03-01T08:00:00Z", "2024-03-01T09:00:00Z", "2024-03-02T09:00:00Z"),
			kept:   []string{"2024-03-02T09:00:00Z", "2024-03-01T09:00:00Z", "2024-03-01T08:00:00Z"},
			reasons: map[string]Reason{
				"2024-03-02T09:00:00Z": ReasonDaily,
				"2024-03-01T09:00:00Z": ReasonDaily,
				"2024-03-01T08:00:00Z": ReasonDaily | ReasonOldest,
			},
		},
		{
			name:   "a daily count used up before the oldest day does not keep the oldest snapshot",
			policy: Calendar{Daily: 2},
			items:  snaps("2024-03-01T08:00:00Z", "2024-03-01T09:00:00Z", "2024-03-02T09:00:00Z"),
			kept:   []string{"2024-03-02T09:00:00Z", "2024-03-01T09:00:00Z"},
		},
		{
			name:   "identical timestamps in one bucket: the ID that sorts first is kept",
			policy: Calendar{Hourly: 3},
			items:  []Item{{ID: "b", Time: at("2024-03-01T08:00:00Z")}, {ID: "a", Time: at("2024-03-01T08:00:00Z")}, {ID: "c", Time: at("2024-03-01T07:00:00Z")}},
			kept:   []string{"a", "c"},
		},
		{
			name:   "the empty calendar keeps everything, as restic's empty policy does",
			policy: Calendar{},
			items:  snaps("2024-03-01T08:00:00Z", "2020-03-01T09:00:00Z"),
			kept:   []string{"2024-03-01T08:00:00Z", "2020-03-01T09:00:00Z"},
			reasons: map[string]Reason{
				"2024-03-01T08:00:00Z": ReasonEmptyPolicy,
				"2020-03-01T09:00:00Z": ReasonEmptyPolicy,
			},
		},
		{
			name:   "unlimited always has room, so the oldest snapshot is kept too",
			policy: Calendar{Daily: Unlimited},
			items:  snaps("2024-03-01T08:00:00Z", "2024-03-01T09:00:00Z", "2024-03-02T09:00:00Z"),
			kept:   []string{"2024-03-02T09:00:00Z", "2024-03-01T09:00:00Z", "2024-03-01T08:00:00Z"},
			reasons: map[string]Reason{
				"2024-03-01T08:00:00Z": ReasonDaily | ReasonOldest,
			},
		},
		{
			name:   "a single snapshot is kept by any option",
			policy: Calendar{Yearly: 1},
			items:  snaps("1999-12-31T23:59:59Z"),
			kept:   []string{"1999-12-31T23:59:59Z"},
		},
		{
			name:   "snapshots before 1970 are bucketed by day like any other",
			policy: Calendar{Daily: 2},
			items:  snaps("1969-12-31T23:00:00Z", "1969-12-31T01:00:00Z", "1970-01-01T00:00:00Z"),
			kept:   []string{"1970-01-01T00:00:00Z", "1969-12-31T23:00:00Z"},
		},
		{
			name:   "empty input",
			policy: Calendar{Daily: 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := now
			if tc.now != "" {
				n = at(tc.now)
			} else if len(tc.items) > 0 {
				n = at("2035-01-01T00:00:00Z")
			}
			res := evaluate(t, tc.policy, n, tc.items)
			if got := keptIDs(tc.items, res); !slices.Equal(got, tc.kept) {
				t.Fatalf("kept %q, want %q", got, tc.kept)
			}
			for id, r := range tc.reasons {
				if got := reasonOf(tc.items, res, id); got != r {
					t.Errorf("%s: reasons %v, want %v", id, got, r)
				}
			}
			if res.Skewed > 0 {
				return // kept items are re-judged when the future item's time comes
			}
			for i, d := range res.Decisions {
				if d.Keep && !d.DeletableAt.IsZero() {
					t.Errorf("%s: calendar decisions should not expire with time, DeletableAt = %v", tc.items[i].ID, d.DeletableAt)
				}
			}
		})
	}
}
