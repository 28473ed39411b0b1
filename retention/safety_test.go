package retention

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFailedItems(t *testing.T) {
	// Newest first: three failed nightly runs after two good ones.
	base := at("2024-03-10T02:00:00Z")
	items := []Item{
		{ID: "fail-3", Time: base, Outcome: OutcomeFailed},
		{ID: "fail-2", Time: base.Add(-Day), Outcome: OutcomeFailed},
		{ID: "fail-1", Time: base.Add(-2 * Day), Outcome: OutcomeFailed},
		{ID: "good-2", Time: base.Add(-3 * Day), Outcome: OutcomeSucceeded},
		{ID: "good-1", Time: base.Add(-4 * Day), Outcome: OutcomeSucceeded},
	}
	now := base.Add(time.Hour)
	for _, tc := range []struct {
		name   string
		policy Policy
		opts   Options
		kept   []string
	}{
		{"failed items take no place among the newest: last 2 keeps both good ones", Calendar{Last: 2}, Options{}, []string{"good-2", "good-1"}},
		{"Calendar.Failed keeps the newest failed ones separately", Calendar{Last: 1, Failed: 1}, Options{}, []string{"fail-3", "good-2"}},
		{"Newest counts successful and failed items separately", Newest{N: 1, Failed: 2}, Options{}, []string{"fail-3", "fail-2", "good-2"}},
		{"failed items do not fill daily buckets", Calendar{Daily: 1}, Options{}, []string{"good-2"}},
		{"within counts from the newest item that did not fail", Calendar{WithinSpan: Span{Days: 2}}, Options{}, []string{"good-2", "good-1"}},
		{"the guard keeps the newest good item when a TTL would let everything go", TTL{After: Day}, Options{}, []string{"fail-3", "good-2"}},
		{"without the guard a TTL lets the good ones go", TTL{After: Day}, Options{AllowDeleteNewest: true}, []string{"fail-3"}},
		{"Failed: Unlimited keeps every failed item", Calendar{Failed: Unlimited}, Options{}, []string{"fail-3", "fail-2", "fail-1", "good-2"}},
		{"the empty Calendar keeps failed items too", Calendar{}, Options{}, []string{"fail-3", "fail-2", "fail-1", "good-2", "good-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := evalKeptOpts(t, tc.opts, tc.policy, now, items)
			if !slices.Equal(got, tc.kept) {
				t.Fatalf("kept %q, want %q", got, tc.kept)
			}
			fk := 0
			for _, id := range tc.kept {
				if strings.HasPrefix(id, "fail") {
					fk++
				}
			}
			if res.FailedKept != fk || res.FailedDeleted != 3-fk || res.Groups[0].FailedKept != fk {
				t.Errorf("failed kept %d deleted %d (group %d), want %d and %d", res.FailedKept, res.FailedDeleted, res.Groups[0].FailedKept, fk, 3-fk)
			}
		})
	}
}

func TestGuard(t *testing.T) {
	base := at("2024-03-10T02:00:00Z")
	items := []Item{
		{ID: "new", Time: base, Outcome: OutcomeSucceeded},
		{ID: "old", Time: base.Add(-Day), Outcome: OutcomeSucceeded},
		{ID: "task", Time: base.Add(-2 * Day)},
	}
	now := base.Add(40 * Day)
	t.Run("the guard keeps the newest successful item and says so", func(t *testing.T) {
		res := evaluateGuarded(t, TTL{After: 30 * Day}, now, items)
		if d := res.Decisions[0]; !d.Keep || d.Reasons != ReasonGuard || !d.DeletableAt.IsZero() {
			t.Fatalf("newest: %+v, want kept by the guard for good", d)
		}
		if res.Decisions[1].Keep || res.Groups[0].Guarded != 0 {
			t.Fatalf("old kept %v, guarded %d", res.Decisions[1].Keep, res.Groups[0].Guarded)
		}
	})
	t.Run("the guard adds its reason to an item the policy keeps anyway", func(t *testing.T) {
		res := evaluateGuarded(t, Newest{N: 1}, now, items)
		if d := res.Decisions[0]; d.Reasons != ReasonNewest|ReasonGuard {
			t.Fatalf("newest kept for %v", d.Reasons)
		}
	})
	t.Run("a forced deletion of the newest moves the guard to the next", func(t *testing.T) {
		forced := slices.Clone(items)
		forced[0].Force = true
		res := evaluateGuarded(t, TTL{After: 30 * Day}, now, forced)
		if !res.Decisions[0].Forced || res.Decisions[1].Reasons != ReasonGuard {
			t.Fatalf("decisions %+v", res.Decisions)
		}
	})
	t.Run("AllowDeleteNewest turns the guard off", func(t *testing.T) {
		_, res := evalKeptOpts(t, Options{AllowDeleteNewest: true}, TTL{After: Day}, now, items)
		if res.Kept != 0 || res.Groups[0].Guarded != -1 {
			t.Fatalf("kept %d, guarded %d", res.Kept, res.Groups[0].Guarded)
		}
	})
	t.Run("the guard holds until an item from the future arrives", func(t *testing.T) {
		future := append(slices.Clone(items), Item{ID: "future", Time: now.Add(time.Hour), Outcome: OutcomeSucceeded})
		res := evaluateGuarded(t, TTL{After: Day}, now, future)
		if d := res.Decisions[0]; d.Reasons != ReasonGuard || !d.DeletableAt.Equal(now.Add(time.Hour)) {
			t.Fatalf("newest present: %+v", d)
		}
	})
	t.Run("the guard protects the newest successful item of each group", func(t *testing.T) {
		grouped := []Item{
			{ID: "a1", Group: "a", Time: base, Outcome: OutcomeSucceeded},
			{ID: "b1", Group: "b", Time: base.Add(-Day), Outcome: OutcomeSucceeded},
			{ID: "b0", Group: "b", Time: base.Add(-2 * Day), Outcome: OutcomeSucceeded},
		}
		got, _ := evalKeptOpts(t, Options{}, TTL{After: Day}, now, grouped)
		if !slices.Equal(got, []string{"a1", "b1"}) {
			t.Fatalf("kept %q", got)
		}
	})
}

// An item whose Outcome is unset is read the safe way: the guard protects it
// as if it succeeded, so a caller who never sets Outcome still keeps its
// newest backup. Before, the guard protected only items marked Succeeded
// and was silently off for such a caller.
func TestGuardProtectsItemsOfUnknownOutcome(t *testing.T) {
	base := at("2024-03-10T02:00:00Z")
	now := base.Add(40 * Day)
	var unknown Outcome // the zero Outcome: the caller does not say
	t.Run("the newest item of unknown outcome is kept by the guard", func(t *testing.T) {
		items := []Item{
			{ID: "backup-2", Time: base, Outcome: unknown},
			{ID: "backup-1", Time: base.Add(-Day), Outcome: unknown},
		}
		res := evaluateGuarded(t, TTL{After: Day}, now, items)
		if d := res.Decisions[0]; !d.Keep || d.Reasons != ReasonGuard {
			t.Fatalf("newest item of unknown outcome: %+v, want kept by the guard", d)
		}
		if res.Decisions[1].Keep || res.Groups[0].Guarded != 0 {
			t.Fatalf("older item kept %v, guarded %d; want deleted, guarded 0", res.Decisions[1].Keep, res.Groups[0].Guarded)
		}
	})
	t.Run("an item of unknown outcome newer than a successful one is the one guarded", func(t *testing.T) {
		items := []Item{
			{ID: "good", Time: base.Add(-Day), Outcome: OutcomeSucceeded},
			{ID: "unknown", Time: base, Outcome: unknown},
		}
		res := evaluateGuarded(t, TTL{After: Day}, now, items)
		if res.Groups[0].Guarded != 1 || res.Decisions[0].Keep {
			t.Fatalf("guarded %d, decisions %+v; want the unknown one guarded and the older one deleted", res.Groups[0].Guarded, res.Decisions)
		}
	})
	t.Run("a failed item is never guarded", func(t *testing.T) {
		items := []Item{
			{ID: "failed", Time: base, Outcome: OutcomeFailed},
			{ID: "unknown", Time: base.Add(-Day), Outcome: unknown},
		}
		res := evaluateGuarded(t, TTL{After: Day}, now, items)
		if res.Decisions[0].Keep || res.Groups[0].Guarded != 1 {
			t.Fatalf("decisions %+v, guarded %d", res.Decisions, res.Groups[0].Guarded)
		}
	})
	t.Run("AllowDeleteNewest judges things that are not attempts by the policy alone", func(t *testing.T) {
		items := []Item{{ID: "claim", Time: base}}
		_, res := evalKeptOpts(t, Options{AllowDeleteNewest: true}, TTL{After: Day}, now, items)
		if res.Kept != 0 || res.Groups[0].Guarded != -1 {
			t.Fatalf("kept %d, guarded %d", res.Kept, res.Groups[0].Guarded)
		}
	})
}

func TestMaxDeletions(t *testing.T) {
	var items []Item
	for i := range 10 {
		items = append(items, Item{ID: string(rune('a' + i)), Time: now.Add(-time.Duration(i+1) * Day)})
	}
	items[9].Force = true
	t.Run("within the cap the policy deletes as usual", func(t *testing.T) {
		_, res := evalKeptOpts(t, Options{MaxDeletions: 5}, Newest{N: 4}, now, items)
		if res.Deleted != 6 { // 5 by the policy, 1 forced
			t.Fatalf("deleted %d, want 6", res.Deleted)
		}
	})
	t.Run("above the cap nothing but forced items is deleted, with an error naming the cap", func(t *testing.T) {
		var res Result
		err := Options{MaxDeletions: 5}.Evaluate(Newest{N: 3}, now, items, &res)
		if !errors.Is(err, ErrTooManyDeletions) || !strings.Contains(err.Error(), "Options.MaxDeletions = 5") || !strings.Contains(err.Error(), "would delete 6 of 10") {
			t.Fatalf("err = %v", err)
		}
		if res.Deleted != 1 || !res.Decisions[9].Forced {
			t.Fatalf("deleted %d", res.Deleted)
		}
		for i := 3; i < 9; i++ {
			if d := res.Decisions[i]; !d.Keep || d.Reasons != ReasonMaxDeletions {
				t.Errorf("%s: %+v, want kept for max-deletions", items[i].ID, d)
			}
		}
	})
	t.Run("a negative cap is invalid", func(t *testing.T) {
		var res Result
		err := Options{MaxDeletions: -1}.Evaluate(Newest{N: 3}, now, items, &res)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "Options.MaxDeletions = -1") {
			t.Fatalf("err = %v", err)
		}
	})
}

// Invalid Options are a mistake in the caller's code, not in a policy read
// from an object: they wrap ErrInvalidConfig (before, ErrInvalidPolicy) and
// name the field and its value.
func TestInvalidOptionsWrapErrInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{MaxDeletions: -1}, "Options.MaxDeletions = -1"},
		{Options{TieBreak: 7}, "Options.TieBreak = 7"},
	} {
		var res Result
		err := tc.o.Evaluate(Newest{N: 1}, now, []Item{{ID: "a", Time: now}}, &res)
		if !errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig naming %q", tc.o, err, tc.want)
		}
	}
}
