package memlock_test

import (
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
)

// TestLinearizable hammers the in-memory store with 8 contenders and checks
// the history with porcupine, and shows that the check catches the same
// store wrapped to lose its isolation.
func TestLinearizable(t *testing.T) {
	o := locktest.HammerOptions{Prefix: "lin", Duration: 2 * time.Second}
	t.Run("memlock", func(t *testing.T) {
		h, err := locktest.Hammer(t.Context(), memlock.New(), o)
		if err != nil {
			t.Fatal(err)
		}
		locktest.CheckLinearizable(t, h, time.Minute)
	})
	t.Run("broken backend is caught", func(t *testing.T) {
		locktest.CheckCatchesBroken(t.Context(), t, memlock.New(), o, time.Minute)
	})
}
