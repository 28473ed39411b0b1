package plugin_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestBackups(t *testing.T) {
	k := testenv.StartKubernetes(t)
	backups := customResource(t, k, "gkbackups", "GKBackup")
	cache := "--cache-dir=" + t.TempDir()
	// Six nightly backups of db-a, the newest failed; one of db-b.
	for i := range 6 {
		phase := "Succeeded"
		if i == 0 {
			phase = "Failed"
		}
		createWithStatus(t, backups, map[string]any{
			"apiVersion": testGroup + "/v1", "kind": "GKBackup",
			"metadata": map[string]any{"name": fmt.Sprintf("db-a-%d", i), "labels": map[string]any{"example.com/cluster": "db-a"}},
			"status":   map[string]any{"phase": phase, "completionTime": t0.Add(-time.Duration(i) * 24 * time.Hour).Format(time.RFC3339)},
		})
	}
	createWithStatus(t, backups, map[string]any{
		"apiVersion": testGroup + "/v1", "kind": "GKBackup",
		"metadata": map[string]any{"name": "db-b-0", "labels": map[string]any{"example.com/cluster": "db-b"}},
		"status":   map[string]any{"phase": "Succeeded", "completionTime": t0.Format(time.RFC3339)},
	})
	opts := plugin.Options{Backups: "gkbackups.test.groundskeeper.io", BackupGroupLabel: "example.com/cluster",
		Clock: clocktesting.NewFakeClock(t0.Add(time.Hour))}
	args := []string{"backups", "db-a", "--policy", "last=2,daily=3", "--time-field", "status.completionTime", "--outcome-field", "status.phase", cache}

	r := run(t, opts, kube(k, args...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	golden(t, "backups.txt", r.out, k)
	r = run(t, opts, kube(k, append(args, "-o", "json")...)...)
	golden(t, "backups.json", r.out, k)
	if strings.Contains(r.out, "db-b-0") {
		t.Errorf("the preview of db-a lists db-b's backup")
	}
	t.Run("bad input", func(t *testing.T) {
		oneLineError(t, run(t, opts, kube(k, "backups", "db-a", "--policy", "daily=x", cache)...), plugin.ExitUsage, "daily=x")
		oneLineError(t, run(t, opts, kube(k, "backups", "db-a", "--time-field", "status.nothing", cache)...), plugin.ExitError, "db-a-0", "status.nothing")
	})
}
