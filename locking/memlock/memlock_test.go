package memlock_test

import (
	"testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
)

func TestConformance(t *testing.T) {
	locktest.Run(t, func(*testing.T) locking.Backend { return memlock.New() })
}
