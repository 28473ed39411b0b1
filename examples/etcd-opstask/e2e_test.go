package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/opsctl"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/rbactest"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/replicatest"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The command, flags and all, as two replicas (two managers, as the
// Deployment runs them) against a real API server with the CRD of deploy/, a
// real etcd, MinIO and fake-gcs-server; tasks are created and watched with
// the opstask CLI. The etcd is the test environment's, shared
// with the API server: snapshots, compaction and defragmentation act on the
// whole of it, which is why this package's tests have a binary of their own.
func TestTasksOnRealEtcdAndStores(t *testing.T) {
	k := testenv.StartKubernetes(t)
	dyn := installCRD(t, k.Config)
	e := testenv.StartEtcd(t)
	s3 := testenv.S3(t)
	gcs := testenv.GCS(t)
	ctx := logr.NewContext(t.Context(), testr.New(t))
	ns := k.Namespace

	if _, err := k.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "minio"},
		Data: map[string][]byte{
			"accessKeyID": []byte(testenv.S3AccessKeyID), "secretAccessKey": []byte(testenv.S3SecretAccessKey),
			"region": []byte(testenv.S3Region), "endpoint": []byte(s3.Endpoint), "s3ForcePathStyle": []byte("true"),
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	ec, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	// Free pages for defragmentation to reclaim: 3 MB written, then deleted.
	big := strings.Repeat("x", 10<<10)
	for i := range 300 {
		if _, err := ec.Put(ctx, fmt.Sprintf("%sbig/%03d", e.Prefix, i), big); err != nil {
			t.Fatal(err)
		}
	}
	put, err := ec.Put(ctx, e.Prefix+"config", "v1")
	if err != nil {
		t.Fatal(err)
	}
	oldRev := put.Header.Revision
	if _, err := ec.Delete(ctx, e.Prefix+"big/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}

	// The replicas and the CLI reach the API server through kubeconfigs of
	// their own, which record their requests for the RBAC check.
	var controllerRequests, cliRequests rbactest.Recorder
	controllerKubeconfig := controllerRequests.Kubeconfig(t, k.Config)
	cliKubeconfig := cliRequests.Kubeconfig(t, k.Config)

	// Every execution, as the API server saw it, from before the replicas
	// start: task name → the run IDs of its Execution operations.
	executions := watchExecutions(t, dyn, ns)

	// Replica a serves the metrics and the probes; b has both off, as two
	// managers cannot listen on one address. The etcd names s1 to s3 are
	// the test's etcd again, with buckets of their own, for the stream of
	// tasks below.
	metricsAddr, probeAddr := replicatest.FreeAddr(t), replicatest.FreeAddr(t)
	args := []string{"--kubeconfig", controllerKubeconfig, "--namespace", ns, "--zap-log-level", "1",
		"--etcd", "main=" + strings.Join(e.Endpoints, ","), "--etcd", "down=http://127.0.0.1:1",
		"--backup-store", "main=s3://" + s3.Bucket + "?prefix=main/", "--backup-secret", "main=minio"}
	for _, s := range streamEtcds {
		args = append(args, "--etcd", s+"="+strings.Join(e.Endpoints, ","),
			"--backup-store", s+"=s3://"+s3.Bucket+"?prefix="+s+"/", "--backup-secret", s+"=minio")
	}
	args = slices.Clip(args) // each replica appends its own
	stopA := startReplica(t, "a", append(args, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probeAddr))
	stopB := startReplica(t, "b", append(args, "--health-probe-bind-address", "0"))
	defer stopA()
	defer stopB()
	replicatest.WaitReady(t, "http://"+probeAddr+"/readyz")

	const ttl = "8"
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		args = append(args, "--kubeconfig", cliKubeconfig, "--namespace", ns)
		if args[0] == "create" {
			args = append(args, "--ttl", ttl, "--timeout", "60s")
		}
		var out, errOut bytes.Buffer
		code := opsctl.Run(ctx, args, &out, &errOut)
		t.Logf("opstask %s → exit %d\n%s%s", strings.Join(args[:min(len(args), 4)], " "), code, out.String(), errOut.String())
		if code != wantCode {
			t.Fatalf("opstask %v: exit %d, want %d", args, code, wantCode)
		}
		return out.String()
	}
	status := func(name string) opstask.Status {
		t.Helper()
		u, err := dyn.Resource(api.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var task api.EtcdOpsTask
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &task); err != nil {
			t.Fatal(err)
		}
		return task.Status
	}
	succeeded := func(name, wantDesc string) {
		t.Helper()
		st := status(name)
		lo := st.LastOperation
		if st.State != opstask.TaskStateSucceeded || st.StartedAt == nil || st.LastTransitionTime == nil || lo == nil ||
			lo.Type != opstask.LastOperationTypeExecution || lo.State != opstask.LastOperationStateCompleted ||
			!strings.Contains(lo.Description, wantDesc) || len(st.LastErrors) != 0 {
			t.Errorf("%s: status %+v, lastOperation %+v; want Succeeded, Execution/Completed %q, no errors", name, st, lo, wantDesc)
		}
	}
	refused := func(name string, state opstask.TaskState, code opstask.ErrorCode, desc string) {
		t.Helper()
		st := status(name)
		if st.State != state || len(st.LastErrors) != 1 || st.LastErrors[0].Code != code || !strings.Contains(st.LastErrors[0].Description, desc) {
			t.Errorf("%s: status %+v; want %s with one error %s containing %q", name, st, state, code, desc)
		}
	}
	backups := s3.Open(t)

	// A full snapshot lands in MinIO, with etcd's SHA-256 trailer intact.
	out := cli(0, "create", "snapshot", "--name", "full", "--etcd", "main", "--type", "full")
	if !strings.Contains(out, "Succeeded") {
		t.Errorf("CLI output lacks the final state:\n%s", out)
	}
	succeeded("full", "full snapshot of main at revision")
	fulls := keys(t, backups, "main/Full-")
	if len(fulls) != 1 {
		t.Fatalf("full snapshots in MinIO: %v, want one", fulls)
	}
	snap := read(t, backups, fulls[0])
	if n := len(snap) - sha256.Size; n < 20<<10 || !bytes.Equal(sha256Of(snap[:n]), snap[n:]) {
		t.Errorf("%s: %d bytes, SHA-256 trailer does not match: not an etcd snapshot", fulls[0], len(snap))
	}
	if s, ok := parseSnapshotKey(strings.TrimPrefix(fulls[0], "main/")); !ok || s.EndRev < oldRev {
		t.Errorf("%s: revision %d, want at least %d", fulls[0], s.EndRev, oldRev)
	}

	// A delta snapshot holds the changes since.
	if _, err := ec.Put(ctx, e.Prefix+"config", "v2"); err != nil {
		t.Fatal(err)
	}
	cli(0, "create", "snapshot", "--name", "delta", "--etcd", "main", "--type", "delta")
	succeeded("delta", "delta snapshot of main")
	deltas := keys(t, backups, "main/Delta-")
	if len(deltas) != 1 {
		t.Fatalf("delta snapshots in MinIO: %v, want one", deltas)
	}
	found := false
	delta := read(t, backups, deltas[0])
	if n := len(delta) - sha256.Size; n < 0 || !bytes.Equal(sha256Of(delta[:n]), delta[n:]) {
		t.Fatalf("%s: SHA-256 trailer does not match", deltas[0])
	}
	sc := bufio.NewScanner(bytes.NewReader(delta[:len(delta)-sha256.Size]))
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v", deltas[0], err)
		}
		found = found || (string(ev.Key) == e.Prefix+"config" && string(ev.Value) == "v2")
	}
	if !found {
		t.Errorf("%s lacks the change of %sconfig to v2", deltas[0], e.Prefix)
	}

	// Compaction and defragmentation of the real etcd, after two more
	// changes: the compaction then drops revisions a delta would need.
	for _, v := range []string{"v3", "v4"} {
		if _, err := ec.Put(ctx, e.Prefix+"config", v); err != nil {
			t.Fatal(err)
		}
	}
	before, err := ec.Status(ctx, e.Endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	cli(0, "create", "maintenance", "--name", "maintenance", "--etcd", "main", "--compaction", "--defragmentation")
	succeeded("maintenance", "defragmented "+e.Endpoints[0])
	if _, err := ec.Get(ctx, e.Prefix+"config", clientv3.WithRev(oldRev)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("get at revision %d after compaction: %v, want ErrCompacted", oldRev, err)
	}
	after, err := ec.Status(ctx, e.Endpoints[0])
	if err != nil {
		t.Fatal(err)
	}
	if after.DbSize > before.DbSize-2<<20 {
		t.Errorf("database size %d before, %d after defragmentation: want at least 2 MB less", before.DbSize, after.DbSize)
	}

	// The next delta snapshot would start before the compacted revision.
	cli(1, "create", "snapshot", "--name", "delta-compacted", "--etcd", "main", "--type", "delta")
	refused("delta-compacted", opstask.TaskStateFailed, codeCompacted, "required revision has been compacted")
	if got := keys(t, backups, "main/Delta-"); len(got) != 1 {
		t.Errorf("delta snapshots in MinIO after a failed one: %v, want the first only", got)
	}

	// Snapshot compaction: the full snapshot and the delta, restored into a
	// temporary etcd, make a new full snapshot (compaction_test.go proves
	// its content); the snapshots it read stay.
	cli(0, "create", "snapshot-compaction", "--name", "snapshot-compaction", "--etcd", "main")
	succeeded("snapshot-compaction", "compacted "+strings.TrimPrefix(fulls[0], "main/")+" and 1 delta snapshots")
	if got := keys(t, backups, "main/Full-"); len(got) != 2 || got[0] != fulls[0] {
		t.Errorf("full snapshots after the compaction: %v; want %s and a new one", got, fulls[0])
	}
	if got := keys(t, backups, "main/Delta-"); len(got) != 1 {
		t.Errorf("delta snapshots after the compaction: %v; want the one it read", got)
	}

	// Copy the backups from MinIO to the GCS emulator.
	source := contents(t, backups, "main/")
	cli(0, "create", "copy-backups", "--name", "copy", "--source", "S3:"+s3.Bucket+"/main/", "--source-secret", "minio", "--target", "GCS:"+gcs.Bucket+"/copied/")
	succeeded("copy", "copied 3 objects")
	if got := contents(t, backups, "main/"); !equalContents(got, source) {
		t.Errorf("source objects changed by the copy: %v → %v", names(source), names(got))
	}
	copied := contents(t, gcs.Open(t), "copied/")
	delete(copied, "copied/.copy-manifest.json")
	for key, data := range source {
		if got, ok := copied["copied/"+strings.TrimPrefix(key, "main/")]; !ok || !bytes.Equal(got, data) {
			t.Errorf("%s not copied intact to GCS (target has %v)", key, names(copied))
		}
	}
	if len(copied) != len(source) {
		t.Errorf("target has %v, want a copy of %v", names(copied), names(source))
	}

	if out := cli(0, "tasks", "-o", "wide"); !regexp.MustCompile(`(?m)^<none> +- +copy +copyBackups +Succeeded .*copied 3 objects`).MatchString(out) {
		t.Errorf("tasks does not show the copy task:\n%s", out)
	}

	// The CRD refuses what opstask could only reject later.
	finalDelta := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{api.TargetField: "main",
		"config": map[string]any{"onDemandSnapshot": map[string]any{"type": "delta", "isFinal": true}}}}}
	finalDelta.SetGroupVersionKind(api.GroupVersion.WithKind("EtcdOpsTask"))
	finalDelta.SetName("final-delta")
	if _, err := dyn.Resource(api.Resource).Namespace(ns).Create(ctx, finalDelta, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "isFinal may be true only for a full snapshot") {
		t.Errorf("create a final delta snapshot: %v, want Invalid: isFinal may be true only for a full snapshot", err)
	}
	twoKinds := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{api.TargetField: "main",
		"config": map[string]any{"onDemandSnapshot": map[string]any{"type": "full"}, "snapshotCompaction": map[string]any{}}}}}
	twoKinds.SetGroupVersionKind(api.GroupVersion.WithKind("EtcdOpsTask"))
	twoKinds.SetName("two-kinds")
	if _, err := dyn.Resource(api.Resource).Namespace(ns).Create(ctx, twoKinds, metav1.CreateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "exactly one of onDemandSnapshot") {
		t.Errorf("create a task of two kinds: %v, want Invalid: exactly one of onDemandSnapshot, ... must be set", err)
	}

	// Preconditions: no quorum, no such etcd, a single member.
	out = cli(1, "create", "snapshot", "--name", "down", "--etcd", "down", "--type", "full")
	refused("down", opstask.TaskStateRejected, codeNoQuorum, "etcd down has no quorum: 0 of 1 members answer")
	if !strings.Contains(out, "Rejected") || !strings.Contains(out, "error NoQuorum") {
		t.Errorf("CLI output lacks the rejection:\n%s", out)
	}
	cli(1, "create", "snapshot", "--name", "unknown", "--etcd", "nope", "--type", "full")
	refused("unknown", opstask.TaskStateRejected, codeNoEtcd, `spec.etcdName "nope"`)
	cli(1, "create", "recover-quorum", "--name", "recover", "--etcd", "main")
	refused("recover", opstask.TaskStateRejected, codeSingleMember, "single member")

	// DEP-05's metrics, by type, state and etcd.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		fmt.Sprintf(`etcdopstask_operator_tasks_total{etcd="main",etcd_namespace=%q,state="Succeeded",type="onDemandSnapshot"} 2`, ns),
		fmt.Sprintf(`etcdopstask_operator_tasks_total{etcd="down",etcd_namespace=%q,state="Rejected",type="onDemandSnapshot"} 1`, ns),
		fmt.Sprintf(`etcdopstask_operator_task_duration_seconds_count{etcd="main",etcd_namespace=%q,state="Succeeded",type="onDemandMaintenance"} 1`, ns),
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// A stream of full snapshots for three etcds, in two waves, each task
	// executed once: one Execution run, one snapshot in its bucket. Replica
	// b stops before the second wave is created (stopped while it executes
	// a task, it would leave that task a second run); a runs it.
	for wave := 1; wave <= 2; wave++ {
		if wave == 2 {
			stopB()
		}
		var names []string
		for _, s := range streamEtcds {
			name := fmt.Sprintf("%s-%d", s, wave)
			cli(0, "create", "snapshot", "--name", name, "--etcd", s, "--type", "full", "--wait=false")
			names = append(names, name)
		}
		for _, name := range names {
			if st := executions.finalState(t, name); st != opstask.TaskStateSucceeded {
				t.Errorf("%s: %s, want Succeeded", name, st)
			}
		}
	}
	for _, s := range streamEtcds {
		for wave := 1; wave <= 2; wave++ {
			name := fmt.Sprintf("%s-%d", s, wave)
			if runs := executions.runs(name); len(runs) != 1 {
				t.Errorf("%s: execution runs %v, want exactly one", name, runs)
			}
		}
		if got := keys(t, backups, s+"/Full-"); len(got) != 2 {
			t.Errorf("full snapshots of %s: %v, want one per task, two", s, got)
		}
	}
	t.Logf("run IDs by task: %v", executions.all())

	// Every task is deleted after its TTL; the backups stay.
	deadline := time.Now().Add(45 * time.Second)
	for {
		l, err := dyn.Resource(api.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks left %s after their TTL of %ss", len(l.Items), 45*time.Second, ttl)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got := contents(t, backups, "main/"); !equalContents(got, source) {
		t.Errorf("backups changed by the tasks' cleanup: %v → %v", names(source), names(got))
	}
	for name, runs := range executions.all() {
		if len(runs) > 1 {
			t.Errorf("%s: execution runs %v, want at most one (no replica stopped mid-execution)", name, runs)
		}
	}

	// deploy/rbac.yaml grants the controller's Role exactly what the two
	// replicas asked for, from their start to their stop (but for the get
	// that only a cache lagging behind needs), and the CLI's
	// ClusterRole exactly what the CLI asked for, but for approve's grants.
	stopA()
	rules := rbactest.Rules(t, "deploy/rbac.yaml", map[string]string{"etcd-opstask": ns})
	rbactest.Check(t, roleRules(t, rules, "Role etcd-opstask/etcd-opstask"), controllerRequests.Requests(), map[string]string{
		"get etcdopstasks." + api.Group: "crt's task store reads a task from the API server only when the manager's cache lags behind the version it holds or " +
			"confirms a hold that is already so, a race that a run may not meet",
	})
	rbactest.Check(t, roleRules(t, rules, "ClusterRole etcd-opstask-user"), cliRequests.Requests(), map[string]string{
		"get etcdopstasks." + api.Group:   "approve, which this test does not run: opsctl's TestRecoverQuorumApproval checks it",
		"patch etcdopstasks." + api.Group: "approve, which this test does not run: opsctl's TestRecoverQuorumApproval checks it",
	})
}

// streamEtcds are the etcd names of the stream of tasks.
var streamEtcds = []string{"s1", "s2", "s3"}

// startReplica runs the command with args, as replica name, until the
// returned function stops it (once; later calls do nothing).
func startReplica(t *testing.T, name string, args []string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args) }()
	return sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("replica %s: %v", name, err)
			}
		case <-time.After(2 * time.Minute):
			t.Errorf("replica %s did not stop within 2 minutes", name)
		}
	})
}

// executionLog is what watchExecutions saw.
type executionLog struct {
	mu     sync.Mutex
	byTask map[string][]string // task → run IDs of its Execution operations, in order
	states map[string]opstask.TaskState
}

// finalState waits up to a minute for task to finish and returns its state.
func (l *executionLog) finalState(t *testing.T, task string) opstask.TaskState {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		l.mu.Lock()
		st := l.states[task]
		l.mu.Unlock()
		if st.Finished() {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not finished after a minute: %q", task, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (l *executionLog) runs(task string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.byTask[task]...)
}

func (l *executionLog) all() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]string{}
	for k, v := range l.byTask {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// watchExecutions records, until the test ends, the state of the
// namespace's tasks and the run ID of every Execution operation: a task executed twice
// would show two, as a replica must write a run ID of its own before it
// executes. The watch must last the whole test.
func watchExecutions(t *testing.T, dyn dynamic.Interface, ns string) *executionLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := dyn.Resource(api.Resource).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := &executionLog{byTask: map[string][]string{}, states: map[string]opstask.TaskState{}}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			state, _, _ := unstructured.NestedString(u.Object, "status", "state")
			typ, _, _ := unstructured.NestedString(u.Object, "status", "lastOperation", "type")
			id, _, _ := unstructured.NestedString(u.Object, "status", "lastOperation", "runID")
			l.mu.Lock()
			l.states[u.GetName()] = opstask.TaskState(state)
			if r := l.byTask[u.GetName()]; typ == string(opstask.LastOperationTypeExecution) && (len(r) == 0 || r[len(r)-1] != id) {
				l.byTask[u.GetName()] = append(r, id)
			}
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		select {
		case <-closed:
			t.Error("the watch of executions ended before the test: executions may be missing")
		default:
		}
		cancel()
		w.Stop()
	})
	return l
}

// roleRules returns the rules of one Role or ClusterRole, named as
// rbactest.Rule.Role names it after the file ("Role namespace/name"), so
// that each client is held to its own role, not to the other's grants.
func roleRules(t *testing.T, rules []rbactest.Rule, role string) []rbactest.Rule {
	t.Helper()
	var out []rbactest.Rule
	for _, r := range rules {
		if strings.HasSuffix(r.Role, ": "+role) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		t.Fatalf("deploy/rbac.yaml has no %s", role)
	}
	return out
}

func sha256Of(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// keys returns the keys under prefix in b, sorted.
func keys(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	return slices.Sorted(maps.Keys(contents(t, b, prefix)))
}

func contents(t *testing.T, b *blob.Bucket, prefix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[obj.Key] = read(t, b, obj.Key)
	}
}

func read(t *testing.T, b *blob.Bucket, key string) []byte {
	t.Helper()
	data, err := b.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func equalContents(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func names(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// taskCRD is deploy/crd.yaml, checked against api.EtcdOpsTask.
func taskCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile("deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := tasks.CRD(data, &api.EtcdOpsTask{}, scheme, &tasks.Options{TargetField: api.TargetField})
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// installCRD installs deploy/crd.yaml with tasks.InstallCRD (an upgrade in
// place when another test installed it) and returns a dynamic client for
// the test's own reads and writes.
func installCRD(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := tasks.InstallCRD(t.Context(), c, c, taskCRD(t)); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}
