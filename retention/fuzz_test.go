package retention

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// fuzzInput decodes fuzzer bytes into a policy, a now and items. It never
// fails: missing bytes read as zero.
type fuzzInput struct{ b []byte }

func (r *fuzzInput) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *fuzzInput) u16() uint16 { return uint16(r.byte())<<8 | uint16(r.byte()) }

func (r *fuzzInput) count() int {
	switch c := r.byte() % 8; {
	case c == 7:
		return Unlimited
	case c >= 5:
		return 0
	default:
		return int(c)
	}
}

func (r *fuzzInput) policy(depth int) Policy {
	switch r.byte() % 8 {
	case 0, 1:
		return TTL{After: time.Duration(r.byte()) * 37 * time.Minute, ZeroMeansForever: r.byte()&1 == 1}
	case 2:
		return Newest{N: int(r.byte() % 6), Failed: int(r.byte() % 3)}
	case 3:
		c := Calendar{Last: r.count(), Hourly: r.count(), Daily: r.count(), Weekly: r.count(), Monthly: r.count(), Yearly: r.count()}
		if w := r.byte(); w&1 == 1 {
			c.Within = time.Duration(w) * 13 * time.Minute
		}
		c.Failed = r.count()
		if w := r.byte(); w&1 == 1 {
			c.WithinDaily = Span{Days: int(w % 9), Hours: int(w % 5)}
		}
		return c
	case 4:
		return Exponential{}
	case 5, 6:
		if depth >= 2 {
			return Newest{N: 1}
		}
		ps := make([]Policy, 1+int(r.byte()%3))
		for i := range ps {
			ps[i] = r.policy(depth + 1)
		}
		if r.byte()&1 == 0 {
			return Any(ps)
		}
		return All(ps)
	default:
		return Any{r.policy(depth + 1), Newest{N: 1 + int(r.byte()%3)}}
	}
}

var fuzzBase = at("2024-03-11T10:45:00Z")

func (r *fuzzInput) items() (time.Time, []Item) {
	now := fuzzBase.Add(time.Duration(r.u16())*97*time.Second + time.Duration(r.byte())*time.Nanosecond)
	unit := [...]time.Duration{time.Minute, 17 * time.Minute, time.Hour, 7 * time.Hour, time.Nanosecond}[r.byte()%5]
	n := int(r.byte() % 48)
	items := make([]Item, n)
	for i := range items {
		flags := r.byte()
		off := time.Duration(r.u16()) * unit
		it := Item{ID: fmt.Sprintf("%c%02d", 'a'+flags%5, i), Hold: flags&0xe0 == 0xe0, Force: flags&0x1c == 0x1c}
		kind := r.byte()
		it.Outcome = Outcome(kind % 3)
		it.Group = []string{"", "g", "h"}[kind/3%3]
		switch {
		case flags&0x03 == 0x03 && flags&0x40 != 0:
			// zero Time
		case flags&0x03 == 0x03:
			it.Time = now.Add(off % (3 * time.Hour)) // in the future
			if !it.Time.After(now) {
				it.Time = now.Add(time.Nanosecond)
			}
		default:
			it.Time = now.Add(-off)
		}
		items[i] = it
	}
	return now, items
}

// hasExpUnderAny reports whether an Exponential sits somewhere beneath an
// Any, where DeletableAt is only a lower bound.
func hasExpUnderAny(p Policy, underAny bool) bool {
	switch p := p.(type) {
	case Exponential:
		return underAny
	case Any:
		for _, q := range p {
			if hasExpUnderAny(q, true) {
				return true
			}
		}
	case All:
		for _, q := range p {
			if hasExpUnderAny(q, underAny) {
				return true
			}
		}
	}
	return false
}

// newestGuard returns N when p always keeps the newest N items.
func newestGuard(p Policy) int {
	switch p := p.(type) {
	case Newest:
		return p.N
	case Any:
		n := 0
		for _, q := range p {
			n = max(n, newestGuard(q))
		}
		return n
	}
	return 0
}

// ttlFloor returns the TTL below which p never lets an item go, if any.
func ttlFloor(p Policy) (TTL, bool) {
	switch p := p.(type) {
	case TTL:
		return p, true
	case Any:
		for _, q := range p {
			if ttl, ok := ttlFloor(q); ok {
				return ttl, true
			}
		}
	}
	return TTL{}, false
}

func mustEvaluate(t *testing.T, p Policy, now time.Time, items []Item) Result {
	t.Helper()
	var res Result
	if err := Evaluate(p, now, items, &res); err != nil {
		t.Fatalf("Evaluate(%#v): %v", p, err)
	}
	return res
}

func describe(p Policy, now time.Time, items []Item) string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy %#v\nnow %v\n", p, now)
	for _, it := range items {
		fmt.Fprintf(&b, "  %s %v hold=%v force=%v\n", it.ID, it.Time, it.Hold, it.Force)
	}
	return b.String()
}

// FuzzEvaluate checks the guarantees of the package doc on random policies
// and items.
func FuzzEvaluate(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 0, 0, 2, 5, 1, 0, 1, 0, 0, 2, 0})
	f.Add([]byte{4, 0, 1, 0, 0, 2, 20, 0, 0, 1, 0, 1, 0, 0, 2, 0, 3, 0, 10, 0, 100, 3, 255, 255})
	f.Add([]byte{3, 1, 2, 3, 4, 7, 7, 9, 0, 50, 0, 2, 30, 0, 1, 0, 1, 0, 9, 0, 20, 0, 3, 0, 255, 3, 0, 0})
	f.Add([]byte{5, 2, 4, 0, 10, 1, 2, 2, 0, 0, 1, 3, 40, 0, 0, 0, 1, 0, 0, 2, 9, 9, 3, 0, 0, 0xff, 0, 0})
	f.Add([]byte{7, 6, 1, 4, 3, 1, 0, 12, 0x1c, 0, 1, 0xe0, 0, 2, 0x03, 0, 5, 0x43, 0, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzInput{b: data}
		p := r.policy(0)
		now, items := r.items()
		res := mustEvaluate(t, p, now, items)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf(format+"\n%s", append(args, describe(p, now, items))...)
		}

		// Kept ∪ deleted = input, and the decisions are consistent.
		if len(res.Decisions) != len(items) || res.Kept+res.Deleted != len(items) {
			fail("%d decisions, kept %d + deleted %d, for %d items", len(res.Decisions), res.Kept, res.Deleted, len(items))
		}
		var next time.Time
		kept, skewed := 0, 0
		for i, d := range res.Decisions {
			it := items[i]
			future := it.Time.After(now)
			switch {
			case d.Keep && d.Reasons == 0:
				fail("%s kept without a reason", it.ID)
			case !d.Keep && (d.Reasons != 0 || !d.DeletableAt.IsZero()):
				fail("%s deleted with reasons %v, DeletableAt %v", it.ID, d.Reasons, d.DeletableAt)
			case it.Hold && !d.Keep:
				fail("%s held but deleted", it.ID)
			case d.Forced != (it.Force && !it.Hold):
				fail("%s Forced=%v with Force=%v Hold=%v", it.ID, d.Forced, it.Force, it.Hold)
			case d.Skew != future:
				fail("%s Skew=%v, Time after now: %v", it.ID, d.Skew, future)
			case (future || it.Time.IsZero()) && !d.Forced && !d.Keep:
				fail("%s with a future or zero Time deleted", it.ID)
			case d.Keep && !d.DeletableAt.IsZero() && !d.DeletableAt.After(now):
				fail("%s kept but deletable already at %v", it.ID, d.DeletableAt)
			}
			if d.Keep {
				kept++
				next = earliest(next, d.DeletableAt)
			}
			if future {
				skewed++
			}
		}
		if kept != res.Kept || skewed != res.Skewed || !next.Equal(res.Next) {
			fail("totals: kept %d/%d skewed %d/%d next %v/%v", res.Kept, kept, res.Skewed, skewed, res.Next, next)
		}

		// The newest item is kept when the guard says so.
		if n := newestGuard(p); n > 0 {
			newest := -1
			for i, it := range items {
				if it.Time.IsZero() || it.Time.After(now) || (it.Force && !it.Hold) || it.Outcome == OutcomeFailed || it.Group != "" {
					continue
				}
				if newest < 0 || it.Time.After(items[newest].Time) || (it.Time.Equal(items[newest].Time) && it.ID < items[newest].ID) {
					newest = i
				}
			}
			if newest >= 0 && !res.Decisions[newest].Keep {
				fail("newest item %s deleted despite a newest-%d guard", items[newest].ID, n)
			}
		}

		// No item is deleted before its TTL.
		if ttl, ok := ttlFloor(p); ok {
			for i, it := range items {
				forever := ttl.After == 0 && ttl.ZeroMeansForever
				if !it.Force && (forever || now.Before(it.Time.Add(ttl.After))) && !res.Decisions[i].Keep {
					fail("%s deleted before its TTL %v ran out", it.ID, ttl.After)
				}
			}
		}

		// The guard keeps the newest successful item of each group.
		guarded := map[string]int{}
		for i, it := range items {
			if it.Outcome == OutcomeFailed || it.Time.IsZero() || it.Time.After(now) || (it.Force && !it.Hold) {
				continue
			}
			if j, ok := guarded[it.Group]; !ok || it.Time.After(items[j].Time) || (it.Time.Equal(items[j].Time) && it.ID < items[j].ID) {
				guarded[it.Group] = i
			}
		}
		for _, i := range guarded {
			if d := res.Decisions[i]; !d.Keep || d.Reasons&ReasonGuard == 0 {
				fail("newest successful item %s of group %q not guarded: %+v", items[i].ID, items[i].Group, d)
			}
		}

		// DeletableAt is never late: the item is kept until just before it,
		// and when it is exact, deleted at it. Zero means kept for good.
		exact := res.Skewed == 0 && !hasExpUnderAny(p, false)
		for i, d := range res.Decisions {
			if !d.Keep {
				continue
			}
			if d.DeletableAt.IsZero() {
				if res.Skewed == 0 {
					if later := mustEvaluate(t, p, now.Add(400*Day), items); !later.Decisions[i].Keep {
						fail("%s has no DeletableAt but is deleted 400 days later", items[i].ID)
					}
				}
				continue
			}
			span := d.DeletableAt.Sub(now)
			for _, when := range []time.Time{d.DeletableAt.Add(-1), now.Add(span / 2), now.Add(span / (2 + time.Duration(r.byte())))} {
				if later := mustEvaluate(t, p, when, items); !later.Decisions[i].Keep {
					fail("%s deleted at %v, before its DeletableAt %v", items[i].ID, when, d.DeletableAt)
				}
			}
			if exact {
				if later := mustEvaluate(t, p, d.DeletableAt, items); later.Decisions[i].Keep {
					fail("%s still kept at its DeletableAt %v, for %v", items[i].ID, d.DeletableAt, later.Decisions[i].Reasons)
				}
			}
		}

		// Decisions do not depend on the input order (IDs are unique).
		reversed := slices.Clone(items)
		slices.Reverse(reversed)
		rev := mustEvaluate(t, p, now, reversed)
		for i, d := range res.Decisions {
			if e := rev.Decisions[len(items)-1-i]; e != d {
				fail("%s decided %+v, but %+v with the input reversed", items[i].ID, d, e)
			}
		}

		// Evaluating again over what was kept keeps all of it.
		var keptItems []Item
		for i, d := range res.Decisions {
			if d.Keep {
				keptItems = append(keptItems, items[i])
			}
		}
		if again := mustEvaluate(t, p, now, keptItems); again.Deleted != 0 {
			fail("a second pass over the %d kept items deletes %d", len(keptItems), again.Deleted)
		}

		// Items from the future change no other item's decision.
		var present []Item
		var where []int
		for i, it := range items {
			if !it.Time.After(now) {
				present = append(present, it)
				where = append(where, i)
			}
		}
		if len(present) < len(items) {
			alone := mustEvaluate(t, p, now, present)
			for j, d := range alone.Decisions {
				if e := res.Decisions[where[j]]; e.Keep != d.Keep || e.Reasons != d.Reasons {
					fail("%s: %v/%v alone, %v/%v next to future items", present[j].ID, d.Keep, d.Reasons, e.Keep, e.Reasons)
				}
			}
		}
	})
}
