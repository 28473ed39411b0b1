// Package propertytest runs the property tests of backupstore/share and
// its subpackages over their seeds.
//
// PROPERTY_SEED replays one seed; PROPERTY_DURATION (a Go duration) runs
// fresh seeds for that long (make property, make chaos); by default a
// fixed set of seeds runs (make test).
package propertytest

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// Seeds calls run with each seed to test, as the environment says.
func Seeds(t *testing.T, run func(t *testing.T, seed uint64)) {
	if s := os.Getenv("PROPERTY_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PROPERTY_SEED=%q: %v", s, err)
		}
		run(t, seed)
		return
	}
	if s := os.Getenv("PROPERTY_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("PROPERTY_DURATION=%q: %v", s, err)
		}
		start, seed, n := time.Now(), uint64(time.Now().UnixNano()), 0
		t.Logf("fresh seeds from %d", seed)
		for time.Since(start) < d && !t.Failed() {
			run(t, seed+uint64(n))
			n++
		}
		t.Logf("%d seeds", n)
		return
	}
	for seed := uint64(1); seed <= 60 && !t.Failed(); seed++ {
		run(t, seed)
	}
}
