package retention

import (
	"slices"
	"testing"
	"time"
)

// sixWeeks is a history of one full snapshot every hour on the hour from
// Monday 2024-01-29 00:00Z to Monday 2024-03-11 10:00Z (six weeks), plus
// extra snapshots at 09:30, 10:15 and 10:30 on the last day.
func sixWeeks() []Item {
	var items []Item
	for t := at("2024-01-29T00:00:00Z"); !t.After(at("2024-03-11T10:00:00Z")); t = t.Add(time.Hour) {
		items = append(items, Item{ID: t.Format(time.RFC3339), Time: t})
	}
	return append(items, snaps("2024-03-11T09:30:00Z", "2024-03-11T10:15:00Z", "2024-03-11T10:30:00Z")...)
}

func TestExponentialReproducesEtcdBackupRestore(t *testing.T) {
	// etcd-backup-restore's Exponential policy, evaluated at 10:45Z on
	// Monday 2024-03-11 over six weeks of hourly full snapshots, keeps:
	want := []string{
		// the newest, and everything from the current hour;
		"2024-03-11T10:30:00Z", "2024-03-11T10:15:00Z", "2024-03-11T10:00:00Z",
		// the newest of each earlier hour of today (09:30 over 09:00);
		"2024-03-11T09:30:00Z", "2024-03-11T08:00:00Z", "2024-03-11T07:00:00Z",
		"2024-03-11T06:00:00Z", "2024-03-11T05:00:00Z", "2024-03-11T04:00:00Z",
		"2024-03-11T03:00:00Z", "2024-03-11T02:00:00Z", "2024-03-11T01:00:00Z",
		"2024-03-11T00:00:00Z",
		// the newest of each of the 7 days before today;
		"2024-03-10T23:00:00Z", "2024-03-09T23:00:00Z", "2024-03-08T23:00:00Z",
		"2024-03-07T23:00:00Z", "2024-03-06T23:00:00Z", "2024-03-05T23:00:00Z",
		"2024-03-04T23:00:00Z",
		// the newest of each of the 4 weeks before those, weeks ending at
		// today's midnight: [Feb 26, Mar 4), [Feb 19, Feb 26), [Feb 12, Feb 19),
		// [Feb 5, Feb 12); February 2024 has a leap day;
		"2024-03-03T23:00:00Z", "2024-02-25T23:00:00Z", "2024-02-18T23:00:00Z",
		"2024-02-11T23:00:00Z",
		// and nothing from Jan 29 to Feb 4.
	}
	items := sixWeeks()
	now := at("2024-03-11T10:45:00Z")
	res := evaluate(t, Exponential{}, now, items)
	if got := keptIDs(items, res); !slices.Equal(got, want) {
		t.Fatalf("kept %d: %q\n\twant %d: %q", len(got), got, len(want), want)
	}
	for _, c := range []struct {
		id          string
		reasons     Reason
		deletableAt string
	}{
		{"2024-03-11T10:30:00Z", ReasonNewest, ""},
		// Kept for the current hour until 11:00; then the newest of hour 10.
		{"2024-03-11T10:15:00Z", ReasonCurrentHour, "2024-03-11T11:00:00Z"},
		{"2024-03-11T10:00:00Z", ReasonCurrentHour, "2024-03-11T11:00:00Z"},
		// The newest of hour 09 until today is thinned to one per day.
		{"2024-03-11T09:30:00Z", ReasonHourly, "2024-03-12T00:00:00Z"},
		// The newest of Sunday 10 March until, on 19 March, the weekly blocks
		// end at midnight on Tuesdays and it shares one with 11 March.
		{"2024-03-10T23:00:00Z", ReasonDaily, "2024-03-19T00:00:00Z"},
		// Tomorrow the blocks end on Tuesday, and 3 March shares its block
		// with the newer 4 March.
		{"2024-03-03T23:00:00Z", ReasonWeekly, "2024-03-12T00:00:00Z"},
		{"2024-02-11T23:00:00Z", ReasonWeekly, "2024-03-12T00:00:00Z"},
	} {
		i := slices.IndexFunc(items, func(it Item) bool { return it.ID == c.id })
		d := res.Decisions[i]
		var wantAt time.Time
		if c.deletableAt != "" {
			wantAt = at(c.deletableAt)
		}
		if d.Reasons != c.reasons || !d.DeletableAt.Equal(wantAt) {
			t.Errorf("%s: kept for %v until %v, want %v until %v", c.id, d.Reasons, d.DeletableAt, c.reasons, wantAt)
		}
	}
	if !res.Next.Equal(at("2024-03-11T11:00:00Z")) {
		t.Errorf("Next = %v, want the end of the current hour", res.Next)
	}

	// The decisions are stable: evaluating again over what was kept keeps
	// all of it.
	var kept []Item
	for i, d := range res.Decisions {
		if d.Keep {
			kept = append(kept, items[i])
		}
	}
	again := evaluate(t, Exponential{}, now, kept)
	if again.Deleted != 0 {
		t.Fatalf("a second pass deletes %d more", again.Deleted)
	}
}

func TestExponentialDeletableAtIsExact(t *testing.T) {
	// For every item the first pass keeps, it is still kept 1ns before its
	// DeletableAt and is deleted at DeletableAt.
	items := sixWeeks()
	now := at("2024-03-11T10:45:00Z")
	res := evaluate(t, Exponential{}, now, items)
	for i, d := range res.Decisions {
		if !d.Keep || d.DeletableAt.IsZero() {
			continue
		}
		before := evaluate(t, Exponential{}, d.DeletableAt.Add(-1), items)
		if !before.Decisions[i].Keep {
			t.Errorf("%s: deleted 1ns before its DeletableAt %v", items[i].ID, d.DeletableAt)
		}
		atIt := evaluate(t, Exponential{}, d.DeletableAt, items)
		if atIt.Decisions[i].Keep {
			t.Errorf("%s: still kept at its DeletableAt %v (%v)", items[i].ID, d.DeletableAt, atIt.Decisions[i].Reasons)
		}
	}
}

func TestExponentialRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		now   string
		items []Item
		kept  []string
	}{
		{
			name:  "the newest is kept even when it is older than four weeks",
			now:   "2024-03-11T10:45:00Z",
			items: snaps("2023-01-01T00:00:00Z", "2022-01-01T00:00:00Z"),
			kept:  []string{"2023-01-01T00:00:00Z"},
		},
		{
			name:  "a single item is kept",
			now:   "2024-03-11T10:45:00Z",
			items: snaps("2024-03-01T00:00:00Z"),
			kept:  []string{"2024-03-01T00:00:00Z"},
		},
		{
			name:  "everything from the current hour is kept, to the nanosecond",
			now:   "2024-03-11T10:45:00Z",
			items: snaps("2024-03-11T10:00:00Z", "2024-03-11T10:00:00.000000001Z", "2024-03-11T09:59:59.999999999Z", "2024-03-11T09:00:00Z"),
			kept:  []string{"2024-03-11T10:00:00.000000001Z", "2024-03-11T10:00:00Z", "2024-03-11T09:59:59.999999999Z"},
		},
		{
			name:  "yesterday is thinned per day, not per hour, even at 00:30",
			now:   "2024-03-11T00:30:00Z",
			items: snaps("2024-03-11T00:10:00Z", "2024-03-10T23:00:00Z", "2024-03-10T22:00:00Z"),
			kept:  []string{"2024-03-11T00:10:00Z", "2024-03-10T23:00:00Z"},
		},
		{
			name:  "the daily window reaches back 7 days before today, to midnight",
			now:   "2024-03-11T10:45:00Z",
			items: snaps("2024-03-11T10:30:00Z", "2024-03-04T00:00:00Z", "2024-03-03T23:59:59Z", "2024-03-03T12:00:00Z"),
			// 03-03T23:59:59 is in the weekly block [Feb 26, Mar 4); 03-03T12:00
			// shares it.
			kept: []string{"2024-03-11T10:30:00Z", "2024-03-04T00:00:00Z", "2024-03-03T23:59:59Z"},
		},
		{
			name:  "the weekly window ends 35 days before today: 5 February is kept, 4 February is not",
			now:   "2024-03-11T10:45:00Z",
			items: snaps("2024-03-11T10:30:00Z", "2024-02-05T00:00:00Z", "2024-02-04T23:59:59Z"),
			kept:  []string{"2024-03-11T10:30:00Z", "2024-02-05T00:00:00Z"},
		},
		{
			name:  "identical timestamps in one day: the ID that sorts first is the day's newest",
			now:   "2024-03-11T10:45:00Z",
			items: []Item{{ID: "b", Time: at("2024-03-08T12:00:00Z")}, {ID: "a", Time: at("2024-03-08T12:00:00Z")}, {ID: "new", Time: at("2024-03-11T10:30:00Z")}},
			kept:  []string{"new", "a"},
		},
		{
			name:  "an item from the future is kept and does not count as the newest",
			now:   "2024-03-11T10:45:00Z",
			items: snaps("2024-03-11T12:00:00Z", "2024-03-08T12:00:00Z", "2024-03-08T11:00:00Z"),
			kept:  []string{"2024-03-11T12:00:00Z", "2024-03-08T12:00:00Z"},
		},
		{
			name: "empty input",
			now:  "2024-03-11T10:45:00Z",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := evaluate(t, Exponential{}, at(tc.now), tc.items)
			if got := keptIDs(tc.items, res); !slices.Equal(got, tc.kept) {
				t.Fatalf("kept %q, want %q", got, tc.kept)
			}
		})
	}
}
