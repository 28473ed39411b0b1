package retention

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestExplainWordsReasonsAndCountersAsRestic(t *testing.T) {
	items := snaps("2024-03-05T10:00:00Z", "2024-03-05T09:00:00Z", "2024-03-04T18:00:00Z", "2024-03-04T09:00:00Z", "2024-02-20T09:00:00Z")
	items[1].Tags = []string{"manual"}
	p := Calendar{Last: 1, Daily: 5, Monthly: 1, WithinDaily: Span{Days: 30}, Tags: [][]string{{"manual"}}}
	res := evaluate(t, p, at("2024-03-06T00:00:00Z"), items)
	ex := Explain(p, items, res)
	if len(ex) != 1 {
		t.Fatalf("%d groups", len(ex))
	}
	got := map[string][]string{}
	counters := map[string]Counters{}
	for _, r := range ex[0].Reasons {
		got[r.Item.ID] = r.Matches
		counters[r.Item.ID] = r.Counters
	}
	want := map[string][]string{
		"2024-03-05T10:00:00Z": {"last snapshot", "daily snapshot", "monthly snapshot", "daily within 30d"},
		"2024-03-05T09:00:00Z": {"has tags [manual]"},
		"2024-03-04T18:00:00Z": {"daily snapshot", "daily within 30d"},
		"2024-02-20T09:00:00Z": {"daily snapshot", "daily within 30d"},
	}
	for id, w := range want {
		if !slices.Equal(got[id], w) {
			t.Errorf("%s matches %q, want %q", id, got[id], w)
		}
	}
	if c := counters["2024-03-05T10:00:00Z"]; c != (Counters{Daily: 4}) {
		t.Errorf("counters after the newest: %+v, want daily 4 (last and monthly used up)", c)
	}
	if c := counters["2024-02-20T09:00:00Z"]; c != (Counters{Daily: 2}) {
		t.Errorf("counters after the oldest: %+v, want daily 2", c)
	}
	if len(ex[0].Remove) != 1 || ex[0].Remove[0].ID != "2024-03-04T09:00:00Z" {
		t.Errorf("remove %+v", ex[0].Remove)
	}
	b, err := json.Marshal(ex)
	if err != nil || !strings.Contains(string(b), `"matches":["has tags [manual]"],"counters":{"daily":4}`) {
		t.Errorf("JSON %s, %v", b, err)
	}
}

func TestExplainNamesTheOldestRuleAndTheRails(t *testing.T) {
	items := snaps("2024-03-05T10:00:00Z", "2024-03-04T18:00:00Z", "2024-03-04T09:00:00Z")
	for i := range items {
		items[i].Outcome = OutcomeSucceeded
	}
	p := Calendar{Daily: 5}
	res := evaluateGuarded(t, p, at("2024-03-06T00:00:00Z"), items)
	ex := Explain(p, items, res)
	if m := ex[0].Reasons[0].Matches; !slices.Equal(m, []string{"daily snapshot", "newest successful (guard)"}) {
		t.Errorf("newest: %q", m)
	}
	if m := ex[0].Reasons[2].Matches; !slices.Equal(m, []string{"oldest daily snapshot"}) {
		t.Errorf("oldest: %q", m)
	}
	var capped Result
	err := Options{MaxDeletions: 1}.Evaluate(Calendar{Last: 1}, at("2024-03-06T00:00:00Z"), items, &capped)
	if err == nil {
		t.Fatal("no error above the cap")
	}
	ex = Explain(Calendar{Last: 1}, items, &capped)
	if m := ex[0].Reasons[1].Matches; !slices.Equal(m, []string{"max deletions"}) {
		t.Errorf("capped: %q", m)
	}
}

// Explain promises "ttl until <time>" for an item a TTL keeps. It printed a
// bare "ttl" whenever another rule kept the item for good, because it read
// the instant from Decision.DeletableAt, the latest instant of all rules.
func TestExplainSaysUntilWhenTheTTLKeepsAnItem(t *testing.T) {
	now := at("2024-03-10T00:00:00Z")
	items := []Item{
		{ID: "new", Time: now.Add(-Day)},
		{ID: "mid", Time: now.Add(-2 * Day)},
		{ID: "old", Time: now.Add(-40 * Day)},
	}
	for _, tc := range []struct {
		name string
		p    Policy
		want map[string][]string
	}{
		{"a TTL alone", TTL{After: 30 * Day}, map[string][]string{
			"new": {"ttl until 2024-04-08T00:00:00Z"},
			"mid": {"ttl until 2024-04-07T00:00:00Z"},
		}},
		{"a TTL beside a rule that keeps the newest for good", Any{TTL{After: 30 * Day}, Newest{N: 1}}, map[string][]string{
			"new": {"last snapshot", "ttl until 2024-04-08T00:00:00Z"},
			"mid": {"ttl until 2024-04-07T00:00:00Z"},
		}},
		{"of two TTLs in Any the later lets go", Any{TTL{After: 3 * Day}, TTL{After: 30 * Day}}, map[string][]string{
			"new": {"ttl until 2024-04-08T00:00:00Z"},
			"mid": {"ttl until 2024-04-07T00:00:00Z"},
		}},
		{"of two TTLs in All the earlier lets go", All{TTL{After: 3 * Day}, TTL{After: 30 * Day}}, map[string][]string{
			"new": {"ttl until 2024-03-12T00:00:00Z"},
			"mid": {"ttl until 2024-03-11T00:00:00Z"},
		}},
		{"a zero TTL that means forever", TTL{ZeroMeansForever: true}, map[string][]string{
			"new": {"ttl forever"}, "mid": {"ttl forever"}, "old": {"ttl forever"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := evaluate(t, tc.p, now, items)
			got := map[string][]string{}
			for _, r := range Explain(tc.p, items, res)[0].Reasons {
				got[r.Item.ID] = r.Matches
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("matches %q, want %q", got, tc.want)
			}
		})
	}
}
