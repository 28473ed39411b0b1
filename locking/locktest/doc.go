// Package locktest is the conformance suite every locking.Backend must pass,
// and helpers to measure backends.
//
// Start with [Run], from the backend's test, given a constructor:
//
//	func TestConformance(t *testing.T) {
//		locktest.Run(t, func(t *testing.T) locking.Backend { return memlock.New() })
//	}
//
// It needs only the Backend interface, and every subtest may share one
// server, as long as the prefix below locking.DefaultPrefix + "/locktest/"
// starts empty. Passing it does not show isolation under every
// interleaving, nor fault handling: run Hammer and CheckLinearizable, and
// Proxy and InjectFaults, as well.
//
// # The suite
//
// The suite uses only the Backend interface, so it runs unchanged against
// networked backends. Each subtest keeps its keys under its own prefix
// (below locking.DefaultPrefix + "/locktest/"), so a constructor may hand
// out the same server to every subtest as long as that prefix starts empty.
// Corrupted records are written through Backend.Update itself.
//
// Time comes from fake clocks: expiry is tested by stepping them, never by
// sleeping.
//
// # Beyond the suite
//
// For backends' own tests and benchmarks:
//
//   - RunBenchmarks measures transactions per operation, latency and
//     contended throughput; Counting counts transactions.
//   - Hammer (in goroutines) and HammerProcesses (in child processes, see
//     HammerChild) record a history of contenders taking, extending and
//     releasing the lock on a fast-running clock; CheckLinearizable checks
//     it with porcupine against a model of the lock, and CheckCatchesBroken
//     shows the check rejects the same backend wrapped by
//     WithoutIsolation.
//   - Proxy and InjectFaults cut connections and drop replies between a
//     client and a real server, to test failures in the middle of
//     transactions.
//
// # Guarantees
//
// A backend that passes Run has been shown to:
//
//   - let a transaction read its own writes, and keep what it committed;
//     copy what Set is given; tell an empty value from an absent key;
//     return GetPrefix results under the prefix only, in byte order; clear
//     only under a ClearPrefix prefix, keeping later writes, and refuse the
//     empty prefix;
//   - commit nothing when fn fails, and return fn's error unchanged;
//   - refuse, with locking.ErrConflict, a commit after a concurrent commit
//     changed a key it read, inserted a key under a prefix it read, or
//     deleted one; lose no update of concurrent read-modify-writes;
//   - fail every call on a Txn kept after Update returned with
//     locking.ErrTxnDone;
//   - carry the whole Lock: take, extend, take-over and release at the
//     FoundationDB operator's keys and byte format, the deny list, corrupt
//     records, upgrade records, the disable switch, the dry runs of
//     Release, UpdateDenyList and ClearPendingUpgrades (which report what
//     would change and write nothing), a clear of the upgrade records read
//     (ClearUpgradesOptions.Only) that keeps a record added since, and
//     contenders that never hold the lock together (Exclusion).
//
// Each subtest leaves the prefix it used empty, so the suite can run again
// (-count) against the same server.
//
// # What it does not guarantee
//
//   - Isolation under every interleaving: the suite checks the interleavings
//     it forces. Run Hammer or HammerProcesses and CheckLinearizable as
//     well (every backend in this module does).
//   - Fault handling: the suite never cuts a connection, so it does not show
//     that a backend reports locking.ErrUnavailable and
//     locking.ErrUnknownResult truthfully. Test that with Proxy and
//     InjectFaults against the real server.
//   - Speed: RunBenchmarks measures it; the suite has no bounds.
package locktest
