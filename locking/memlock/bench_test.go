package memlock_test

import (
	"testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
)

func BenchmarkLock(b *testing.B) {
	locktest.RunBenchmarks(b, func(*testing.B) locking.Backend { return memlock.New() })
}
