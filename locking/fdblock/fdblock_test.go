package fdblock_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/fdblock"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
)

var (
	openOnce sync.Once
	db       fdb.Database
	openErr  error
)

// database opens the cluster named by FDB_CLUSTER_FILE, and skips the test
// if it is unset: no FoundationDB cluster can be installed on
// groundskeeper's CI machines.
func database(t testing.TB) fdb.Database {
	t.Helper()
	clusterFile := os.Getenv("FDB_CLUSTER_FILE")
	if clusterFile == "" {
		t.Skip("FDB_CLUSTER_FILE is not set: no FoundationDB cluster to test against")
	}
	openOnce.Do(func() {
		if openErr = fdb.APIVersion(710); openErr == nil {
			db, openErr = fdb.OpenDatabase(clusterFile)
		}
	})
	if openErr != nil {
		t.Fatalf("opening %s: %v", clusterFile, openErr)
	}
	return db
}

// Every subtest of the suite keeps its keys under its own prefix below
// locking.DefaultPrefix + "/locktest/" and clears it when it ends, so the
// suite can run against a shared cluster.
func TestConformance(t *testing.T) {
	b := fdblock.New(database(t))
	locktest.Run(t, func(*testing.T) locking.Backend { return b })
}

func TestAs(t *testing.T) {
	b := fdblock.New(database(t))
	var got fdb.Database
	if !b.As(&got) {
		t.Fatal("As(*fdb.Database) = false")
	}
}

// TestExclusion hammers the lock with 8 contenders for
// locktest.HammerDuration (5 s unless LOCKTEST_HAMMER_DURATION says
// otherwise) and checks the history with porcupine; then shows that the
// check catches the same backend without isolation.
func TestExclusion(t *testing.T) {
	b := fdblock.New(database(t))
	d, err := locktest.HammerDuration(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	o := locktest.HammerOptions{Prefix: locking.DefaultPrefix + "/locktest/TestExclusion", Duration: d}
	h, err := locktest.Hammer(t.Context(), b, o)
	if err != nil {
		t.Fatal(err)
	}
	locktest.CheckLinearizable(t, h, 2*time.Minute)
	locktest.CheckCatchesBroken(t.Context(), t, b, o, 2*time.Minute)
}

func BenchmarkLock(b *testing.B) {
	backend := fdblock.New(database(b))
	locktest.RunBenchmarks(b, func(*testing.B) locking.Backend { return backend })
}
