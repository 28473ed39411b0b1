package retention

import (
	"slices"
	"strings"
	"time"
)

// Explanation is one group's decisions in the shape of the JSON that
// `restic forget --dry-run --json` prints: what is kept, what is removed,
// and for each kept item the rules it matched and the counters left after
// it. encoding/json prints it as is.
type Explanation struct {
	// Group is the Item.Group of the items.
	Group string `json:"group"`
	// Keep and Remove list the group's items newest first.
	Keep   []ItemRef `json:"keep"`
	Remove []ItemRef `json:"remove"`
	// Reasons has one entry per kept item, in the order of Keep.
	Reasons []KeepReason `json:"reasons"`
}

// ItemRef names an item.
type ItemRef struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	// Forced is set for a removed item whose Force flag removed it.
	Forced bool `json:"forced,omitempty"`
}

// KeepReason says why an item is kept, as restic's KeepReason does.
type KeepReason struct {
	Item ItemRef `json:"item"`
	// Matches names each rule that keeps the item, in restic's words where
	// restic has the rule: "last snapshot", "daily snapshot", "oldest
	// monthly snapshot", "within 1y", "daily within 7d", "has tags [a, b]";
	// and "failed snapshot", "newest successful (guard)", "max deletions",
	// "ttl until <time>" (the instant the TTLs of the policy let the item
	// go, whatever else keeps it; "ttl forever" for a zero TTL with
	// ZeroMeansForever), "hold", "no time", "future", "empty policy",
	// "current hour" for this package's own.
	Matches []string `json:"matches"`
	// Counters are the counts of a Calendar left after this item, as in
	// restic; Unlimited counts stay -1 and exhausted ones are 0 (left out
	// of the JSON).
	Counters Counters `json:"counters"`
}

// Counters are the remaining counts of a Calendar's counted options.
type Counters struct {
	Last    int `json:"last,omitempty"`
	Hourly  int `json:"hourly,omitempty"`
	Daily   int `json:"daily,omitempty"`
	Weekly  int `json:"weekly,omitempty"`
	Monthly int `json:"monthly,omitempty"`
	Yearly  int `json:"yearly,omitempty"`
	Failed  int `json:"failed,omitempty"`
}

// Explain turns the Result of evaluating p over items into one Explanation
// per group, ordered like Result.Groups. Call it with the same p and items
// right after Evaluate, before res is reused. Span and tag wording and the
// counters come from the first Calendar in p (p itself, or inside Any or
// All); counters are exact when p is a Calendar. Explain allocates: it is for
// people and CLIs, not for the reconcile loop.
func Explain(p Policy, items []Item, res *Result) []Explanation {
	if len(res.Decisions) != len(items) {
		return nil
	}
	cal, _ := firstCalendar(p)
	out := make([]Explanation, len(res.Groups))
	index := make(map[string]int, len(res.Groups))
	for g, gr := range res.Groups {
		out[g].Group = gr.Group
		index[gr.Group] = g
	}
	order := explainOrder(items, res)
	left := make([]Counters, len(out))
	for g := range left {
		left[g] = Counters{cal.Last, cal.Hourly, cal.Daily, cal.Weekly, cal.Monthly, cal.Yearly, cal.Failed}
	}
	for _, i := range order {
		it, d := &items[i], &res.Decisions[i]
		g := index[it.Group]
		x := &out[g]
		ref := ItemRef{ID: it.ID, Time: it.Time, Forced: d.Forced}
		if !d.Keep {
			x.Remove = append(x.Remove, ref)
			continue
		}
		x.Keep = append(x.Keep, ref)
		c := &left[g]
		for _, n := range []struct {
			r Reason
			n *int
		}{
			{ReasonNewest, &c.Last}, {ReasonHourly, &c.Hourly}, {ReasonDaily, &c.Daily}, {ReasonWeekly, &c.Weekly},
			{ReasonMonthly, &c.Monthly}, {ReasonYearly, &c.Yearly}, {ReasonFailed, &c.Failed},
		} {
			if d.Reasons&n.r != 0 && *n.n > 0 {
				*n.n--
			}
		}
		x.Reasons = append(x.Reasons, KeepReason{Item: ref, Matches: matches(p, res.ev.now, cal, it, d), Counters: *c})
	}
	for g := range out {
		if out[g].Keep == nil {
			out[g].Keep = []ItemRef{}
		}
		if out[g].Remove == nil {
			out[g].Remove = []ItemRef{}
		}
		if out[g].Reasons == nil {
			out[g].Reasons = []KeepReason{}
		}
	}
	return out
}

// explainOrder returns the indexes of items newest first; among equal
// Times, the items the evaluation ranked in its order (ties as it broke
// them), then the others by ID.
func explainOrder(items []Item, res *Result) []int {
	pos := make([]int, len(items))
	for i := range pos {
		pos[i] = -1
	}
	if e := &res.ev; e.rankedOK {
		for r, k := range e.ranked {
			if int(k.idx) < len(items) {
				pos[k.idx] = r
			}
		}
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := items[b].Time.Compare(items[a].Time); c != 0 {
			return c
		}
		switch pa, pb := pos[a], pos[b]; {
		case pa >= 0 && pb >= 0:
			return pa - pb
		case pa >= 0:
			return -1
		case pb >= 0:
			return 1
		}
		if c := strings.Compare(items[a].ID, items[b].ID); c != 0 {
			return c
		}
		return a - b
	})
	return order
}

func firstCalendar(p Policy) (Calendar, bool) {
	switch p := p.(type) {
	case Calendar:
		return p, true
	case Any:
		for _, q := range p {
			if c, ok := firstCalendar(q); ok {
				return c, true
			}
		}
	case All:
		for _, q := range p {
			if c, ok := firstCalendar(q); ok {
				return c, true
			}
		}
	}
	return Calendar{}, false
}

// matchOrder is the order restic lists its matches in (tags, within, the
// counted buckets, the within-buckets), then this package's own reasons.
var matchOrder = [...]Reason{
	ReasonTag, ReasonWithin, ReasonNewest, ReasonHourly, ReasonDaily, ReasonWeekly, ReasonMonthly, ReasonYearly,
	ReasonWithinHourly, ReasonWithinDaily, ReasonWithinWeekly, ReasonWithinMonthly, ReasonWithinYearly,
	ReasonFailed, ReasonGuard, ReasonMaxDeletions, ReasonTTL, ReasonHold, ReasonNoTime, ReasonFuture,
	ReasonEmptyPolicy, ReasonCurrentHour,
}

// matches words the reasons of d, decided by p at now, as restic does.
func matches(p Policy, now time.Time, cal Calendar, it *Item, d *Decision) []string {
	var m []string
	oldest := func(r Reason, s string) string {
		if d.Oldest&r != 0 {
			return "oldest " + s
		}
		return s
	}
	for _, r := range matchOrder {
		if d.Reasons&r == 0 {
			continue
		}
		switch r {
		case ReasonNewest:
			m = append(m, "last snapshot")
		case ReasonHourly, ReasonDaily, ReasonWeekly, ReasonMonthly, ReasonYearly:
			m = append(m, oldest(r, r.String()+" snapshot"))
		case ReasonWithinHourly, ReasonWithinDaily, ReasonWithinWeekly, ReasonWithinMonthly, ReasonWithinYearly:
			sp := [...]Span{cal.WithinHourly, cal.WithinDaily, cal.WithinWeekly, cal.WithinMonthly, cal.WithinYearly}[bitIndex(r)-bitIndex(ReasonWithinHourly)]
			s := strings.TrimPrefix(r.String(), "within-") + " within"
			if !sp.IsZero() {
				s += " " + sp.String()
			}
			m = append(m, oldest(r, s))
		case ReasonWithin:
			switch {
			case !cal.WithinSpan.IsZero():
				m = append(m, "within "+cal.WithinSpan.String())
			case cal.Within != 0:
				m = append(m, "within "+Format(cal.Within))
			default:
				m = append(m, "within")
			}
		case ReasonTag:
			n := len(m)
			for _, l := range cal.Tags {
				if hasTags(it.Tags, l) {
					m = append(m, "has tags ["+strings.Join(l, ", ")+"]") // restic's TagList.String
				}
			}
			if len(m) == n {
				m = append(m, "has tags")
			}
		case ReasonFailed:
			m = append(m, "failed snapshot")
		case ReasonGuard:
			m = append(m, "newest successful (guard)")
		case ReasonMaxDeletions:
			m = append(m, "max deletions")
		case ReasonTTL:
			// The TTL's own instant: DeletableAt is the latest instant of
			// every rule that keeps the item, zero when another keeps it
			// for good.
			switch until, ok := ttlUntil(p, it, now); {
			case !ok:
				m = append(m, "ttl")
			case until.IsZero():
				m = append(m, "ttl forever")
			default:
				m = append(m, "ttl until "+until.UTC().Format(time.RFC3339))
			}
		default:
			m = append(m, strings.ReplaceAll(r.String(), "-", " "))
		}
	}
	return m
}

// ttlUntil returns the instant at which the TTLs in p stop keeping it, as
// Evaluate combines them (Any keeps until the last lets it go, All until
// the first does), and ok == false when no TTL in p keeps it at now. The
// zero instant means forever (a zero TTL with ZeroMeansForever).
func ttlUntil(p Policy, it *Item, now time.Time) (until time.Time, ok bool) {
	var combine func(a, b time.Time) time.Time
	var ps []Policy
	switch p := p.(type) {
	case TTL:
		if p.After == 0 && p.ZeroMeansForever {
			return time.Time{}, true
		}
		if at := it.Time.Add(p.After); now.Before(at) {
			return at, true
		}
		return time.Time{}, false
	case Any:
		combine, ps = latest, p
	case All:
		combine, ps = earliest, p
	default:
		return time.Time{}, false
	}
	for _, q := range ps {
		u, k := ttlUntil(q, it, now)
		switch {
		case !k:
		case !ok:
			until, ok = u, true
		default:
			until = combine(until, u)
		}
	}
	return until, ok
}

func bitIndex(r Reason) int {
	for i := 0; i < 32; i++ {
		if r == 1<<i {
			return i
		}
	}
	return -1
}
