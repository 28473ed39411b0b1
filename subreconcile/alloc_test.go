//go:build !race

package subreconcile_test

import "testing"

// The race detector adds allocations of its own, hence the build tag.
func TestNoopLoopDoesNotAllocate(t *testing.T) {
	for _, bc := range benchRunners(t) {
		db := reconciledDatabase()
		allocs := testing.AllocsPerRun(200, func() { bc.r.Run(bc.ctx, db) })
		if allocs != 0 {
			t.Errorf("%s: a no-op loop over %d steps allocates %v times, want 0", bc.name, chainLength, allocs)
		}
	}
}
