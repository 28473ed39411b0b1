package pool

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Limits is the most entries a pool's bucket holds, per provider: the
// seed's controller.backupInfrastructures.quota. It is a flag.Value, set
// from "aws=100,azure=50" (a repeated flag adds to it).
type Limits map[string]int

// Set adds the limits of s, "provider=limit" pairs separated by commas. A
// limit below 1, a provider given twice, or a pair without "=" is an error
// that names the pair.
func (q *Limits) Set(s string) error {
	if *q == nil {
		*q = Limits{}
	}
	for _, pair := range strings.Split(s, ",") {
		provider, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || provider == "" {
			return fmt.Errorf("%q: want provider=limit", pair)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("%q: the limit of provider %q must be a whole number of at least 1", pair, provider)
		}
		if _, dup := (*q)[provider]; dup {
			return fmt.Errorf("%q: provider %q is given twice", pair, provider)
		}
		(*q)[provider] = n
	}
	return nil
}

// String is q in the form Set reads, providers sorted.
func (q Limits) String() string {
	var pairs []string
	for _, p := range slices.Sorted(maps.Keys(q)) {
		pairs = append(pairs, fmt.Sprintf("%s=%d", p, q[p]))
	}
	return strings.Join(pairs, ",")
}
