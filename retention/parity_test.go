package retention

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // zones for the DST cases, whatever the machine has
)

func loadZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// evalKept evaluates p and returns the kept IDs, newest first.
func evalKept(t *testing.T, p Policy, now time.Time, items []Item) ([]string, *Result) {
	t.Helper()
	return evalKeptOpts(t, policyAlone, p, now, items)
}

func evalKeptOpts(t *testing.T, o Options, p Policy, now time.Time, items []Item) ([]string, *Result) {
	t.Helper()
	var res Result
	if err := o.Evaluate(p, now, items, &res); err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	return keptIDs(items, &res), &res
}

// tenWeekdays is the history of the restic manual's keep-daily and
// keep-within-daily example: one backup every weekday for two weeks, a second
// one on Fridays, none on the second Wednesday.
var tenWeekdays = snaps(
	"2025-04-21T11:00:00Z", "2025-04-22T11:00:00Z", "2025-04-23T11:00:00Z",
	"2025-04-24T11:00:00Z", "2025-04-25T11:00:00Z", "2025-04-25T23:00:00Z",
	"2025-04-28T11:00:00Z", "2025-04-29T11:00:00Z", "2025-05-01T11:00:00Z",
	"2025-05-02T11:00:00Z", "2025-05-02T23:00:00Z",
)

func TestResticDocumentedExampleKeepDailyFive(t *testing.T) {
	// "forget --keep-daily 5 will keep only one snapshot per day for the last
	// five days that had a snapshot": Friday 04-25 23:00 is kept because the
	// Wednesday backup is missing.
	got, res := evalKept(t, Calendar{Daily: 5}, at("2025-05-03T00:00:00Z"), tenWeekdays)
	want := []string{"2025-05-02T23:00:00Z", "2025-05-01T11:00:00Z", "2025-04-29T11:00:00Z", "2025-04-28T11:00:00Z", "2025-04-25T23:00:00Z"}
	if !slices.Equal(got, want) || res.Deleted != 6 {
		t.Fatalf("kept %q (deleted %d), restic keeps %q and removes 6", got, res.Deleted, want)
	}
}

func TestResticDocumentedExampleKeepWithinDailySevenDays(t *testing.T) {
	// "forget --keep-within-daily 7d ... will only keep at most one daily
	// backup from any given day for the last seven days": 4 kept, 7 removed,
	// each "daily within 7d". 04-25 23:00 is exactly 7 days before the
	// newest and so not within.
	got, res := evalKept(t, Calendar{WithinDaily: Span{Days: 7}}, at("2025-05-03T00:00:00Z"), tenWeekdays)
	want := []string{"2025-05-02T23:00:00Z", "2025-05-01T11:00:00Z", "2025-04-29T11:00:00Z", "2025-04-28T11:00:00Z"}
	if !slices.Equal(got, want) || res.Deleted != 7 {
		t.Fatalf("kept %q (deleted %d), restic keeps %q and removes 7", got, res.Deleted, want)
	}
	for _, id := range want {
		if r := reasonOf(tenWeekdays, res, id); r != ReasonWithinDaily {
			t.Errorf("%s kept for %v, restic says \"daily within 7d\"", id, r)
		}
	}
}

func TestResticDocumentedExampleWithinBucketsInsteadOfCounts(t *testing.T) {
	// "--keep-within-daily 7d --keep-within-weekly 1m --keep-within-monthly
	// 1y --keep-within-yearly 75y" over a daily backup for 100 years: every
	// day of the last week, every week of the last month, every month of the
	// last year and every year of the last 75 (no counts).
	end := at("2019-11-17T11:00:00Z") // a Sunday
	var items []Item
	for d := end; d.After(end.AddDate(-100, 0, 0)); d = d.AddDate(0, 0, -1) {
		items = append(items, Item{ID: d.Format(time.DateOnly), Time: d})
	}
	p := Calendar{WithinDaily: Span{Days: 7}, WithinWeekly: Span{Months: 1}, WithinMonthly: Span{Years: 1}, WithinYearly: Span{Years: 75}}
	res := evaluate(t, p, end.Add(time.Hour), items)
	count := map[Reason]int{}
	for _, d := range res.Decisions {
		for _, r := range []Reason{ReasonWithinDaily, ReasonWithinWeekly, ReasonWithinMonthly, ReasonWithinYearly, ReasonOldest} {
			if d.Reasons&r != 0 {
				count[r]++
			}
		}
	}
	// Days after 11-10 11:00: 11-11..11-17 (7). Weeks after 10-17 11:00:
	// ISO weeks ending 11-17, 11-10, 11-03, 10-27, 10-20 (5). Months after
	// 2018-11-17: 2018-11 .. 2019-11 (13). Years after 1944-11-17: 1944 ..
	// 2019 (76).
	if count[ReasonWithinDaily] != 7 || count[ReasonWithinWeekly] != 5 || count[ReasonWithinMonthly] != 13 || count[ReasonWithinYearly] != 76 || count[ReasonOldest] != 0 {
		t.Fatalf("counts %v, want daily 7, weekly 5, monthly 13, yearly 76, oldest 0", count)
	}
}

func TestKeepTag(t *testing.T) {
	items := []Item{
		{ID: "a", Time: at("2024-03-01T05:00:00Z"), Tags: []string{"manual", "pre-upgrade"}},
		{ID: "b", Time: at("2024-03-01T04:00:00Z"), Tags: []string{"manual"}},
		{ID: "c", Time: at("2024-03-01T03:00:00Z")},
		{ID: "d", Time: at("2024-03-01T02:00:00Z"), Tags: []string{"nightly"}},
		{ID: "e", Time: at("2024-03-01T01:00:00Z"), Tags: []string{"pre-upgrade"}, Outcome: OutcomeFailed},
	}
	for _, tc := range []struct {
		name string
		tags [][]string
		kept []string
	}{
		{"a tag list keeps the items that have every tag in it", [][]string{{"manual", "pre-upgrade"}}, []string{"a"}},
		{"tag lists are ORed", [][]string{{"nightly"}, {"manual"}}, []string{"a", "b", "d"}},
		{"the empty tag keeps the items without tags", [][]string{{""}}, []string{"c"}},
		{"a tag keeps a failed item, which takes no slot", [][]string{{"pre-upgrade"}}, []string{"a", "e"}},
		{"the empty tag with another tag matches nothing, as in restic", [][]string{{"manual", ""}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := evalKeptOpts(t, Options{AllowDeleteNewest: true}, Calendar{Tags: tc.tags}, at("2024-03-02T00:00:00Z"), items)
			if !slices.Equal(got, tc.kept) {
				t.Fatalf("kept %q, want %q", got, tc.kept)
			}
			for _, id := range tc.kept {
				if r := reasonOf(items, res, id); r != ReasonTag {
					t.Errorf("%s kept for %v, want tag", id, r)
				}
			}
		})
	}
}

func TestParseSpan(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Span
		err  string // part of the reason; "" when accepted
	}{
		{"1y2m3d4h", Span{1, 2, 3, 4}, ""},
		{"18m", Span{Months: 18}, ""},
		{"7d", Span{Days: 7}, ""},
		{"36h", Span{Hours: 36}, ""},
		{"0", Span{}, ""},
		{"0h", Span{}, ""},
		{"1y0d", Span{Years: 1}, ""},
		{"", Span{}, "empty"},
		{"1h30m", Span{}, "m means months"},
		{"2d6m", Span{}, "m means months"},
		{"1m2y", Span{}, "in that order"},
		{"1d1d", Span{}, "twice"},
		{"2w", Span{}, "write 14d"},
		{"30s", Span{}, "no seconds"},
		{"5ms", Span{}, "no milliseconds"},
		{"1M", Span{}, "lower case"},
		{"-1d", Span{}, "no sign"},
		{"+1d", Span{}, "no sign"},
		{"30", Span{}, "missing unit after 30"},
		{"1 d", Span{}, "unknown unit"},
		{"d", Span{}, "expected a number"},
		{"1x", Span{}, `unknown unit "x"`},
		{"1000001d", Span{}, "above 1000000"},
	} {
		got, err := ParseSpan(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("ParseSpan(%q): %v", tc.in, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("ParseSpan(%q) = %+v, want %+v", tc.in, got, tc.want)
		case tc.err == "":
			if again, err := ParseSpan(got.String()); err != nil || again != got {
				t.Errorf("ParseSpan(%q).String() = %q does not round-trip: %+v, %v", tc.in, got.String(), again, err)
			}
		case tc.err != "":
			var se *SpanError
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalidSpan) || se.Input != tc.in || !strings.Contains(se.Reason, tc.err) {
				t.Errorf("ParseSpan(%q) = %+v, %v; want a *SpanError saying %q", tc.in, got, err, tc.err)
			}
		}
	}
}

func TestWithinSpanIsCalendarAware(t *testing.T) {
	for _, tc := range []struct {
		name   string
		span   Span
		newest string
		kept   []string
		gone   []string
	}{
		{
			// AddDate(0, -1, 0) from March 31 is "February 31", normalised to
			// March 3 (2023 is not a leap year), exactly as in restic.
			name: "one month back from March 31 ends on March 3", span: Span{Months: 1}, newest: "2023-03-31T12:00:00Z",
			kept: []string{"2023-03-03T12:00:01Z"}, gone: []string{"2023-03-03T12:00:00Z", "2023-02-28T12:00:00Z"},
		},
		{
			name: "one year back from a leap day ends on March 1", span: Span{Years: 1}, newest: "2024-02-29T00:00:00Z",
			kept: []string{"2023-03-01T00:00:01Z"}, gone: []string{"2023-03-01T00:00:00Z", "2023-02-28T23:00:00Z"},
		},
		{
			name: "years, months, days and hours add up", span: Span{1, 2, 3, 4}, newest: "2024-06-15T12:00:00Z",
			kept: []string{"2023-04-12T08:00:00.000000001Z"}, gone: []string{"2023-04-12T08:00:00Z"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			items := snaps(append(append([]string{tc.newest}, tc.kept...), tc.gone...)...)
			got, _ := evalKept(t, Calendar{WithinSpan: tc.span}, at(tc.newest).Add(time.Hour), items)
			if want := append([]string{tc.newest}, tc.kept...); !slices.Equal(got, want) {
				t.Fatalf("kept %q, want %q", got, want)
			}
		})
	}
}

func TestOldestRuleWithinBuckets(t *testing.T) {
	// restic keeps the oldest snapshot for a keep-within-<bucket> option when
	// it is within the span, even if its bucket already has a newer one.
	items := snaps("2024-03-05T10:00:00Z", "2024-03-04T18:00:00Z", "2024-03-04T09:00:00Z")
	res := evaluate(t, Calendar{WithinDaily: Span{Days: 10}}, at("2024-03-06T00:00:00Z"), items)
	if got := keptIDs(items, res); len(got) != 3 {
		t.Fatalf("kept %q, want all three", got)
	}
	d := res.Decisions[2]
	if d.Reasons != ReasonWithinDaily|ReasonOldest || d.Oldest != ReasonWithinDaily {
		t.Fatalf("oldest kept for %v (oldest %v), want within-daily+oldest", d.Reasons, d.Oldest)
	}
	// Outside the span the oldest rule does not apply.
	res = evaluate(t, Calendar{WithinDaily: Span{Days: 1}}, at("2024-03-06T00:00:00Z"), items)
	if got := keptIDs(items, res); !slices.Equal(got, []string{"2024-03-05T10:00:00Z", "2024-03-04T18:00:00Z"}) {
		t.Fatalf("kept %q", got)
	}
}

func TestOldestRuleNamesItsBucketKind(t *testing.T) {
	// Daily 5 has room after the two days: the oldest item is kept as the
	// oldest daily; Weekly 1 has no room left and keeps only the newest.
	items := snaps("2024-03-05T10:00:00Z", "2024-03-04T18:00:00Z", "2024-03-04T09:00:00Z")
	res := evaluate(t, Calendar{Daily: 5, Weekly: 1}, at("2024-03-06T00:00:00Z"), items)
	if d := res.Decisions[2]; d.Reasons != ReasonDaily|ReasonOldest || d.Oldest != ReasonDaily {
		t.Fatalf("oldest kept for %v (oldest %v), want daily+oldest with Oldest daily", d.Reasons, d.Oldest)
	}
}

func TestTimeZones(t *testing.T) {
	berlin, newYork := loadZone(t, "Europe/Berlin"), loadZone(t, "America/New_York")
	for _, tc := range []struct {
		name   string
		policy Calendar
		items  []Item
		kept   []string
	}{
		{
			name:   "days are UTC days by default",
			policy: Calendar{Daily: Unlimited},
			items:  snaps("2024-03-30T23:30:00Z", "2024-03-30T22:30:00Z"),
			kept:   []string{"2024-03-30T23:30:00Z"},
		},
		{
			name:   "days are Berlin days in Berlin: 23:30Z is already the next day",
			policy: Calendar{Daily: Unlimited, Location: berlin},
			items:  snaps("2024-03-30T23:30:00Z", "2024-03-30T22:30:00Z"),
			kept:   []string{"2024-03-30T23:30:00Z", "2024-03-30T22:30:00Z"},
		},
		{
			// 01:30 EDT and 01:30 EST, an hour apart, share the wall-clock hour
			// that the end of DST repeats, as restic's YYYYMMDDHH does.
			name:   "the repeated hour at the end of DST is one hourly bucket",
			policy: Calendar{Hourly: Unlimited, Location: newYork},
			items:  snaps("2024-11-03T06:30:00Z", "2024-11-03T05:30:00Z"),
			kept:   []string{"2024-11-03T06:30:00Z"},
		},
		{
			name:   "the repeated hour is two hours in UTC",
			policy: Calendar{Hourly: Unlimited},
			items:  snaps("2024-11-03T06:30:00Z", "2024-11-03T05:30:00Z"),
			kept:   []string{"2024-11-03T06:30:00Z", "2024-11-03T05:30:00Z"},
		},
		{
			// Berlin's March 31 2024 has 23 hours: a day back from noon is
			// 23 real hours back, so 10:30Z on the 30th is outside; in UTC it
			// is inside.
			name:   "a day-long span across the start of DST is 23 hours",
			policy: Calendar{WithinSpan: Span{Days: 1}, Location: berlin},
			items:  snaps("2024-03-31T10:00:00Z", "2024-03-30T11:30:00Z", "2024-03-30T10:30:00Z"),
			kept:   []string{"2024-03-31T10:00:00Z", "2024-03-30T11:30:00Z"},
		},
		{
			name:   "a day-long span is 24 hours in UTC",
			policy: Calendar{WithinSpan: Span{Days: 1}},
			items:  snaps("2024-03-31T10:00:00Z", "2024-03-30T11:30:00Z", "2024-03-30T10:30:00Z"),
			kept:   []string{"2024-03-31T10:00:00Z", "2024-03-30T11:30:00Z", "2024-03-30T10:30:00Z"},
		},
		{
			name:   "ItemZone buckets each item in its recorded offset, as restic does",
			policy: Calendar{Yearly: Unlimited, ItemZone: true},
			items: []Item{
				{ID: "new-year-in-berlin", Time: at("2024-01-01T00:30:00+01:00")},
				{ID: "late-2023-utc", Time: at("2023-12-31T22:00:00Z")},
			},
			kept: []string{"new-year-in-berlin", "late-2023-utc"},
		},
		{
			name:   "without ItemZone both are 2023 in UTC",
			policy: Calendar{Yearly: Unlimited},
			items: []Item{
				{ID: "new-year-in-berlin", Time: at("2024-01-01T00:30:00+01:00")},
				{ID: "late-2023-utc", Time: at("2023-12-31T22:00:00Z")},
			},
			kept: []string{"new-year-in-berlin"},
		},
		{
			name:   "New Year's Eve in New York is still the old year there",
			policy: Calendar{Yearly: Unlimited, Location: newYork},
			items:  snaps("2022-01-01T06:00:00Z", "2022-01-01T04:30:00Z"),
			kept:   []string{"2022-01-01T06:00:00Z", "2022-01-01T04:30:00Z"},
		},
		{
			// 2020-12-28 to 2021-01-03 is ISO week 53 of 2020.
			name:   "ISO week 53 spans the year end: Dec 31 and Jan 3 are one week",
			policy: Calendar{Weekly: Unlimited},
			items:  snaps("2021-01-04T09:00:00Z", "2021-01-03T09:00:00Z", "2020-12-31T09:00:00Z", "2020-12-27T09:00:00Z"),
			kept:   []string{"2021-01-04T09:00:00Z", "2021-01-03T09:00:00Z", "2020-12-27T09:00:00Z"},
		},
		{
			name:   "ISO week 53 is split by the yearly buckets",
			policy: Calendar{Yearly: Unlimited},
			items:  snaps("2021-01-03T09:00:00Z", "2020-12-31T09:00:00Z"),
			kept:   []string{"2021-01-03T09:00:00Z", "2020-12-31T09:00:00Z"},
		},
		{
			// In New York, 2021-01-04T03:00Z is still Sunday Jan 3, week 53.
			name:   "ISO week 53 in a zone west of UTC",
			policy: Calendar{Weekly: Unlimited, Location: newYork},
			items:  snaps("2021-01-04T03:00:00Z", "2020-12-28T06:00:00Z", "2020-12-28T04:00:00Z"),
			kept:   []string{"2021-01-04T03:00:00Z", "2020-12-28T04:00:00Z"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An older item in a bucket of its own, so that restic's oldest
			// rule does not keep the older item of the pair under test.
			items := append(slices.Clone(tc.items), Item{ID: "anchor", Time: at("2000-01-01T00:00:00Z")})
			want := tc.kept
			if tc.policy.WithinSpan.IsZero() {
				want = append(slices.Clone(want), "anchor")
			}
			if got, _ := evalKept(t, tc.policy, at("2025-01-01T00:00:00Z"), items); !slices.Equal(got, want) {
				t.Fatalf("kept %q, want %q", got, want)
			}
		})
	}
}

func TestTieBreak(t *testing.T) {
	same := at("2024-03-01T10:00:00Z")
	items := []Item{{ID: "z", Time: same}, {ID: "a", Time: same}, {ID: "m", Time: at("2024-03-01T09:00:00Z")}}
	t.Run("equal times rank by ID by default, whatever the input order", func(t *testing.T) {
		if got, _ := evalKept(t, Calendar{Last: 1}, now, items); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("kept %q, want a", got)
		}
	})
	t.Run("TieByInput ranks the first in the input as newer, as restic's stable sort", func(t *testing.T) {
		if got, _ := evalKeptOpts(t, Options{TieBreak: TieByInput}, Calendar{Last: 1}, now, items); !slices.Equal(got, []string{"z"}) {
			t.Fatalf("kept %q, want z", got)
		}
	})
	t.Run("TieByInput decides the hourly bucket's newest as restic does", func(t *testing.T) {
		if got, _ := evalKeptOpts(t, Options{TieBreak: TieByInput}, Calendar{Hourly: Unlimited}, now, items); !slices.Equal(got, []string{"z", "m"}) {
			t.Fatalf("kept %q, want z and m", got)
		}
	})
}

func TestGroupBy(t *testing.T) {
	var items []Item
	for _, g := range []string{"db-b", "db-a", "db-c"} {
		for h := range 5 {
			items = append(items, Item{ID: g + "-" + string(rune('0'+h)), Group: g, Time: at("2024-03-01T10:00:00Z").Add(-time.Duration(h) * time.Hour)})
		}
	}
	// db-c has only old backups: Last 2 keeps two of them anyway, per group.
	for i := 10; i < 15; i++ {
		items[i].Time = items[i].Time.AddDate(0, -1, 0)
	}
	t.Run("each group keeps its own newest", func(t *testing.T) {
		got, res := evalKept(t, Calendar{Last: 2}, at("2024-03-02T00:00:00Z"), items)
		want := []string{"db-a-0", "db-b-0", "db-a-1", "db-b-1", "db-c-0", "db-c-1"}
		if !slices.Equal(got, want) {
			t.Fatalf("kept %q, want %q", got, want)
		}
		var groups []string
		for _, g := range res.Groups {
			groups = append(groups, g.Group)
			if g.Kept != 2 || g.Deleted != 3 {
				t.Errorf("group %s: kept %d deleted %d, want 2 and 3", g.Group, g.Kept, g.Deleted)
			}
		}
		if !slices.Equal(groups, []string{"db-a", "db-b", "db-c"}) {
			t.Errorf("groups %q, want them sorted", groups)
		}
	})
	t.Run("a TTL is per item and unaffected by groups", func(t *testing.T) {
		_, res := evalKept(t, TTL{After: 10 * Day}, at("2024-03-02T00:00:00Z"), items)
		if res.Kept != 10 || res.Groups[2].Kept != 0 {
			t.Fatalf("kept %d, db-c %d", res.Kept, res.Groups[2].Kept)
		}
	})
}
