package retention

import (
	"math"
	"slices"
	"strings"
)

// newerFirst orders rank keys newest first: later instant first, then by ID
// (unless byInput), then by position in the input.
func newerFirst(items []Item, byInput bool) func(a, b rankKey) int {
	return func(a, b rankKey) int {
		switch {
		case a.sec != b.sec:
			if a.sec > b.sec {
				return -1
			}
			return 1
		case a.nsec != b.nsec:
			if a.nsec > b.nsec {
				return -1
			}
			return 1
		}
		if byInput {
			return int(a.idx - b.idx)
		}
		if c := strings.Compare(items[a.idx].ID, items[b.idx].ID); c != 0 {
			return c
		}
		return int(a.idx - b.idx)
	}
}

// sortNewestFirst sorts keys, which are in input order, newest first (see
// newerFirst), using tmp as scratch, and returns tmp for reuse.
func sortNewestFirst(keys, tmp []rankKey, items []Item, byInput bool) []rankKey {
	tmp = sortByInstant(keys, tmp, items)
	if !byInput {
		sortTies(keys, items)
	}
	return tmp
}

// sortByInstant sorts keys, which are in input order, newest first and
// stably: equal instants stay in input order. Instants that fit in int64
// nanoseconds (1678 to 2262) are sorted by an LSD radix sort; a comparison
// sort handles the rest.
func sortByInstant(keys, tmp []rankKey, items []Item) []rankKey {
	if len(keys) < 2 {
		return tmp
	}
	const maxSec = math.MaxInt64/1_000_000_000 - 1
	for _, k := range keys {
		if k.sec > maxSec || k.sec < -maxSec {
			slices.SortFunc(keys, newerFirst(items, true))
			return tmp
		}
	}
	// Descending instants as ascending unsigned keys.
	key := func(k rankKey) uint64 {
		return ^(uint64(k.sec*1e9+int64(k.nsec)) ^ 1<<63)
	}
	var counts [8][256]int
	for _, k := range keys {
		x := key(k)
		for d := range 8 {
			counts[d][byte(x>>(8*d))]++
		}
	}
	tmp = slices.Grow(tmp[:0], len(keys))[:len(keys)]
	src, dst := keys, tmp
	for d := range 8 {
		c := &counts[d]
		if c[byte(key(keys[0])>>(8*d))] == len(keys) {
			continue // every key has the same digit here
		}
		pos := 0
		for i, n := range c {
			c[i] = pos
			pos += n
		}
		shift := 8 * d
		for _, k := range src {
			b := byte(key(k) >> shift)
			dst[c[b]] = k
			c[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
	return tmp
}

// sortTies sorts the runs of equal instants in keys, which are sorted newest
// first and stably, by ID and then input order.
func sortTies(keys []rankKey, items []Item) {
	cmp := newerFirst(items, false)
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].sec == keys[i].sec && keys[j].nsec == keys[i].nsec {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keys[i:j], cmp)
		}
		i = j
	}
}
