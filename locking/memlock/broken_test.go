package memlock

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
)

// TestSuiteCatchesStoreWithoutIsolation runs the conformance suite, in a
// child process, against the store wrapped by locktest.WithoutIsolation
// (its reads and writes in two transactions, as with a backend that drops
// its conflict checks), and
// checks that exactly the isolation tests fail. A suite that passed such a
// store would prove nothing about the real backends.
func TestSuiteCatchesStoreWithoutIsolation(t *testing.T) {
	const name = "TestSuiteCatchesStoreWithoutIsolation"
	if os.Getenv("MEMLOCK_BROKEN_SUITE") == "1" {
		locktest.Run(t, func(*testing.T) locking.Backend { return locktest.WithoutIsolation(New()) })
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "MEMLOCK_BROKEN_SUITE=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a store without isolation:\n%s", out)
	}
	mustFail := []string{
		"Backend/write_after_a_concurrent_commit_to_a_read_key_conflicts",
		"Backend/write_after_a_concurrent_insert_under_a_read_prefix_conflicts",
		"Concurrency/conflicting_take_without_retry_fails_with_ErrConflict",
		"Concurrency/conflicting_take_retries_and_sees_the_winner",
		"Concurrency/deny-list_update_conflicts_with_a_concurrent_take_by_the_denied_instance",
	}
	mustPass := []string{
		"Take/free_lock_is_taken_for_the_default_duration_in_the_operator's_format",
		"Take/expired_lock_is_taken_over_with_a_fresh_start",
		"DenyList/denied_holder_cannot_extend",
		"Corrupt/not_a_tuple",
		"Release/non-holder_is_refused",
	}
	text := string(out)
	for _, sub := range mustFail {
		if !strings.Contains(text, "--- FAIL: "+name+"/"+sub+" ") {
			t.Errorf("subtest %s did not fail against the broken store", sub)
		}
	}
	for _, sub := range mustPass {
		if !strings.Contains(text, "--- PASS: "+name+"/"+sub+" ") {
			t.Errorf("subtest %s did not pass against the broken store; isolation should not matter to it", sub)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", text)
	}
}
