package retention

import (
	"fmt"
	"testing"
	"time"
)

// benchItems returns n items one every step back from now, with a few held
// and forced, in an order that is not sorted.
func benchItems(n int, step time.Duration) []Item {
	items := make([]Item, n)
	for i := range items {
		j := (i * 7919) % n // a permutation, since 7919 is prime
		items[i] = Item{
			ID:    fmt.Sprintf("item-%07d", j),
			Time:  fuzzBase.Add(-time.Duration(j) * step),
			Hold:  j%1000 == 1,
			Force: j%1000 == 2,
		}
	}
	return items
}

func benchmarkPolicy(b *testing.B, p Policy, items []Item) {
	var res Result
	if err := Evaluate(p, fuzzBase, items, &res); err != nil { // warm the buffers
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := Evaluate(p, fuzzBase, items, &res); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(items)), "ns/item")
	if res.Kept == 0 || res.Deleted == 0 {
		b.Fatalf("degenerate benchmark: kept %d, deleted %d", res.Kept, res.Deleted)
	}
}

// BenchmarkTTL evaluates a TTL over 1,000,000 items with a reused Result:
// target ≤ 50 ns/item and 0 allocs/op.
func BenchmarkTTL(b *testing.B) {
	benchmarkPolicy(b, TTL{After: 30 * Day}, benchItems(1_000_000, 5*time.Second))
}

// BenchmarkCalendar evaluates a restic-style calendar over 100,000 items.
func BenchmarkCalendar(b *testing.B) {
	benchmarkPolicy(b, Calendar{Last: 10, Hourly: 48, Daily: 14, Weekly: 8, Monthly: 12, Yearly: 5, Within: Day},
		benchItems(100_000, 5*time.Minute))
}

// BenchmarkExponential evaluates etcd-backup-restore's thinning over 100,000
// items.
func BenchmarkExponential(b *testing.B) {
	benchmarkPolicy(b, Exponential{}, benchItems(100_000, time.Minute))
}

// BenchmarkGuardedTTL evaluates a TTL with a newest guard over 100,000 items,
// the composite most controllers use.
func BenchmarkGuardedTTL(b *testing.B) {
	benchmarkPolicy(b, Any{TTL{After: Day}, Newest{N: 3}}, benchItems(100_000, 5*time.Second))
}

// benchGroupItems returns groups×per items, per items one every step back
// from now in each group, interleaved across groups, every tenth failed.
func benchGroupItems(groups, per int, step time.Duration) []Item {
	items := benchItems(groups*per, step)
	for i := range items {
		j := (i * 7919) % len(items)
		items[i].Group = fmt.Sprintf("target-%04d", j%groups)
		items[i].Time = fuzzBase.Add(-time.Duration(j/groups) * step)
		items[i].Outcome = OutcomeSucceeded
		if j%10 == 3 {
			items[i].Outcome = OutcomeFailed
		}
		items[i].Tags = []string{"nightly"}
	}
	return items
}

// BenchmarkCalendarGroupBy evaluates a calendar over 1,000 groups of 100
// items, with failed items and the guard: the same target per item as
// BenchmarkCalendar.
func BenchmarkCalendarGroupBy(b *testing.B) {
	benchmarkPolicy(b, Calendar{Last: 3, Hourly: 24, Daily: 7, Weekly: 4, Monthly: 12, Yearly: 1, Failed: 2, WithinDaily: Span{Days: 3}},
		benchGroupItems(1000, 100, 3*time.Hour))
}

// BenchmarkCalendarZone evaluates a calendar in Europe/Berlin over 100,000
// items.
func BenchmarkCalendarZone(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	benchmarkPolicy(b, Calendar{Last: 10, Hourly: 48, Daily: 14, Weekly: 8, Monthly: 12, Yearly: 5, WithinSpan: Span{Days: 1}, Location: berlin},
		benchItems(100_000, 5*time.Minute))
}

func TestEvaluateAllocatesNothingInSteadyState(t *testing.T) {
	items := benchItems(10_000, time.Minute)
	grouped := benchGroupItems(100, 100, time.Hour)
	for _, p := range []Policy{
		Calendar{Daily: 7, Weekly: 4, Monthly: 12, Failed: 1, Tags: [][]string{{"nightly"}}, WithinDaily: Span{Days: 3}, ItemZone: true},
		Newest{N: 2, Failed: 1},
		TTL{After: Day},
	} {
		var res Result
		o := Options{MaxDeletions: 1_000_000}
		if err := o.Evaluate(p, fuzzBase, grouped, &res); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(5, func() {
			if err := o.Evaluate(p, fuzzBase, grouped, &res); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v over groups: %v allocations per Evaluate with a reused Result", p, allocs)
		}
	}
	for _, p := range []Policy{
		TTL{After: Day},
		Newest{N: 5},
		Calendar{Daily: 7, Weekly: 4, Monthly: 12},
		Exponential{},
		Any{All{TTL{After: Day}, Newest{N: 5}}, Newest{N: 1}},
	} {
		var res Result
		if err := Evaluate(p, fuzzBase, items, &res); err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(5, func() {
			if err := Evaluate(p, fuzzBase, items, &res); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%#v: %v allocations per Evaluate with a reused Result", p, allocs)
		}
	}
}
