package plugin_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// secondNamespace creates a namespace named after k's, which sorts right
// after it, and deletes it when the test ends.
func secondNamespace(t *testing.T, k *testenv.Kubernetes) string {
	t.Helper()
	name := k.Namespace + "-b"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := k.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// rowsOf returns the rows of a -A table whose NAMESPACE is one of
// namespaces, each split into its cells (no cell here holds a space), and
// checks the header: NAMESPACE first, then want. Other tests' namespaces
// may still be listed (they are deleted in the background): their rows
// are left out.
func rowsOf(t *testing.T, table string, header []string, namespaces ...string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, append([]string{"NAMESPACE"}, header...)) {
		t.Errorf("header %q, want NAMESPACE then %q", lines[0], header)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) > 0 && slices.Contains(namespaces, f[0]) {
			rows = append(rows, f)
		}
	}
	return rows
}

// itemsOf returns the items of a -o json List whose namespace is one of
// namespaces, in order.
func itemsOf(t *testing.T, out string, namespaces ...string) []map[string]any {
	t.Helper()
	var l struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("-o json is not JSON: %v\n%s", err, out)
	}
	if l.Kind != "List" {
		t.Errorf("-A -o json prints kind %q, want List", l.Kind)
	}
	var items []map[string]any
	for _, it := range l.Items {
		u := unstructured.Unstructured{Object: it}
		if slices.Contains(namespaces, u.GetNamespace()) {
			items = append(items, it)
		}
	}
	return items
}

func equalRows(t *testing.T, what string, got, want [][]string) {
	t.Helper()
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}

// TestClaimsAllNamespaces plans each namespace alone: the claim data-db-0
// of b is unmounted and expired, although a pod of a mounts a claim of
// the same name.
func TestClaimsAllNamespaces(t *testing.T) {
	k := testenv.StartKubernetes(t)
	a, b := k.Namespace, secondNamespace(t, k)
	ctx := context.Background()
	ann := lifecycle.Annotations{}
	claim := func(ns string, a map[string]string) {
		t.Helper()
		c := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-db-0", Annotations: a},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
		}
		if _, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claim(a, map[string]string{ann.PodNameKey(): "db-0", ann.TTLKey(): "1d"})
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "db", Image: "db"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}},
		},
	}
	if _, err := k.Client.CoreV1().Pods(a).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim(b, map[string]string{ann.PodNameKey(): "db-0", ann.TTLKey(): "1d", ann.LastUnmountedKey(): t0.Add(-3 * 24 * time.Hour).Format(time.RFC3339)})

	opts := plugin.Options{Clock: clocktesting.NewFakeClock(t0)}
	r := run(t, opts, kube(k, "claims", "-A")...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	equalRows(t, "claims -A", rowsOf(t, r.out, []string{"CLAIM", "LAST", "POD", "STATE", "UNMOUNTED", "SINCE", "TTL", "DELETABLE"}, a, b), [][]string{
		{a, "data-db-0", "db-0", "mounted", "-", "1d", "-"},
		{b, "data-db-0", "db-0", "unmounted", "2026-01-12T09:00:00Z", "1d", "now"},
	})
	if !strings.Contains(r.out, "collector dry run: ") || !strings.Contains(r.out, " namespaces would be deleted now") {
		t.Errorf("claims -A lacks the summary over the namespaces:\n%s", r.out)
	}

	r = run(t, opts, kube(k, "claims", "-A", "-o", "json")...)
	items := itemsOf(t, r.out, a, b)
	if len(items) != 2 {
		t.Fatalf("-o json lists %d ClaimsPreview of the test's namespaces, want 2:\n%s", len(items), r.out)
	}
	for i, ns := range []string{a, b} {
		u := unstructured.Unstructured{Object: items[i]}
		del, _, _ := unstructured.NestedSlice(u.Object, "claims")
		if u.GetKind() != "ClaimsPreview" || u.GetNamespace() != ns || len(del) != 1 {
			t.Errorf("item %d: %s %s/%s with %d claims, want a ClaimsPreview of %s with 1", i, u.GetKind(), u.GetNamespace(), u.GetName(), len(del), ns)
		}
	}

	r = run(t, opts, kube(k, "claims", "-A", "-o", "name")...)
	for _, want := range []string{"claimspreview.kubectl.groundskeeper.io/claims"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("-A -o name lacks %q:\n%s", want, r.out)
		}
	}
}

// inNamespace returns the client of the test's custom resource plural in
// namespace ns.
func inNamespace(t *testing.T, k *testenv.Kubernetes, plural, ns string) dynamic.ResourceInterface {
	t.Helper()
	dc, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dc.Resource(schema.GroupVersionResource{Group: testGroup, Version: "v1", Resource: plural}).Namespace(ns)
}

// TestTasksAllNamespaces lists each namespace's queues apart: the target
// db-a of a and the target db-a of b each have a head.
func TestTasksAllNamespaces(t *testing.T) {
	k := testenv.StartKubernetes(t)
	a, b := k.Namespace, secondNamespace(t, k)
	cache := "--cache-dir=" + t.TempDir()
	createWithStatus(t, customResource(t, k, "gktasks", "GKTask"), task("t1-compact", "db-a", "compaction", nil, 0))
	createWithStatus(t, inNamespace(t, k, "gktasks", b), task("t1-defrag", "db-a", "defragmentation", nil, 0))
	createWithStatus(t, inNamespace(t, k, "gktasks", b), task("t2-compact", "db-a", "compaction", nil, 0))
	opts := plugin.Options{Tasks: "gktasks.test.groundskeeper.io", TaskTargetField: "etcdName", Clock: clocktesting.NewFakeClock(time.Now().Add(time.Hour))}

	r := run(t, opts, kube(k, "tasks", "-A", cache)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	rows := rowsOf(t, r.out, []string{"TARGET", "POS", "NAME", "KIND", "STATE", "AGE", "STEP", "AWAITING", "APPROVAL"}, a, b)
	for i := range rows {
		if len(rows[i]) > 6 {
			rows[i][6] = "AGE" // when the API server created the task
		}
	}
	equalRows(t, "tasks -A", rows, [][]string{
		{a, "db-a", "1", "t1-compact", "compaction", "Pending", "AGE", "-", "-"},
		{b, "db-a", "1", "t1-defrag", "defragmentation", "Pending", "AGE", "-", "-"},
		{b, "db-a", "2", "t2-compact", "compaction", "Pending", "AGE", "-", "-"},
	})

	r = run(t, opts, kube(k, "tasks", "-A", "-o", "json", cache)...)
	items := itemsOf(t, r.out, a, b)
	if len(items) != 2 {
		t.Fatalf("-o json lists %d TaskQueues of the test's namespaces, want 2:\n%s", len(items), r.out)
	}
	for i, want := range []struct {
		ns    string
		tasks int
	}{{a, 1}, {b, 2}} {
		u := unstructured.Unstructured{Object: items[i]}
		tasks, _, _ := unstructured.NestedSlice(u.Object, "tasks")
		if u.GetKind() != "TaskQueues" || u.GetNamespace() != want.ns || len(tasks) != want.tasks {
			t.Errorf("item %d: %s of %s with %d tasks, want TaskQueues of %s with %d", i, u.GetKind(), u.GetNamespace(), len(tasks), want.ns, want.tasks)
		}
	}
}

// TestBackupsAllNamespaces evaluates the group db-a of each namespace
// alone: last=1 keeps the newest of each.
func TestBackupsAllNamespaces(t *testing.T) {
	k := testenv.StartKubernetes(t)
	a, b := k.Namespace, secondNamespace(t, k)
	cache := "--cache-dir=" + t.TempDir()
	backup := func(c dynamic.ResourceInterface, name string, age time.Duration) {
		t.Helper()
		createWithStatus(t, c, map[string]any{
			"apiVersion": testGroup + "/v1", "kind": "GKBackup",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"example.com/cluster": "db-a"}},
			"status":   map[string]any{"phase": "Succeeded", "completionTime": t0.Add(-age).Format(time.RFC3339)},
		})
	}
	backup(customResource(t, k, "gkbackups", "GKBackup"), "db-a-0", 0)
	backup(inNamespace(t, k, "gkbackups", a), "db-a-1", 24*time.Hour)
	backup(inNamespace(t, k, "gkbackups", b), "db-a-0", 12*time.Hour)
	opts := plugin.Options{Backups: "gkbackups.test.groundskeeper.io", BackupGroupLabel: "example.com/cluster",
		Clock: clocktesting.NewFakeClock(t0.Add(time.Hour))}
	args := []string{"backups", "db-a", "-A", "--policy", "last=1", "--time-field", "status.completionTime", "--outcome-field", "status.phase", cache}

	r := run(t, opts, kube(k, args...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	rows := rowsOf(t, r.out, []string{"NAME", "TIME", "OUTCOME", "DECISION", "WHY", "DELETABLE"}, a, b)
	equalRows(t, "backups -A", rows, [][]string{
		{a, "db-a-0", "2026-01-15T09:00:00Z", "succeeded", "keep", "last", "snapshot,", "newest", "successful", "(guard)", "-"},
		{a, "db-a-1", "2026-01-14T09:00:00Z", "succeeded", "delete", "-", "now"},
		{b, "db-a-0", "2026-01-14T21:00:00Z", "succeeded", "keep", "last", "snapshot,", "newest", "successful", "(guard)", "-"},
	})
	for _, want := range []string{"policy last=1 in " + a + ": 1 of 2 deletable now", "policy last=1 in " + b + ": 0 of 1 deletable now"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("backups -A lacks %q", want)
		}
	}
	r = run(t, opts, kube(k, append(args, "-o", "yaml")...)...)
	if !strings.Contains(r.out, "kind: List") || strings.Count(r.out, "kind: RetentionPreview") < 2 {
		t.Errorf("-A -o yaml is not a List of RetentionPreview:\n%s", r.out)
	}
}
