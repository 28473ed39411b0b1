package retention

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// at parses an RFC 3339 timestamp or fails the test binary.
func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

var now = at("2026-11-22T12:00:00Z")

// want describes the expected decision about one item, by ID.
type want struct {
	keep        bool
	reasons     Reason
	deletableAt time.Time
	skew        bool
	forced      bool
}

// policyAlone judges items by the policy alone: most tests here are about a
// policy, and their items have no Outcome, which the guard protects.
var policyAlone = Options{AllowDeleteNewest: true}

// evaluate applies p alone (the guard off); evaluateGuarded with the default
// Options (the guard on).
func evaluate(t *testing.T, p Policy, now time.Time, items []Item) *Result {
	t.Helper()
	return evaluateOpts(t, policyAlone, p, now, items)
}

func evaluateGuarded(t *testing.T, p Policy, now time.Time, items []Item) *Result {
	t.Helper()
	return evaluateOpts(t, Options{}, p, now, items)
}

func evaluateOpts(t *testing.T, o Options, p Policy, now time.Time, items []Item) *Result {
	t.Helper()
	var res Result
	if err := o.Evaluate(p, now, items, &res); err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	if len(res.Decisions) != len(items) {
		t.Fatalf("%d decisions for %d items", len(res.Decisions), len(items))
	}
	return &res
}

func checkDecisions(t *testing.T, items []Item, res *Result, wants map[string]want) {
	t.Helper()
	for i, it := range items {
		w, ok := wants[it.ID]
		if !ok {
			t.Fatalf("no expectation for item %q", it.ID)
		}
		d := res.Decisions[i]
		got := want{d.Keep, d.Reasons, d.DeletableAt, d.Skew, d.Forced}
		if got.keep != w.keep || got.reasons != w.reasons || !got.deletableAt.Equal(w.deletableAt) || got.skew != w.skew || got.forced != w.forced {
			t.Errorf("item %q: got keep=%v reasons=%v deletableAt=%v skew=%v forced=%v\n\t\twant keep=%v reasons=%v deletableAt=%v skew=%v forced=%v",
				it.ID, got.keep, got.reasons, got.deletableAt, got.skew, got.forced,
				w.keep, w.reasons, w.deletableAt, w.skew, w.forced)
		}
	}
}

func TestTTL(t *testing.T) {
	const month = 30 * Day
	for _, tc := range []struct {
		name  string
		ttl   TTL
		now   time.Time
		items []Item
		wants map[string]want
		next  time.Time
	}{
		{
			name:  "backup created exactly 30d ago with a 30d TTL has expired",
			ttl:   TTL{After: month},
			items: []Item{{ID: "b", Time: now.Add(-month)}},
			wants: map[string]want{"b": {}},
		},
		{
			name:  "backup created 30d minus 1ns ago is kept until the instant its TTL runs out",
			ttl:   TTL{After: month},
			items: []Item{{ID: "b", Time: now.Add(-month + 1)}},
			wants: map[string]want{"b": {keep: true, reasons: ReasonTTL, deletableAt: now.Add(1)}},
			next:  now.Add(1),
		},
		{
			name:  "zero TTL expires a task that finished this very instant",
			ttl:   TTL{},
			items: []Item{{ID: "task", Time: now}},
			wants: map[string]want{"task": {}},
		},
		{
			name:  "zero TTL keeps a task that finishes 1ns in the future, and records the skew",
			ttl:   TTL{},
			items: []Item{{ID: "task", Time: now.Add(1)}},
			wants: map[string]want{"task": {keep: true, reasons: ReasonTTL, deletableAt: now.Add(1), skew: true}},
			next:  now.Add(1),
		},
		{
			name:  "aerospike 0d with ZeroMeansForever keeps a ten-year-old backup forever",
			ttl:   TTL{ZeroMeansForever: true},
			items: []Item{{ID: "b", Time: now.AddDate(-10, 0, 0)}},
			wants: map[string]want{"b": {keep: true, reasons: ReasonTTL}},
		},
		{
			name:  "ZeroMeansForever does nothing to a non-zero TTL",
			ttl:   TTL{After: time.Hour, ZeroMeansForever: true},
			items: []Item{{ID: "b", Time: now.Add(-time.Hour)}},
			wants: map[string]want{"b": {}},
		},
		{
			name:  "a creation timestamp an hour in the future keeps the item until an hour plus its TTL",
			ttl:   TTL{After: 2 * time.Hour},
			items: []Item{{ID: "skewed", Time: now.Add(time.Hour)}},
			wants: map[string]want{"skewed": {keep: true, reasons: ReasonTTL, deletableAt: now.Add(3 * time.Hour), skew: true}},
			next:  now.Add(3 * time.Hour),
		},
		{
			name:  "a one-day TTL from 28 February 2024 runs out on the leap day, not on 1 March",
			ttl:   TTL{After: Day},
			now:   at("2024-02-29T11:59:59Z"),
			items: []Item{{ID: "b", Time: at("2024-02-28T12:00:00Z")}},
			wants: map[string]want{"b": {keep: true, reasons: ReasonTTL, deletableAt: at("2024-02-29T12:00:00Z")}},
			next:  at("2024-02-29T12:00:00Z"),
		},
		{
			name:  "a 365-day TTL from New Year 2024 runs out on 31 December, because 2024 is a leap year",
			ttl:   TTL{After: 365 * Day},
			now:   at("2024-12-31T00:00:00Z"),
			items: []Item{{ID: "b", Time: at("2024-01-01T00:00:00Z")}},
			wants: map[string]want{"b": {}},
		},
		{
			name:  "Gardener backup entry is kept through the deletion grace period after its owner's deletion",
			ttl:   TTL{After: 5 * Day},
			items: []Item{{ID: "entry", Time: now.Add(-5*Day + time.Second)}},
			wants: map[string]want{"entry": {keep: true, reasons: ReasonTTL, deletableAt: now.Add(time.Second)}},
			next:  now.Add(time.Second),
		},
		{
			name:  "aerospike claim unmounted at a +02:00 annotation timestamp counts from the same instant as UTC",
			ttl:   TTL{After: 2 * Day},
			items: []Item{{ID: "pvc", Time: at("2026-11-20T14:00:00+02:00")}}, // 12:00Z
			wants: map[string]want{"pvc": {}},
		},
		{
			name:  "a held backup past its TTL is kept, with no deletion time",
			ttl:   TTL{After: Day},
			items: []Item{{ID: "held", Time: now.Add(-2 * Day), Hold: true}},
			wants: map[string]want{"held": {keep: true, reasons: ReasonHold}},
		},
		{
			name:  "a held backup within its TTL is kept for both reasons, with no deletion time",
			ttl:   TTL{After: Day},
			items: []Item{{ID: "held", Time: now.Add(-time.Hour), Hold: true}},
			wants: map[string]want{"held": {keep: true, reasons: ReasonHold | ReasonTTL}},
		},
		{
			name:  "a forced backup within its TTL is deleted and marked forced",
			ttl:   TTL{After: Day},
			items: []Item{{ID: "forced", Time: now.Add(-time.Hour), Force: true}},
			wants: map[string]want{"forced": {forced: true}},
		},
		{
			name:  "hold beats force",
			ttl:   TTL{After: Day},
			items: []Item{{ID: "both", Time: now.Add(-2 * Day), Hold: true, Force: true}},
			wants: map[string]want{"both": {keep: true, reasons: ReasonHold}},
		},
		{
			name:  "a forced item in the future is deleted, and the skew is still recorded",
			ttl:   TTL{After: Day},
			items: []Item{{ID: "f", Time: now.Add(time.Hour), Force: true}},
			wants: map[string]want{"f": {forced: true, skew: true}},
		},
		{
			name:  "a claim without the last-unmounted annotation (zero Time) is kept as of unknown age",
			ttl:   TTL{},
			items: []Item{{ID: "pvc"}},
			wants: map[string]want{"pvc": {keep: true, reasons: ReasonNoTime}},
		},
		{
			name:  "a held item with no Time is kept for both reasons",
			ttl:   TTL{},
			items: []Item{{ID: "pvc", Hold: true}},
			wants: map[string]want{"pvc": {keep: true, reasons: ReasonNoTime | ReasonHold}},
		},
		{
			name:  "a forced item with no Time is deleted",
			ttl:   TTL{},
			items: []Item{{ID: "pvc", Force: true}},
			wants: map[string]want{"pvc": {forced: true}},
		},
		{
			name:  "empty input gives no decisions and no requeue",
			ttl:   TTL{After: Day},
			wants: map[string]want{},
		},
		{
			name: "the earliest deletion time among kept items is the requeue instant",
			ttl:  TTL{After: 10 * time.Minute},
			items: []Item{
				{ID: "old", Time: now.Add(-time.Hour)},
				{ID: "late", Time: now.Add(-time.Minute)},
				{ID: "soon", Time: now.Add(-9 * time.Minute)},
				{ID: "held", Time: now.Add(-9*time.Minute - time.Second), Hold: true},
			},
			wants: map[string]want{
				"old":  {},
				"late": {keep: true, reasons: ReasonTTL, deletableAt: now.Add(9 * time.Minute)},
				"soon": {keep: true, reasons: ReasonTTL, deletableAt: now.Add(time.Minute)},
				"held": {keep: true, reasons: ReasonHold | ReasonTTL},
			},
			next: now.Add(time.Minute),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.now
			if n.IsZero() {
				n = now
			}
			res := evaluate(t, tc.ttl, n, tc.items)
			checkDecisions(t, tc.items, res, tc.wants)
			if !res.Next.Equal(tc.next) {
				t.Errorf("Next = %v, want %v", res.Next, tc.next)
			}
			wantAfter := time.Duration(0)
			if !tc.next.IsZero() {
				wantAfter = tc.next.Sub(n)
			}
			if got := res.RequeueAfter(n); got != wantAfter {
				t.Errorf("RequeueAfter = %v, want %v", got, wantAfter)
			}
			kept := 0
			for _, d := range res.Decisions {
				if d.Keep {
					kept++
				}
			}
			if res.Kept != kept || res.Deleted != len(tc.items)-kept {
				t.Errorf("Kept, Deleted = %d, %d; want %d, %d", res.Kept, res.Deleted, kept, len(tc.items)-kept)
			}
		})
	}
}

func TestNewest(t *testing.T) {
	h := time.Hour
	for _, tc := range []struct {
		name  string
		n     int
		items []Item
		wants map[string]want
		next  time.Time
	}{
		{
			name:  "keeps the newest two of three whatever the input order",
			n:     2,
			items: []Item{{ID: "mid", Time: now.Add(-2 * h)}, {ID: "old", Time: now.Add(-3 * h)}, {ID: "new", Time: now.Add(-h)}},
			wants: map[string]want{"new": {keep: true, reasons: ReasonNewest}, "mid": {keep: true, reasons: ReasonNewest}, "old": {}},
		},
		{
			name:  "zero keeps nothing",
			n:     0,
			items: []Item{{ID: "a", Time: now.Add(-h)}},
			wants: map[string]want{"a": {}},
		},
		{
			name:  "a count larger than the input keeps everything",
			n:     10,
			items: []Item{{ID: "a", Time: now.Add(-h)}, {ID: "b", Time: now.Add(-2 * h)}},
			wants: map[string]want{"a": {keep: true, reasons: ReasonNewest}, "b": {keep: true, reasons: ReasonNewest}},
		},
		{
			name:  "of two items with identical timestamps the one whose ID sorts first counts as newer",
			n:     1,
			items: []Item{{ID: "b", Time: now.Add(-h)}, {ID: "a", Time: now.Add(-h)}},
			wants: map[string]want{"a": {keep: true, reasons: ReasonNewest}, "b": {}},
		},
		{
			name:  "empty input gives no decisions",
			n:     1,
			wants: map[string]want{},
		},
		{
			name:  "a single item is kept",
			n:     1,
			items: []Item{{ID: "only", Time: now.Add(-100 * Day)}},
			wants: map[string]want{"only": {keep: true, reasons: ReasonNewest}},
		},
		{
			name:  "an item at exactly now takes part in the ranking",
			n:     1,
			items: []Item{{ID: "now", Time: now}, {ID: "old", Time: now.Add(-h)}},
			wants: map[string]want{"now": {keep: true, reasons: ReasonNewest}, "old": {}},
		},
		{
			name: "an item from the future is kept but does not push the newest present item out",
			n:    1,
			items: []Item{
				{ID: "future", Time: now.Add(h)},
				{ID: "new", Time: now.Add(-h)},
				{ID: "old", Time: now.Add(-2 * h)},
			},
			wants: map[string]want{
				"future": {keep: true, reasons: ReasonFuture, deletableAt: now.Add(h), skew: true},
				"new":    {keep: true, reasons: ReasonNewest, deletableAt: now.Add(h)},
				"old":    {},
			},
			next: now.Add(h),
		},
		{
			name:  "a held item takes its place in the ranking like any other",
			n:     1,
			items: []Item{{ID: "new", Time: now.Add(-h)}, {ID: "held", Time: now.Add(-2 * h), Hold: true}, {ID: "old", Time: now.Add(-3 * h)}},
			wants: map[string]want{"new": {keep: true, reasons: ReasonNewest}, "held": {keep: true, reasons: ReasonHold}, "old": {}},
		},
		{
			name:  "a forced newest item is deleted and the next one moves up to take its place",
			n:     1,
			items: []Item{{ID: "new", Time: now.Add(-h), Force: true}, {ID: "old", Time: now.Add(-2 * h)}, {ID: "older", Time: now.Add(-3 * h)}},
			wants: map[string]want{"new": {forced: true}, "old": {keep: true, reasons: ReasonNewest}, "older": {}},
		},
		{
			name:  "items with no Time are kept and take no place",
			n:     1,
			items: []Item{{ID: "none"}, {ID: "new", Time: now.Add(-h)}, {ID: "old", Time: now.Add(-2 * h)}},
			wants: map[string]want{"none": {keep: true, reasons: ReasonNoTime}, "new": {keep: true, reasons: ReasonNewest}, "old": {}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := evaluate(t, Newest{N: tc.n}, now, tc.items)
			checkDecisions(t, tc.items, res, tc.wants)
			if !res.Next.Equal(tc.next) {
				t.Errorf("Next = %v, want %v", res.Next, tc.next)
			}
		})
	}
}

func TestComposition(t *testing.T) {
	h := time.Hour
	for _, tc := range []struct {
		name   string
		policy Policy
		items  []Item
		wants  map[string]want
		next   time.Time
	}{
		{
			name:   "a 30d TTL guarded by newest 1 keeps the last backup after backups stopped for 40 days",
			policy: Any{TTL{After: 30 * Day}, Newest{N: 1}},
			items:  []Item{{ID: "last", Time: now.Add(-40 * Day)}, {ID: "before", Time: now.Add(-41 * Day)}},
			wants:  map[string]want{"last": {keep: true, reasons: ReasonNewest}, "before": {}},
		},
		{
			name:   "keep wins: an item kept by its TTL and as the newest never becomes deletable by time",
			policy: Any{TTL{After: Day}, Newest{N: 1}},
			items:  []Item{{ID: "new", Time: now.Add(-h)}, {ID: "old", Time: now.Add(-2 * h)}},
			wants: map[string]want{
				"new": {keep: true, reasons: ReasonTTL | ReasonNewest},
				"old": {keep: true, reasons: ReasonTTL, deletableAt: now.Add(22 * h)},
			},
			next: now.Add(22 * h),
		},
		{
			name:   "an item kept by two TTLs stays until the later one runs out",
			policy: Any{TTL{After: 2 * h}, TTL{After: 5 * h}},
			items:  []Item{{ID: "a", Time: now.Add(-h)}},
			wants:  map[string]want{"a": {keep: true, reasons: ReasonTTL, deletableAt: now.Add(4 * h)}},
			next:   now.Add(4 * h),
		},
		{
			name:   "copy-backups keeps the newest maxBackups that are younger than maxBackupAge",
			policy: All{TTL{After: 3 * Day}, Newest{N: 2}},
			items: []Item{
				{ID: "d0", Time: now.Add(-h)},
				{ID: "d1", Time: now.Add(-Day - h)},
				{ID: "d2", Time: now.Add(-2*Day - h)},
				{ID: "d4", Time: now.Add(-4*Day - h)},
			},
			wants: map[string]want{
				"d0": {keep: true, reasons: ReasonTTL | ReasonNewest, deletableAt: now.Add(3*Day - h)},
				"d1": {keep: true, reasons: ReasonTTL | ReasonNewest, deletableAt: now.Add(2*Day - h)},
				"d2": {},
				"d4": {},
			},
			next: now.Add(2*Day - h),
		},
		{
			name:   "copy-backups copies fewer than maxBackups when the rest are too old",
			policy: All{TTL{After: 3 * Day}, Newest{N: 3}},
			items:  []Item{{ID: "d0", Time: now.Add(-h)}, {ID: "d4", Time: now.Add(-4 * Day)}, {ID: "d5", Time: now.Add(-5 * Day)}},
			wants: map[string]want{
				"d0": {keep: true, reasons: ReasonTTL | ReasonNewest, deletableAt: now.Add(3*Day - h)},
				"d4": {},
				"d5": {},
			},
			next: now.Add(3*Day - h),
		},
		{
			name:   "nested composites: a guard around a copy filter",
			policy: Any{All{TTL{After: Day}, Newest{N: 1}}, Newest{N: 2}},
			items:  []Item{{ID: "a", Time: now.Add(-2 * Day)}, {ID: "b", Time: now.Add(-3 * Day)}, {ID: "c", Time: now.Add(-4 * Day)}},
			wants: map[string]want{
				"a": {keep: true, reasons: ReasonNewest},
				"b": {keep: true, reasons: ReasonNewest},
				"c": {},
			},
		},
		{
			name:   "Gardener force deletion overrides the grace period, and the newest guard",
			policy: Any{TTL{After: 5 * Day}, Newest{N: 1}},
			items:  []Item{{ID: "entry", Time: now.Add(-h), Force: true}},
			wants:  map[string]want{"entry": {forced: true}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := evaluate(t, tc.policy, now, tc.items)
			checkDecisions(t, tc.items, res, tc.wants)
			if !res.Next.Equal(tc.next) {
				t.Errorf("Next = %v, want %v", res.Next, tc.next)
			}
		})
	}
}

func TestInvalidPolicies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Policy
		msg    string
	}{
		{"nil policy", nil, "nil Policy"},
		{"negative TTL", TTL{After: -time.Second}, "TTL.After = -1s: must not be negative"},
		{"negative count", Newest{N: -1}, "Newest.N = -1: must not be negative"},
		{"calendar count below Unlimited", Calendar{Daily: -2}, "Calendar.Daily = -2: must be a count or Unlimited"},
		{"negative calendar Within", Calendar{Within: -time.Hour}, "Calendar.Within = -1h0m0s"},
		{"empty Any", Any{}, "Any is empty"},
		{"empty All", All{}, "All is empty"},
		{"nil member names its place", Any{TTL{}, nil}, "Any[1] is nil"},
		{"bad member names its path", Any{TTL{}, All{Newest{N: 1}, Newest{N: -1}}}, "Any[1].All[1].Newest.N = -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Result{Decisions: make([]Decision, 3)}
			err := Evaluate(tc.policy, now, []Item{{ID: "a", Time: now}}, &res)
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("err = %v, want ErrInvalidPolicy", err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %q, want it to contain %q", err, tc.msg)
			}
			if len(res.Decisions) != 0 || res.Kept != 0 {
				t.Fatalf("a failed Evaluate left decisions behind: %+v", res)
			}
		})
	}
}

func TestReasonString(t *testing.T) {
	for _, tc := range []struct {
		r    Reason
		want string
	}{
		{0, "none"},
		{ReasonTTL, "ttl"},
		{ReasonHold | ReasonTTL | ReasonNewest, "hold+ttl+newest"},
		{ReasonDaily | ReasonOldest, "daily+oldest"},
		{1 << 15, "within-hourly"}, // bit 15 was unnamed before issue 17
		{1 << 30, "reason(30)"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("Reason(%d).String() = %q, want %q", uint32(tc.r), got, tc.want)
		}
	}
}

func TestResultIsReusedWithoutStaleState(t *testing.T) {
	var res Result
	items := []Item{{ID: "a", Time: now.Add(-time.Hour), Force: true}, {ID: "b", Time: now.Add(-time.Hour)}}
	if err := policyAlone.Evaluate(TTL{After: Day}, now, items, &res); err != nil {
		t.Fatal(err)
	}
	if err := policyAlone.Evaluate(Newest{N: 5}, now, items[1:], &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Decisions) != 1 || !res.Decisions[0].Keep || res.Decisions[0].Forced || res.Decisions[0].Reasons != ReasonNewest {
		t.Fatalf("second evaluation: %+v", res.Decisions)
	}
	if res.Kept != 1 || res.Deleted != 0 || !res.Next.IsZero() {
		t.Fatalf("second evaluation totals: kept %d deleted %d next %v", res.Kept, res.Deleted, res.Next)
	}
}

func TestEvaluateDoesNotModifyItems(t *testing.T) {
	items := []Item{{ID: "b", Time: now.Add(-time.Hour)}, {ID: "a", Time: now.Add(-2 * time.Hour)}, {ID: "c", Time: now.Add(time.Hour)}}
	before := slices.Clone(items)
	evaluate(t, Any{Calendar{Daily: 1}, Exponential{}, Newest{N: 1}, TTL{After: time.Minute}}, now, items)
	if !reflect.DeepEqual(items, before) { // Item has Tags: not comparable with ==
		t.Fatalf("items changed: %v, was %v", items, before)
	}
}
