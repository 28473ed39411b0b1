package retention

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

// These tests reproduce the behaviour restic documents for "forget" in
// "Removing snapshots according to a policy" (doc/060_forget.rst): the two
// worked examples there, and each keep option alone and combined over a set
// of 36 dated snapshots whose expected outcomes are worked out by hand from
// the documented rules in the comments.

func TestResticDocumentedExampleTwelveSundays(t *testing.T) {
	// "Suppose you have only made one backup every Sunday for 12 weeks ...
	// Then forget --keep-daily 4 will keep the last four snapshots, for the
	// last four Sundays, and remove the other snapshots."
	items := snaps(
		"2019-09-01T11:00:00Z", "2019-09-08T11:00:00Z", "2019-09-15T11:00:00Z",
		"2019-09-22T11:00:00Z", "2019-09-29T11:00:00Z", "2019-10-06T11:00:00Z",
		"2019-10-13T11:00:00Z", "2019-10-20T11:00:00Z", "2019-10-27T11:00:00Z",
		"2019-11-03T11:00:00Z", "2019-11-10T11:00:00Z", "2019-11-17T11:00:00Z",
	)
	res := evaluate(t, Calendar{Daily: 4}, at("2019-11-18T00:00:00Z"), items)
	want := []string{"2019-11-17T11:00:00Z", "2019-11-10T11:00:00Z", "2019-11-03T11:00:00Z", "2019-10-27T11:00:00Z"}
	if got := keptIDs(items, res); !slices.Equal(got, want) {
		t.Fatalf("kept %q, want %q", got, want)
	}
	for _, id := range want {
		if r := reasonOf(items, res, id); r != ReasonDaily {
			t.Errorf("%s kept for %v, restic says \"daily snapshot\"", id, r)
		}
	}
	if res.Deleted != 8 {
		t.Fatalf("removed %d, restic removes 8", res.Deleted)
	}
}

func TestResticDocumentedExampleHundredYears(t *testing.T) {
	// "suppose you make one backup every day for 100 years. Then forget
	// --keep-daily 7 --keep-weekly 5 --keep-monthly 12 --keep-yearly 75 would
	// keep the most recent 7 daily snapshots and 4 last-day-of-the-week ones
	// (since the 7 dailies already include 1 weekly). Additionally, 12 or 11
	// last-day-of-the-month snapshots will be kept (depending on whether one
	// of them ends up being the same as a daily or weekly). And finally 75 or
	// 74 last-day-of-the-year snapshots are kept, depending on whether one of
	// them ends up being the same as an already kept snapshot."
	//
	// The history ends on Sunday 2019-11-17, so the dailies are Monday to
	// Sunday and include exactly one weekly. The newest monthly is the newest
	// daily (11 more), and of the yearlies 2019 is the newest daily and 2018
	// is the monthly of December 2018 (73 more): 7 + 4 + 11 + 73 = 95.
	end := at("2019-11-17T11:00:00Z")
	var items []Item
	for d := end; d.After(end.AddDate(-100, 0, 0)); d = d.AddDate(0, 0, -1) {
		items = append(items, Item{ID: d.Format(time.DateOnly), Time: d})
	}
	res := evaluate(t, Calendar{Daily: 7, Weekly: 5, Monthly: 12, Yearly: 75}, end.Add(time.Hour), items)
	counts := map[Reason]int{}
	only := map[Reason]int{}
	for _, d := range res.Decisions {
		for _, r := range []Reason{ReasonDaily, ReasonWeekly, ReasonMonthly, ReasonYearly, ReasonOldest} {
			if d.Reasons&r != 0 {
				counts[r]++
			}
		}
		if d.Keep {
			only[d.Reasons]++
		}
	}
	if counts[ReasonDaily] != 7 || counts[ReasonWeekly] != 5 || counts[ReasonMonthly] != 12 || counts[ReasonYearly] != 75 || counts[ReasonOldest] != 0 {
		t.Fatalf("per-option counts %v, want daily 7, weekly 5, monthly 12, yearly 75, oldest 0", counts)
	}
	if only[ReasonWeekly] != 4 {
		t.Errorf("%d weekly-only snapshots, restic says 4", only[ReasonWeekly])
	}
	if res.Kept != 95 {
		t.Errorf("kept %d, want 7 + 4 + 11 + 73 = 95", res.Kept)
	}
	if res.Kept+res.Deleted != len(items) {
		t.Errorf("kept %d + deleted %d != %d", res.Kept, res.Deleted, len(items))
	}
}

// history36 is a restic-style snapshot history: monthly and weekly backups
// around a leap day, then daily, then several an hour on Monday 2024-03-11,
// including two with identical timestamps (s24, s25).
var history36 = []Item{
	{ID: "s01", Time: at("2023-11-30T22:00:00Z")},
	{ID: "s02", Time: at("2023-12-31T23:59:00Z")},
	{ID: "s03", Time: at("2024-01-01T00:00:00Z")},
	{ID: "s04", Time: at("2024-01-15T08:00:00Z")},
	{ID: "s05", Time: at("2024-01-31T18:00:00Z")},
	{ID: "s06", Time: at("2024-02-10T09:00:00Z")},
	{ID: "s07", Time: at("2024-02-28T12:00:00Z")},
	{ID: "s08", Time: at("2024-02-29T06:00:00Z")},
	{ID: "s09", Time: at("2024-02-29T18:00:00Z")},
	{ID: "s10", Time: at("2024-03-01T00:30:00Z")},
	{ID: "s11", Time: at("2024-03-03T10:00:00Z")},
	{ID: "s12", Time: at("2024-03-04T10:00:00Z")},
	{ID: "s13", Time: at("2024-03-05T10:00:00Z")},
	{ID: "s14", Time: at("2024-03-06T10:00:00Z")},
	{ID: "s15", Time: at("2024-03-07T10:00:00Z")},
	{ID: "s16", Time: at("2024-03-08T10:00:00Z")},
	{ID: "s17", Time: at("2024-03-09T10:00:00Z")},
	{ID: "s18", Time: at("2024-03-10T10:00:00Z")},
	{ID: "s19", Time: at("2024-03-10T23:00:00Z")},
	{ID: "s20", Time: at("2024-03-11T01:00:00Z")},
	{ID: "s21", Time: at("2024-03-11T01:30:00Z")},
	{ID: "s22", Time: at("2024-03-11T02:00:00Z")},
	{ID: "s23", Time: at("2024-03-11T02:45:00Z")},
	{ID: "s24", Time: at("2024-03-11T03:00:00Z")},
	{ID: "s25", Time: at("2024-03-11T03:00:00Z")},
	{ID: "s26", Time: at("2024-03-11T04:15:00Z")},
	{ID: "s27", Time: at("2024-03-11T05:00:00Z")},
	{ID: "s28", Time: at("2024-03-11T05:59:59Z")},
	{ID: "s29", Time: at("2024-03-11T06:00:00Z")},
	{ID: "s30", Time: at("2024-03-11T07:10:00Z")},
	{ID: "s31", Time: at("2024-03-11T08:00:00Z")},
	{ID: "s32", Time: at("2024-03-11T09:00:00Z")},
	{ID: "s33", Time: at("2024-03-11T09:20:00Z")},
	{ID: "s34", Time: at("2024-03-11T09:40:00Z")},
	{ID: "s35", Time: at("2024-03-11T10:00:00Z")},
	{ID: "s36", Time: at("2024-03-11T10:05:00Z")},
}

func ids(from, to int) []string {
	var out []string
	for i := to; i >= from; i-- {
		out = append(out, fmt.Sprintf("s%02d", i))
	}
	return out
}

func TestResticKeepOptionsOnThirtySixSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Calendar
		kept   []string
	}{
		{"--keep-last 5 keeps the five most recent", Calendar{Last: 5}, ids(32, 36)},
		{
			// Hours 10 (s36 over s35), 09 (s34 over s33, s32), 08, 07, 06, and
			// 05, where s28 at 05:59:59 is newer than s27 at 05:00.
			"--keep-hourly 6 keeps the newest of the six most recent hours",
			Calendar{Hourly: 6}, []string{"s36", "s34", "s31", "s30", "s29", "s28"},
		},
		{
			// Every hour but the newest of each: s35, s33, s32, s27, s25 (equal
			// to s24, whose ID sorts first), s22 and s20 go.
			"--keep-hourly unlimited keeps the newest of every hour",
			Calendar{Hourly: Unlimited},
			[]string{"s36", "s34", "s31", "s30", "s29", "s28", "s26", "s24", "s23", "s21", "s19", "s18", "s17", "s16", "s15", "s14", "s13", "s12", "s11", "s10", "s09", "s08", "s07", "s06", "s05", "s04", "s03", "s02", "s01"},
		},
		{
			"--keep-daily 5 keeps the newest of the five most recent days",
			Calendar{Daily: 5}, []string{"s36", "s19", "s17", "s16", "s15"},
		},
		{
			// 18 days have snapshots; the leap day keeps s09 over s08.
			"--keep-daily 30 keeps the newest of all 18 days",
			Calendar{Daily: 30},
			[]string{"s36", "s19", "s17", "s16", "s15", "s14", "s13", "s12", "s11", "s10", "s09", "s07", "s06", "s05", "s04", "s03", "s02", "s01"},
		},
		{
			// ISO weeks with snapshots: Mar 11-17 (s36), Mar 4-10 (s19),
			// Feb 26-Mar 3 (s11, a Sunday), Feb 5-11 (s06); Feb 12-25 are empty
			// and do not count.
			"--keep-weekly 4 keeps the newest of the four most recent weeks that have one",
			Calendar{Weekly: 4}, []string{"s36", "s19", "s11", "s06"},
		},
		{
			"--keep-monthly 3 keeps the newest of March, of February (the leap day) and of January",
			Calendar{Monthly: 3}, []string{"s36", "s09", "s05"},
		},
		{
			"--keep-yearly 2 keeps the newest of 2024 and of 2023",
			Calendar{Yearly: 2}, []string{"s36", "s02"},
		},
		{
			"--keep-yearly 5 has room left after 2023 and keeps the oldest snapshot too",
			Calendar{Yearly: 5}, []string{"s36", "s02", "s01"},
		},
		{
			// The cut is 2024-03-09T22:05Z, 36 hours before s36.
			"--keep-within 1d12h keeps what is newer than 36 hours before the newest",
			Calendar{Within: 36 * time.Hour}, ids(18, 36),
		},
		{
			"--keep-last 2 --keep-hourly 3 --keep-daily 3 --keep-weekly 2 --keep-monthly 2 --keep-yearly 1 keeps the union",
			Calendar{Last: 2, Hourly: 3, Daily: 3, Weekly: 2, Monthly: 2, Yearly: 1},
			[]string{"s36", "s35", "s34", "s31", "s19", "s17", "s09"},
		},
		{
			"--keep-daily 2 --keep-within 3h keeps the last three hours and two days",
			Calendar{Daily: 2, Within: 3 * time.Hour},
			[]string{"s36", "s35", "s34", "s33", "s32", "s31", "s30", "s19"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := evaluate(t, tc.policy, at("2024-03-11T12:00:00Z"), history36)
			if got := keptIDs(history36, res); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(tc.kept))) {
				t.Fatalf("kept %q\n\twant %q", got, tc.kept)
			}
			if res.Kept+res.Deleted != len(history36) {
				t.Fatalf("kept %d + deleted %d != %d", res.Kept, res.Deleted, len(history36))
			}
		})
	}

	t.Run("the newest snapshot is kept for every option at once", func(t *testing.T) {
		res := evaluate(t, Calendar{Last: 2, Hourly: 3, Daily: 3, Weekly: 2, Monthly: 2, Yearly: 1, Within: time.Hour}, at("2024-03-11T12:00:00Z"), history36)
		want := ReasonNewest | ReasonHourly | ReasonDaily | ReasonWeekly | ReasonMonthly | ReasonYearly | ReasonWithin
		if got := reasonOf(history36, res, "s36"); got != want {
			t.Fatalf("s36 kept for %v, want %v", got, want)
		}
	})
}

// resticSnapshots is the snapshot list of restic's TestApplyPolicy
// (internal/data/snapshot_policy_test.go), in its order, with its tags.
func resticSnapshots() []Item {
	var items []Item
	add := func(ts string, tags ...string) {
		t, err := time.Parse("2006-01-02 15:04:05", ts)
		if err != nil {
			panic(err)
		}
		items = append(items, Item{ID: fmt.Sprintf("sn%03d", len(items)), Time: t, Tags: tags})
	}
	for _, y := range []string{"2014", "2015"} {
		for _, d := range []string{"09-01", "09-02", "09-05", "09-06", "09-08", "09-09", "09-10", "09-11", "09-20", "09-22",
			"08-08", "08-10", "08-12", "08-13"} {
			add(y + "-" + d + " 10:20:30")
		}
		add(y + "-08-13 10:20:30.1")
		for _, d := range []string{"08-15", "08-18", "08-20", "08-21", "08-22"} {
			add(y + "-" + d + " 10:20:30")
		}
		var foo []string
		if y == "2014" {
			foo = []string{"foo"}
		}
		for _, d := range []string{"10-01", "10-02", "10-05", "10-06", "10-08", "10-09", "10-10", "10-11", "10-20", "10-22"} {
			add(y+"-"+d+" 10:20:30", foo...)
		}
		if y == "2015" {
			add("2015-10-22 10:20:30")
			add("2015-10-22 10:20:30", "foo", "bar")
			add("2015-10-22 10:20:30", "foo", "bar")
			add("2015-10-22 10:20:30", "foo", "bar") // restic's has paths too
		}
		for _, d := range []string{"11-08", "11-10", "11-12", "11-13"} {
			add(y+"-"+d+" 10:20:30", foo...)
		}
		if y == "2014" {
			add("2014-11-13 10:20:30.1", "bar")
			add("2014-11-15 10:20:30", "foo", "bar")
		} else {
			add("2015-11-13 10:20:30.1")
			add("2015-11-15 10:20:30")
		}
		for _, d := range []string{"11-18", "11-20", "11-21", "11-22"} {
			add(y + "-" + d + " 10:20:30")
		}
	}
	for _, ts := range []string{"2016-01-01 01:02:03", "2016-01-01 01:03:03", "2016-01-01 07:08:03", "2016-01-03 07:02:03",
		"2016-01-04 10:23:03", "2016-01-04 11:23:03", "2016-01-04 12:23:03", "2016-01-04 12:24:03", "2016-01-04 12:28:03",
		"2016-01-04 12:30:03", "2016-01-04 16:23:03", "2016-01-05 09:02:03", "2016-01-06 08:02:03", "2016-01-07 10:02:03",
		"2016-01-08 20:02:03", "2016-01-09 21:02:03", "2016-01-12 21:02:03", "2016-01-12 21:08:03", "2016-01-18 12:02:03"} {
		add(ts)
	}
	return items
}

// resticPolicies are the policies of restic's TestApplyPolicy, in its order.
// restic parses "1y1d1m" as 1 year, 1 month and 1 day; ParseSpan rejects
// that spelling, so the Span is written out.
var resticPolicies = []Calendar{
	{},
	{Last: 10}, {Last: 15}, {Last: 99}, {Last: 200},
	{Hourly: 20}, {Daily: 3}, {Daily: 10}, {Daily: 30},
	{Last: 5, Daily: 5}, {Last: 2, Daily: 10},
	{Weekly: 2}, {Weekly: 4}, {Daily: 3, Weekly: 4},
	{Monthly: 6}, {Daily: 2, Weekly: 2, Monthly: 6},
	{Yearly: 10}, {Daily: 7, Weekly: 2, Monthly: 3, Yearly: 10},
	{Tags: [][]string{{"foo"}}}, {Tags: [][]string{{"foo", "bar"}}}, {Tags: [][]string{{"foo"}, {"bar"}}},
	{WithinSpan: Span{Days: 1}}, {WithinSpan: Span{Days: 2}}, {WithinSpan: Span{Days: 7}},
	{WithinSpan: Span{Months: 1}}, {WithinSpan: Span{Months: 1, Days: 14}}, {WithinSpan: Span{Years: 1, Months: 1, Days: 1}},
	{WithinSpan: Span{Days: 13, Hours: 23}}, {WithinSpan: Span{Months: 2, Hours: 2}}, {WithinSpan: Span{1, 2, 3, 3}},
	{WithinHourly: Span{1, 2, 3, 3}}, {WithinDaily: Span{1, 2, 3, 3}}, {WithinWeekly: Span{1, 2, 3, 3}},
	{WithinMonthly: Span{1, 2, 3, 3}}, {WithinYearly: Span{1, 2, 3, 3}},
	{WithinSpan: Span{Hours: 1}, WithinHourly: Span{Days: 1}, WithinDaily: Span{Days: 7}, WithinWeekly: Span{Months: 1},
		WithinMonthly: Span{Years: 1}, WithinYearly: Span{Years: 9999}},
	{Last: Unlimited}, {Last: Unlimited, Hourly: Unlimited}, {Hourly: Unlimited},
	{Daily: 3, Weekly: 2, Monthly: Unlimited, Yearly: Unlimited},
}

// TestResticApplyPolicyGoldenFiles reproduces restic's own golden files for
// ApplyPolicy: for each of its policies, the snapshots kept, the rules each
// matched and the counters left, in restic's words (through Explain), with
// restic's tie-break (input order). restic's empty policy keeps nothing in
// ApplyPolicy (its forget command refuses to run it); the empty Calendar keeps
// everything, by design, so policy 0 is skipped.
func TestResticApplyPolicyGoldenFiles(t *testing.T) {
	raw, err := os.ReadFile("testdata/restic_apply_policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Policies [][]struct {
			Time     time.Time `json:"time"`
			Tags     []string  `json:"tags"`
			Matches  []string  `json:"matches"`
			Counters Counters  `json:"counters"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden.Policies) != len(resticPolicies) {
		t.Fatalf("%d golden files for %d policies", len(golden.Policies), len(resticPolicies))
	}
	items := resticSnapshots()
	if len(items) != 103 {
		t.Fatalf("%d snapshots, restic's test has 103", len(items))
	}
	line := func(tm time.Time, tags []string, matches []string, c Counters) string {
		return fmt.Sprintf("%s %v %q %+v", tm.UTC().Format(time.RFC3339Nano), tags, matches, c)
	}
	for i, p := range resticPolicies {
		if i == 0 {
			continue
		}
		t.Run(fmt.Sprintf("policy %d %s", i, p), func(t *testing.T) {
			var res Result
			if err := (Options{TieBreak: TieByInput, AllowDeleteNewest: true}).Evaluate(p, at("2026-01-01T00:00:00Z"), items, &res); err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, r := range Explain(p, items, &res)[0].Reasons {
				tags := timeTags(items, r.Item.ID)
				got = append(got, line(r.Item.Time, tags, r.Matches, r.Counters))
			}
			for _, g := range golden.Policies[i] {
				want = append(want, line(g.Time, g.Tags, g.Matches, g.Counters))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("kept %d, restic %d\n\tgot  %q\n\twant %q", len(got), len(want), got, want)
			}
		})
	}
}

func timeTags(items []Item, id string) []string {
	for _, it := range items {
		if it.ID == id {
			if it.Tags == nil {
				return []string{}
			}
			return it.Tags
		}
	}
	panic(id)
}
