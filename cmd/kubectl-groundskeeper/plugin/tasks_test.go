package plugin_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func task(name, target, kind string, status map[string]any, ttl int64) map[string]any {
	spec := map[string]any{"config": map[string]any{kind: map[string]any{}}, "etcdName": target}
	if ttl > 0 {
		spec["ttlSecondsAfterFinished"] = ttl
	}
	obj := map[string]any{"apiVersion": testGroup + "/v1", "kind": "GKTask",
		"metadata": map[string]any{"name": name}, "spec": spec}
	if status != nil {
		obj["status"] = status
	}
	return obj
}

// ages are the AGE cells of the tasks table, which depend on when the API
// server created the tasks.
var ages = regexp.MustCompile(`\b(59|60)m\b`)

func TestTasks(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := context.Background()
	tasks := customResource(t, k, "gktasks", "GKTask")
	cache := "--cache-dir=" + t.TempDir()
	at := t0.Format(time.RFC3339)

	// Names in creation order: tasks created in one second are queued by
	// name (opstask.Task.Before).
	first := createWithStatus(t, tasks, task("t1-snapshot", "db-a", "onDemandSnapshot", map[string]any{
		"state":         "InProgress",
		"steps":         []any{map[string]any{"name": "snapshot", "state": "Completed", "lastUpdateTime": at}},
		"approvals":     []any{map[string]any{"step": "upload", "state": "AwaitingApproval", "token": "upload-7c1e", "lastUpdateTime": at, "description": "upload 3 files (1.2 GiB) to s3://backups/db-a/; approve with token upload-7c1e"}},
		"lastOperation": map[string]any{"type": "Execution", "state": "InProgress", "runID": "r1", "lastUpdateTime": at, "description": "awaiting approval of step upload"},
	}, 0))
	createWithStatus(t, tasks, task("t2-compact", "db-a", "compaction", nil, 0))
	createWithStatus(t, tasks, task("t3-defrag", "db-b", "defragmentation", map[string]any{
		"state": "Succeeded", "lastTransitionTime": at,
		"lastOperation": map[string]any{"type": "Execution", "state": "Completed", "runID": "r2", "lastUpdateTime": at, "description": "defragmented 3 members"},
	}, 3600))
	created := first.GetCreationTimestamp().Time
	opts := plugin.Options{Tasks: "gktasks.test.groundskeeper.io", TaskTargetField: "etcdName", Clock: clocktesting.NewFakeClock(created.Add(time.Hour))}

	r := run(t, opts, kube(k, "tasks", cache)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	golden(t, "tasks.txt", ages.ReplaceAllString(r.out, "AGE"), k)
	r = run(t, opts, kube(k, "tasks", "-o", "wide", cache)...)
	for _, want := range []string{"DELETED IN", "LAST OPERATION", "Execution/InProgress: awaiting approval of step upload"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("-o wide lacks %q", want)
		}
	}
	r = run(t, opts, kube(k, "tasks", "-o", "json", cache)...)
	stamps := regexp.MustCompile(`"created": "[^"]+"`)
	golden(t, "tasks.json", stamps.ReplaceAllString(r.out, `"created": "CREATED"`), k)

	t.Run("approve is a dry run without --yes", func(t *testing.T) {
		r := run(t, opts, kube(k, "tasks", "approve", "t1-snapshot", cache)...)
		if r.code != 0 || !strings.Contains(r.out, "step upload: upload 3 files (1.2 GiB)") || !strings.Contains(r.out, "dry run: nothing approved") {
			t.Errorf("exit %d:\n%s", r.code, r.out)
		}
		u, err := tasks.Get(ctx, "t1-snapshot", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if a, ok := u.GetAnnotations()[opstask.ApprovalAnnotation]; ok {
			t.Errorf("a dry run approved: %s=%q", opstask.ApprovalAnnotation, a)
		}
	})
	t.Run("approve --yes", func(t *testing.T) {
		r := run(t, opts, kube(k, "tasks", "approve", "t1-snapshot", "--yes", cache)...)
		if r.code != 0 || !strings.Contains(r.out, "step upload approved") {
			t.Errorf("exit %d:\n%s", r.code, r.out)
		}
		u, err := tasks.Get(ctx, "t1-snapshot", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if a := u.GetAnnotations()[opstask.ApprovalAnnotation]; a != "upload-7c1e" {
			t.Errorf("%s = %q, want upload-7c1e", opstask.ApprovalAnnotation, a)
		}
	})
	t.Run("nothing to approve", func(t *testing.T) {
		oneLineError(t, run(t, opts, kube(k, "tasks", "approve", "t2-compact", "--yes", cache)...), plugin.ExitError, "t2-compact", "no step awaits approval")
	})
	t.Run("wait for a finished task", func(t *testing.T) {
		r := run(t, opts, kube(k, "tasks", "wait", "t3-defrag", cache)...)
		if r.code != 0 || !strings.Contains(r.out, "Succeeded") {
			t.Errorf("exit %d:\n%s", r.code, r.out)
		}
	})
	t.Run("unknown resource", func(t *testing.T) {
		oneLineError(t, run(t, opts, kube(k, "tasks", "--resource", "nosuchtasks.example.com", cache)...), plugin.ExitError, "nosuchtasks.example.com")
	})
}

// tasks --watch prints the queues, then again after each change of a task,
// and only then: a change of a task's status and a new task are each
// printed once.
func TestTasksWatch(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := context.Background()
	tasks := customResource(t, k, "gktasks", "GKTask")
	first := createWithStatus(t, tasks, task("w1-snapshot", "db-a", "onDemandSnapshot", map[string]any{"state": "InProgress"}, 0))
	opts := plugin.Options{Tasks: "gktasks.test.groundskeeper.io", TaskTargetField: "etcdName",
		Clock: clocktesting.NewFakeClock(first.GetCreationTimestamp().Add(time.Hour))}
	out, done, stop := watchCommand(t, opts, kube(k, "tasks", "--watch", "--cache-dir="+t.TempDir())...)
	out.waitFor(t, "w1-snapshot", 1, done)

	createWithStatus(t, tasks, task("w2-compact", "db-a", "compaction", nil, 0))
	out.waitFor(t, "w2-compact", 1, done)
	first.Object["status"] = map[string]any{"state": "Succeeded", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if _, err := tasks.UpdateStatus(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "Succeeded", 1, done)
	if code := stop(); code != plugin.ExitOK {
		t.Errorf("interrupted watch: exit %d, want 0", code)
	}
	if n := strings.Count(out.String(), "TARGET"); n != 3 {
		t.Errorf("the queues were printed %d times, want 3: once, then once for each of the 2 changes:\n%s", n, out.String())
	}
}
