package retention

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"
)

// resticKeeps is a plain model of restic's ApplyPolicy (internal/data
// snapshot_policy.go), written with time.Time's own calendar methods, for one
// group of snapshots that are present, unforced and did not fail. It returns
// the indices (into items) that restic keeps. Ties keep input order, as
// restic's sort.Stable does.
func resticKeeps(p Calendar, items []Item, group []int) map[int]bool {
	list := slices.Clone(group)
	sort.SliceStable(list, func(a, b int) bool { return items[list[a]].Time.After(items[list[b]].Time) })
	keep := map[int]bool{}
	if len(list) == 0 {
		return keep
	}
	zone := func(t time.Time) time.Time {
		switch {
		case p.ItemZone:
			return t
		case p.Location != nil:
			return t.In(p.Location)
		}
		return t.UTC()
	}
	ymdh := func(t time.Time, _ int) int {
		t = zone(t)
		return t.Year()*1000000 + int(t.Month())*10000 + t.Day()*100 + t.Hour()
	}
	ymd := func(t time.Time, _ int) int { t = zone(t); return t.Year()*10000 + int(t.Month())*100 + t.Day() }
	yw := func(t time.Time, _ int) int { y, w := zone(t).ISOWeek(); return y*100 + w }
	ym := func(t time.Time, _ int) int { t = zone(t); return t.Year()*100 + int(t.Month()) }
	y := func(t time.Time, _ int) int { return zone(t).Year() }
	always := func(_ time.Time, nr int) int { return nr }
	type bucket struct {
		count int
		f     func(time.Time, int) int
		last  int
	}
	buckets := []bucket{{p.Last, always, -1}, {p.Hourly, ymdh, -1}, {p.Daily, ymd, -1}, {p.Weekly, yw, -1}, {p.Monthly, ym, -1}, {p.Yearly, y, -1}}
	type wbucket struct {
		span Span
		f    func(time.Time, int) int
		last int
	}
	wbuckets := []wbucket{{p.WithinHourly, ymdh, -1}, {p.WithinDaily, ymd, -1}, {p.WithinWeekly, yw, -1}, {p.WithinMonthly, ym, -1}, {p.WithinYearly, y, -1}}
	latest := zone(items[list[0]].Time)
	for nr, i := range list {
		cur := items[i].Time
		for _, l := range p.Tags {
			if hasTags(items[i].Tags, l) {
				keep[i] = true
			}
		}
		if p.Within > 0 && cur.After(latest.Add(-p.Within)) {
			keep[i] = true
		}
		if !p.WithinSpan.IsZero() && cur.After(p.WithinSpan.back(latest)) {
			keep[i] = true
		}
		for b := range buckets {
			if buckets[b].count > 0 || buckets[b].count == -1 {
				val := buckets[b].f(cur, nr)
				if val != buckets[b].last || nr == len(list)-1 {
					keep[i] = true
					buckets[b].last = val
					if buckets[b].count > 0 {
						buckets[b].count--
					}
				}
			}
		}
		for b := range wbuckets {
			if !wbuckets[b].span.IsZero() && cur.After(wbuckets[b].span.back(latest)) {
				val := wbuckets[b].f(cur, nr)
				if val != wbuckets[b].last || nr == len(list)-1 {
					keep[i] = true
					wbuckets[b].last = val
				}
			}
		}
	}
	return keep
}

type propGen struct {
	r     *rand.Rand
	zones []*time.Location
}

func (g *propGen) count() int { return []int{0, 0, 1, 2, 3, 5, Unlimited}[g.r.IntN(7)] }

func (g *propGen) span() Span {
	if g.r.IntN(3) > 0 {
		return Span{}
	}
	return Span{Years: g.r.IntN(2), Months: g.r.IntN(3), Days: g.r.IntN(10), Hours: g.r.IntN(30)}
}

func (g *propGen) calendar() Calendar {
	c := Calendar{
		Last: g.count(), Hourly: g.count(), Daily: g.count(), Weekly: g.count(), Monthly: g.count(), Yearly: g.count(),
		WithinSpan: g.span(), WithinHourly: g.span(), WithinDaily: g.span(), WithinWeekly: g.span(), WithinMonthly: g.span(), WithinYearly: g.span(),
		Failed: g.count(),
	}
	if g.r.IntN(4) == 0 {
		c.Within = time.Duration(g.r.IntN(100)) * time.Hour
	}
	if g.r.IntN(4) == 0 {
		c.Tags = [][]string{{[]string{"a", "b", ""}[g.r.IntN(3)]}}
	}
	switch g.r.IntN(4) {
	case 0:
		c.ItemZone = true
	case 1:
		c.Location = g.zones[g.r.IntN(len(g.zones))]
	}
	return c
}

func (g *propGen) items(now time.Time) []Item {
	n := g.r.IntN(60)
	items := make([]Item, n)
	units := []time.Duration{time.Minute, 47 * time.Minute, 5 * time.Hour, 29 * time.Hour, 11 * Day}
	unit := units[g.r.IntN(len(units))]
	for i := range items {
		t := now.Add(-time.Duration(g.r.IntN(400)) * unit)
		if i > 0 && g.r.IntN(8) == 0 {
			t = items[g.r.IntN(i)].Time // equal times
		}
		if g.r.IntN(30) == 0 {
			t = now.Add(time.Duration(1+g.r.IntN(100)) * time.Minute) // future
		}
		if g.r.IntN(40) == 0 {
			t = time.Time{}
		}
		if !t.IsZero() {
			t = t.In(time.FixedZone("", (g.r.IntN(27)-12)*3600+g.r.IntN(2)*1800))
		}
		it := Item{ID: fmt.Sprintf("i%02d", i), Time: t, Group: []string{"", "x", "y"}[g.r.IntN(3)], Outcome: Outcome(g.r.IntN(3))}
		if g.r.IntN(3) == 0 {
			it.Tags = []string{[]string{"a", "b"}[g.r.IntN(2)]}
		}
		it.Hold = g.r.IntN(25) == 0
		it.Force = g.r.IntN(25) == 0
		items[i] = it
	}
	return items
}

// TestPropertiesOnRandomInput checks, for random items and Calendars: that
// decisions match a plain model of restic's algorithm (so no item a rule
// keeps is reported deletable, and nothing else is kept), that the guard
// keeps the newest successful item of every group, and that Evaluate is
// deterministic and, with TieByID, independent of the input order.
func TestPropertiesOnRandomInput(t *testing.T) {
	var zones []*time.Location
	for _, name := range []string{"Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"} {
		zones = append(zones, loadZone(t, name))
	}
	g := &propGen{r: rand.New(rand.NewPCG(17, 2026)), zones: zones}
	now := at("2024-03-31T01:30:00Z")
	runs := 3000
	if testing.Short() {
		runs = 300
	}
	var res, again, guarded Result
	for run := range runs {
		p := g.calendar()
		items := g.items(now.Add(-time.Duration(g.r.IntN(1000)) * time.Hour))
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("run %d: "+format+"\npolicy %+v\n%s", append([]any{run}, append(args, p, describe(p, now, items))...)...)
		}
		if err := (Options{AllowDeleteNewest: true, TieBreak: TieByInput}).Evaluate(p, now, items, &res); err != nil {
			fail("%v", err)
		}
		// The model, per group, over the items the policy judges.
		groups := map[string][]int{}
		failed := map[string][]int{}
		for i, it := range items {
			if it.Time.IsZero() || it.Time.After(now) || it.Force && !it.Hold {
				continue
			}
			if it.Outcome == OutcomeFailed {
				failed[it.Group] = append(failed[it.Group], i)
			} else {
				groups[it.Group] = append(groups[it.Group], i)
			}
		}
		model := map[int]bool{}
		empty := p.isEmpty()
		for k, idx := range groups {
			for i, v := range resticKeeps(p, items, idx) {
				model[i] = v
			}
			if empty {
				for _, i := range idx {
					model[i] = true
				}
			}
			_ = k
		}
		for _, idx := range failed {
			sort.SliceStable(idx, func(a, b int) bool { return items[idx[a]].Time.After(items[idx[b]].Time) })
			for r, i := range idx {
				if empty || p.Failed == Unlimited || r < p.Failed || slices.ContainsFunc(p.Tags, func(l []string) bool { return hasTags(items[i].Tags, l) }) {
					model[i] = true
				}
			}
		}
		for i, d := range res.Decisions {
			it := items[i]
			var want bool
			switch {
			case it.Hold:
				want = true
			case it.Force:
				want = false
			case it.Time.IsZero(), it.Time.After(now):
				want = true
			default:
				want = model[i]
			}
			if d.Keep != want {
				fail("%s: Keep = %v (%v), the model says %v", it.ID, d.Keep, d.Reasons, want)
			}
			if d.Keep == (d.Reasons == 0) {
				fail("%s: Keep = %v with reasons %v", it.ID, d.Keep, d.Reasons)
			}
		}
		// Determinism: the same call with a reused and with a fresh Result.
		snapshot := slices.Clone(res.Decisions)
		if err := (Options{AllowDeleteNewest: true, TieBreak: TieByInput}).Evaluate(p, now, items, &res); err != nil || !reflect.DeepEqual(snapshot, res.Decisions) {
			fail("a second evaluation differs: %v", err)
		}
		// The guard, on by default, keeps the newest successful item per
		// group; with TieByID the input order does not matter.
		if err := Evaluate(p, now, items, &guarded); err != nil {
			fail("%v", err)
		}
		newest := map[string]int{}
		for i, it := range items {
			if it.Outcome == OutcomeFailed || it.Time.IsZero() || it.Time.After(now) || it.Force && !it.Hold {
				continue
			}
			j, ok := newest[it.Group]
			if !ok || it.Time.After(items[j].Time) || it.Time.Equal(items[j].Time) && it.ID < items[j].ID {
				newest[it.Group] = i
			}
		}
		for grp, i := range newest {
			if d := guarded.Decisions[i]; !d.Keep || d.Reasons&ReasonGuard == 0 {
				fail("group %q: newest successful %s not guarded: %+v", grp, items[i].ID, d)
			}
		}
		perm := g.r.Perm(len(items))
		shuffled := make([]Item, len(items))
		for i, j := range perm {
			shuffled[j] = items[i]
		}
		if err := Evaluate(p, now, shuffled, &again); err != nil {
			fail("%v", err)
		}
		for i, j := range perm {
			if !reflect.DeepEqual(guarded.Decisions[i], again.Decisions[j]) {
				fail("%s decided %+v, and %+v with the input shuffled", items[i].ID, guarded.Decisions[i], again.Decisions[j])
			}
		}
		if !reflect.DeepEqual(guarded.Groups, normaliseGuarded(again.Groups, perm)) {
			fail("groups %+v, shuffled %+v", guarded.Groups, again.Groups)
		}
	}
}

// normaliseGuarded maps the Guarded indices of a shuffled evaluation back to
// the original input.
func normaliseGuarded(gs []GroupResult, perm []int) []GroupResult {
	back := make([]int, len(perm))
	for i, j := range perm {
		back[j] = i
	}
	out := slices.Clone(gs)
	for k := range out {
		if out[k].Guarded >= 0 {
			out[k].Guarded = back[out[k].Guarded]
		}
	}
	return out
}
