package retention

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestSortNewestFirstMatchesTheComparison(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		gen  func() time.Time
	}{
		{"instants within a few seconds, many equal", func() time.Time {
			return fuzzBase.Add(time.Duration(rng.IntN(5)) * time.Second)
		}},
		{"instants spread over years, with nanoseconds", func() time.Time {
			return fuzzBase.Add(time.Duration(rng.Int64N(int64(100*365*Day))) - 50*365*Day)
		}},
		{"instants before 1970", func() time.Time {
			return time.Unix(-rng.Int64N(1e9), rng.Int64N(1e9))
		}},
		{"instants outside what int64 nanoseconds can hold", func() time.Time {
			if rng.IntN(10) == 0 {
				return time.Date(1000+rng.IntN(3000), 1, 1, 0, 0, 0, rng.IntN(1e9), time.UTC)
			}
			return fuzzBase.Add(time.Duration(rng.IntN(3)) * time.Hour)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 {
				items := make([]Item, rng.IntN(300))
				keys := make([]rankKey, len(items))
				for i := range items {
					items[i] = Item{ID: string(rune('a' + rng.IntN(3))), Time: tc.gen()}
					keys[i] = rankKey{sec: items[i].Time.Unix(), nsec: int32(items[i].Time.Nanosecond()), idx: int32(i)}
				}
				want := slices.Clone(keys)
				slices.SortFunc(want, newerFirst(items, false))
				sortNewestFirst(keys, nil, items, false)
				if !slices.Equal(keys, want) {
					t.Fatalf("radix order differs from the comparison order")
				}
			}
		})
	}
}
