package retention_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/groundskeeper-io/groundskeeper/retention"
)

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// print shows one line per item: keep or delete, why, and until when.
func show(items []retention.Item, res *retention.Result) {
	for i, d := range res.Decisions {
		switch {
		case d.Forced:
			fmt.Printf("%-12s delete (forced)\n", items[i].ID)
		case !d.Keep:
			fmt.Printf("%-12s delete\n", items[i].ID)
		case d.DeletableAt.IsZero():
			fmt.Printf("%-12s keep   %v\n", items[i].ID, d.Reasons)
		default:
			fmt.Printf("%-12s keep   %v until %s\n", items[i].ID, d.Reasons, d.DeletableAt.UTC().Format(time.RFC3339))
		}
	}
}

func ExampleParseDuration() {
	for _, s := range []string{"30d", "2w", "90m", "1d12h", "720h0m0s", "0d", "30", "-1d", "3x"} {
		d, err := retention.ParseDuration(s)
		var de *retention.DurationError
		switch {
		case errors.As(err, &de):
			fmt.Printf("%-9s rejected: %s\n", s, de.Reason)
		case err != nil:
			fmt.Printf("%-9s %v\n", s, err)
		default:
			fmt.Printf("%-9s %-9v canonical %s\n", s, d, retention.Format(d))
		}
	}
	// Output:
	// 30d       720h0m0s  canonical 30d
	// 2w        336h0m0s  canonical 14d
	// 90m       1h30m0s   canonical 1h30m
	// 1d12h     36h0m0s   canonical 1d12h
	// 720h0m0s  720h0m0s  canonical 30d
	// 0d        0s        canonical 0s
	// 30        rejected: missing unit (use s, m, h, d or w)
	// -1d       rejected: a time-to-live has no sign
	// 3x        rejected: unknown unit "x"
}

// aerospike-operator's backups carry .spec.ttl in days, counted from their
// creationTimestamp, and "0d" means keep forever.
func ExampleTTL() {
	now := mustTime("2026-11-22T12:00:00Z")
	backups := []struct {
		name, ttl string
		created   time.Time
	}{
		{"nightly-old", "30d", now.Add(-31 * retention.Day)},
		{"nightly-new", "30d", now.Add(-2 * retention.Day)},
		{"pre-upgrade", "0d", now.Add(-400 * retention.Day)},
	}
	var res retention.Result
	for _, b := range backups {
		ttl, err := retention.ParseDuration(b.ttl)
		if err != nil {
			fmt.Println(err)
			continue
		}
		items := []retention.Item{{ID: b.name, Time: b.created}}
		policy := retention.TTL{After: ttl, ZeroMeansForever: true}
		// Each backup has its own TTL, so each is judged alone: the guard,
		// which keeps the newest backup of a group, would keep every one.
		alone := retention.Options{AllowDeleteNewest: true}
		if err := alone.Evaluate(policy, now, items, &res); err != nil {
			fmt.Println(err)
			continue
		}
		show(items, &res)
	}
	// Output:
	// nightly-old  delete
	// nightly-new  keep   ttl until 2026-12-20T12:00:00Z
	// pre-upgrade  keep   ttl
}

// etcd-druid's ttlSecondsAfterFinished counts from the task's finish; zero
// makes a finished task eligible at once, as in Kubernetes Jobs.
func ExampleTTL_finishedTasks() {
	now := mustTime("2026-11-22T12:00:00Z")
	ttl, err := retention.Seconds(3600) // ttlSecondsAfterFinished: 3600
	if err != nil {
		panic(err)
	}
	tasks := []retention.Item{
		{ID: "defrag-1", Time: now.Add(-2 * time.Hour)},    // finished
		{ID: "defrag-2", Time: now.Add(-10 * time.Minute)}, // finished
		{ID: "compact-3", Time: time.Time{}},               // still running: no finish time
	}
	var res retention.Result
	// Tasks are not backups: the guard, which keeps the newest one whatever
	// the policy, is turned off.
	opts := retention.Options{AllowDeleteNewest: true}
	if err := opts.Evaluate(retention.TTL{After: ttl}, now, tasks, &res); err != nil {
		panic(err)
	}
	show(tasks, &res)
	fmt.Println("requeue after", res.RequeueAfter(now))
	// Output:
	// defrag-1     delete
	// defrag-2     keep   ttl until 2026-11-22T12:50:00Z
	// compact-3    keep   no-time
	// requeue after 50m0s
}

// aerospike-operator collects a claim when the TTL from its
// last-unmounted-on annotation has passed; a claim without the annotation is
// in use and has no Time, so it is kept.
func ExampleTTL_annotation() {
	now := mustTime("2026-11-22T12:00:00Z")
	annotations := map[string]map[string]string{
		"data-aerospike-0": {"aerospike.travelaudience.com/last-unmounted-on": "2026-10-01T08:00:00+02:00"},
		"data-aerospike-1": {"aerospike.travelaudience.com/last-unmounted-on": "2026-11-20T08:00:00Z"},
		"data-aerospike-2": {},
	}
	var claims []retention.Item
	for _, name := range []string{"data-aerospike-0", "data-aerospike-1", "data-aerospike-2"} {
		it := retention.Item{ID: name}
		if v, ok := annotations[name]["aerospike.travelaudience.com/last-unmounted-on"]; ok {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				fmt.Printf("%s: bad annotation %q: %v\n", name, v, err)
				continue
			}
			it.Time = t
		}
		claims = append(claims, it)
	}
	var res retention.Result
	// Claims are not backups: no guard keeps the newest one.
	opts := retention.Options{AllowDeleteNewest: true}
	if err := opts.Evaluate(retention.TTL{After: 30 * retention.Day}, now, claims, &res); err != nil {
		panic(err)
	}
	show(claims, &res)
	// Output:
	// data-aerospike-0 delete
	// data-aerospike-1 keep   ttl until 2026-12-20T08:00:00Z
	// data-aerospike-2 keep   no-time
}

// Gardener keeps a backup entry for deletionGracePeriod after its shoot was
// deleted, unless someone forces the deletion.
func ExampleTTL_deletionGracePeriod() {
	now := mustTime("2026-11-22T12:00:00Z")
	entries := []retention.Item{
		{ID: "shoot-a", Time: now.Add(-3 * retention.Day)}, // deletion timestamp
		{ID: "shoot-b", Time: now.Add(-6 * retention.Day)},
		{ID: "shoot-c", Time: now.Add(-time.Hour), Force: true},
		{ID: "shoot-d", Time: now.Add(-9 * retention.Day), Hold: true},
	}
	var res retention.Result
	// Each entry belongs to its own deleted shoot: no guard keeps the
	// newest one.
	opts := retention.Options{AllowDeleteNewest: true}
	if err := opts.Evaluate(retention.TTL{After: 5 * retention.Day}, now, entries, &res); err != nil {
		panic(err)
	}
	show(entries, &res)
	// Output:
	// shoot-a      keep   ttl until 2026-11-24T12:00:00Z
	// shoot-b      delete
	// shoot-c      delete (forced)
	// shoot-d      keep   hold
}

func ExampleNewest() {
	now := mustTime("2026-11-22T12:00:00Z")
	var backups []retention.Item
	for i := range 5 {
		backups = append(backups, retention.Item{ID: fmt.Sprintf("full-%d", i), Time: now.Add(-time.Duration(i) * retention.Day)})
	}
	var res retention.Result
	if err := retention.Evaluate(retention.Newest{N: 3}, now, backups, &res); err != nil {
		panic(err)
	}
	show(backups, &res)
	// Output:
	// full-0       keep   newest+guard
	// full-1       keep   newest
	// full-2       keep   newest
	// full-3       delete
	// full-4       delete
}

// etcd-druid's copy-backups task copies at most maxBackups backups, newest
// first, that are at most maxBackupAge days old: both must agree, so All.
func ExampleAll() {
	now := mustTime("2026-11-22T12:00:00Z")
	maxBackupAge, err := retention.Days(3) // maxBackupAge: 3
	if err != nil {
		panic(err)
	}
	const maxBackups = 2
	var backups []retention.Item
	for _, age := range []time.Duration{1, 25, 49, 97} {
		backups = append(backups, retention.Item{ID: fmt.Sprintf("full-%dh", age), Time: now.Add(-age * time.Hour)})
	}
	policy := retention.All{retention.TTL{After: maxBackupAge}, retention.Newest{N: maxBackups}}
	var res retention.Result
	if err := retention.Evaluate(policy, now, backups, &res); err != nil {
		panic(err)
	}
	for i, d := range res.Decisions {
		if d.Keep {
			fmt.Println("copy", backups[i].ID)
		}
	}
	// Output:
	// copy full-1h
	// copy full-25h
}

// A TTL alone deletes every backup once backups have failed for longer than
// the TTL. Any with Newest keeps the newest whatever the TTL says, and Hold
// protects a backup someone still needs.
func ExampleAny() {
	now := mustTime("2026-11-22T12:00:00Z")
	backups := []retention.Item{
		{ID: "last-good", Time: now.Add(-40 * retention.Day)},
		{ID: "older", Time: now.Add(-41 * retention.Day)},
		{ID: "evidence", Time: now.Add(-90 * retention.Day), Hold: true},
		{ID: "oldest", Time: now.Add(-95 * retention.Day)},
	}
	policy := retention.Any{retention.TTL{After: 30 * retention.Day}, retention.Newest{N: 1}}
	var res retention.Result
	if err := retention.Evaluate(policy, now, backups, &res); err != nil {
		panic(err)
	}
	show(backups, &res)
	// Output:
	// last-good    keep   newest+guard
	// older        delete
	// evidence     keep   hold
	// oldest       delete
}

// restic's documentation: one backup every Sunday for 12 weeks, then
// "forget --keep-daily 4" keeps the last four Sundays.
func ExampleCalendar() {
	var snapshots []retention.Item
	for t := mustTime("2019-09-01T11:00:00Z"); !t.After(mustTime("2019-11-17T11:00:00Z")); t = t.AddDate(0, 0, 7) {
		snapshots = append(snapshots, retention.Item{ID: t.Format(time.DateOnly), Time: t})
	}
	var res retention.Result
	if err := retention.Evaluate(retention.Calendar{Daily: 4}, mustTime("2019-11-18T00:00:00Z"), snapshots, &res); err != nil {
		panic(err)
	}
	show(snapshots, &res)
	// Output:
	// 2019-09-01   delete
	// 2019-09-08   delete
	// 2019-09-15   delete
	// 2019-09-22   delete
	// 2019-09-29   delete
	// 2019-10-06   delete
	// 2019-10-13   delete
	// 2019-10-20   delete
	// 2019-10-27   keep   daily
	// 2019-11-03   keep   daily
	// 2019-11-10   keep   daily
	// 2019-11-17   keep   daily+guard
}

// Full snapshots every 6 hours for 40 days, thinned as etcd-backup-restore
// does: the current hour, hourly today, daily for a week, weekly for four.
func ExampleExponential() {
	now := mustTime("2026-11-22T12:30:00Z") // a Sunday
	var snapshots []retention.Item
	for t := now.Add(-40 * retention.Day).Truncate(6 * time.Hour); !t.After(now); t = t.Add(6 * time.Hour) {
		snapshots = append(snapshots, retention.Item{ID: t.Format("Jan 02 15h"), Time: t})
	}
	var res retention.Result
	if err := retention.Evaluate(retention.Exponential{}, now, snapshots, &res); err != nil {
		panic(err)
	}
	for i, d := range res.Decisions {
		switch {
		case !d.Keep:
		case d.DeletableAt.IsZero():
			fmt.Printf("%s  %-7v for good\n", snapshots[i].ID, d.Reasons)
		default:
			fmt.Printf("%s  %-7v until %s\n", snapshots[i].ID, d.Reasons, d.DeletableAt.Format("Jan 02 15h"))
		}
	}
	fmt.Printf("kept %d of %d, evaluate again at %s\n", res.Kept, len(snapshots), res.Next.Format("Jan 02 15:04"))
	// Output:
	// Oct 24 18h  weekly  until Nov 23 00h
	// Oct 31 18h  weekly  until Nov 23 00h
	// Nov 07 18h  weekly  until Nov 23 00h
	// Nov 14 18h  weekly  until Nov 23 00h
	// Nov 15 18h  daily   until Nov 24 00h
	// Nov 16 18h  daily   until Nov 25 00h
	// Nov 17 18h  daily   until Nov 26 00h
	// Nov 18 18h  daily   until Nov 27 00h
	// Nov 19 18h  daily   until Nov 28 00h
	// Nov 20 18h  daily   until Nov 29 00h
	// Nov 21 18h  daily   until Nov 30 00h
	// Nov 22 00h  hourly  until Nov 23 00h
	// Nov 22 06h  hourly  until Nov 23 00h
	// Nov 22 12h  newest+guard for good
	// kept 14 of 161, evaluate again at Nov 23 00:00
}
