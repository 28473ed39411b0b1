package retention_test

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/groundskeeper-io/groundskeeper/retention"
)

// Tagged backups are kept whatever their age (restic's --keep-tag): here the
// backup taken before an upgrade, besides the newest two.
func ExampleCalendar_tags() {
	now := mustTime("2026-11-22T12:00:00Z")
	items := []retention.Item{
		{ID: "nightly-22", Time: mustTime("2026-11-22T02:00:00Z")},
		{ID: "nightly-21", Time: mustTime("2026-11-21T02:00:00Z")},
		{ID: "nightly-20", Time: mustTime("2026-11-20T02:00:00Z")},
		{ID: "pre-upgrade", Time: mustTime("2026-10-01T09:00:00Z"), Tags: []string{"manual", "pre-upgrade"}},
		{ID: "manual-test", Time: mustTime("2026-09-01T09:00:00Z"), Tags: []string{"manual"}},
	}
	policy, err := retention.ParsePolicy("last=2,tag=manual+pre-upgrade")
	if err != nil {
		panic(err)
	}
	var res retention.Result
	if err := retention.Evaluate(policy, now, items, &res); err != nil {
		panic(err)
	}
	show(items, &res)
	// Output:
	// nightly-22   keep   newest+guard
	// nightly-21   keep   newest
	// nightly-20   delete
	// pre-upgrade  keep   tag
	// manual-test  delete
}

// A calendar span counts back from the newest backup in years, months, days
// and hours: "1m" from March 31 reaches back to March 3, as in restic, and
// keep-within-daily keeps one backup a day inside the span.
func ExampleParseSpan() {
	for _, s := range []string{"1y2m3d4h", "1m", "7d", "1h30m", "2w"} {
		sp, err := retention.ParseSpan(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%-9s = %d years, %d months, %d days, %d hours\n", s, sp.Years, sp.Months, sp.Days, sp.Hours)
	}
	items := []retention.Item{
		{ID: "mar-31-b", Time: mustTime("2023-03-31T12:00:00Z")},
		{ID: "mar-31-a", Time: mustTime("2023-03-31T06:00:00Z")},
		{ID: "mar-04", Time: mustTime("2023-03-04T12:00:00Z")},
		{ID: "mar-03", Time: mustTime("2023-03-03T12:00:00Z")},
		{ID: "feb-28", Time: mustTime("2023-02-28T12:00:00Z")},
	}
	var res retention.Result
	policy := retention.Calendar{WithinDaily: retention.Span{Months: 1}}
	if err := retention.Evaluate(policy, mustTime("2023-04-01T00:00:00Z"), items, &res); err != nil {
		panic(err)
	}
	show(items, &res)
	// Output:
	// 1y2m3d4h  = 1 years, 2 months, 3 days, 4 hours
	// 1m        = 0 years, 1 months, 0 days, 0 hours
	// 7d        = 0 years, 0 months, 7 days, 0 hours
	// retention: invalid span "1h30m": 30m after h: in a span m means months, which come before days and hours; minutes (as in ParseDuration) cannot be expressed in a span
	// retention: invalid span "2w": unit "w": restic has no weeks; write 14d
	// mar-31-b     keep   within-daily+guard
	// mar-31-a     delete
	// mar-04       keep   within-daily
	// mar-03       delete
	// feb-28       delete
}

// Failed backups never take a successful backup's place: the newest two
// successful backups are kept however many runs failed since, one failed run
// is kept for its logs, and the guard would keep the last good backup even
// if the policy did not.
func ExampleOutcome() {
	now := mustTime("2026-11-22T12:00:00Z")
	items := []retention.Item{
		{ID: "run-5", Time: mustTime("2026-11-22T02:00:00Z"), Outcome: retention.OutcomeFailed},
		{ID: "run-4", Time: mustTime("2026-11-21T02:00:00Z"), Outcome: retention.OutcomeFailed},
		{ID: "run-3", Time: mustTime("2026-11-20T02:00:00Z"), Outcome: retention.OutcomeFailed},
		{ID: "run-2", Time: mustTime("2026-11-19T02:00:00Z"), Outcome: retention.OutcomeSucceeded},
		{ID: "run-1", Time: mustTime("2026-11-18T02:00:00Z"), Outcome: retention.OutcomeSucceeded},
		{ID: "run-0", Time: mustTime("2026-11-17T02:00:00Z"), Outcome: retention.OutcomeSucceeded},
	}
	var res retention.Result
	if err := retention.Evaluate(retention.Newest{N: 2, Failed: 1}, now, items, &res); err != nil {
		panic(err)
	}
	show(items, &res)
	fmt.Printf("kept %d (%d failed), deleted %d (%d failed)\n", res.Kept, res.FailedKept, res.Deleted, res.FailedDeleted)

	// A TTL alone would let every backup go; the guard keeps run-2.
	if err := retention.Evaluate(retention.TTL{After: 2 * retention.Day}, now, items, &res); err != nil {
		panic(err)
	}
	fmt.Println("under a 2-day TTL:")
	show(items, &res)
	// Output:
	// run-5        keep   failed
	// run-4        delete
	// run-3        delete
	// run-2        keep   newest+guard
	// run-1        keep   newest
	// run-0        delete
	// kept 3 (1 failed), deleted 3 (2 failed)
	// under a 2-day TTL:
	// run-5        keep   ttl until 2026-11-24T02:00:00Z
	// run-4        keep   ttl until 2026-11-23T02:00:00Z
	// run-3        delete
	// run-2        keep   guard
	// run-1        delete
	// run-0        delete
}

// One call evaluates a policy for every backup target: each group keeps its
// own newest, and Result.Groups sums up each group.
func ExampleResult_groups() {
	now := mustTime("2026-11-22T12:00:00Z")
	var items []retention.Item
	for _, target := range []string{"postgres/orders", "etcd/main"} {
		for d := range 4 {
			items = append(items, retention.Item{
				ID:      fmt.Sprintf("%s-%d", target, d),
				Group:   target,
				Time:    now.Add(-time.Duration(d) * retention.Day),
				Outcome: retention.OutcomeSucceeded,
			})
		}
	}
	var res retention.Result
	if err := retention.Evaluate(retention.Calendar{Last: 2}, now, items, &res); err != nil {
		panic(err)
	}
	for _, g := range res.Groups {
		fmt.Printf("%-16s kept %d deleted %d, guarding %s\n", g.Group, g.Kept, g.Deleted, items[g.Guarded].ID)
	}
	// Output:
	// etcd/main        kept 2 deleted 2, guarding etcd/main-0
	// postgres/orders  kept 2 deleted 2, guarding postgres/orders-0
}

// Explain prints what restic forget --dry-run --json prints: per group, what
// is kept and removed, and why, with the counters left.
func ExampleExplain() {
	items := []retention.Item{
		{ID: "a", Time: mustTime("2026-11-22T02:00:00Z")},
		{ID: "b", Time: mustTime("2026-11-21T02:00:00Z")},
		{ID: "c", Time: mustTime("2026-11-21T01:00:00Z")},
		{ID: "d", Time: mustTime("2026-10-02T02:00:00Z")},
	}
	policy := retention.Calendar{Last: 1, Daily: 2, Monthly: 3}
	var res retention.Result
	if err := retention.Evaluate(policy, mustTime("2026-11-22T12:00:00Z"), items, &res); err != nil {
		panic(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	for _, ex := range retention.Explain(policy, items, &res) {
		for _, r := range ex.Reasons {
			if err := enc.Encode(struct {
				ID       string             `json:"id"`
				Matches  []string           `json:"matches"`
				Counters retention.Counters `json:"counters"`
			}{r.Item.ID, r.Matches, r.Counters}); err != nil {
				panic(err)
			}
		}
	}
	// Output:
	// {
	//  "id": "a",
	//  "matches": [
	//   "last snapshot",
	//   "daily snapshot",
	//   "monthly snapshot",
	//   "newest successful (guard)"
	//  ],
	//  "counters": {
	//   "daily": 1,
	//   "monthly": 2
	//  }
	// }
	// {
	//  "id": "b",
	//  "matches": [
	//   "daily snapshot"
	//  ],
	//  "counters": {
	//   "monthly": 2
	//  }
	// }
	// {
	//  "id": "d",
	//  "matches": [
	//   "monthly snapshot"
	//  ],
	//  "counters": {
	//   "monthly": 1
	//  }
	// }
}
