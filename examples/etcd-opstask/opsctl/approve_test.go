package opsctl

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/rbactest"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// installCRD installs ../deploy/crd.yaml and returns the tasks' client.
func installCRD(t *testing.T, k *testenv.Kubernetes) dynamic.ResourceInterface {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := api.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd, err := tasks.CRD(data, &api.EtcdOpsTask{}, scheme, &tasks.Options{TargetField: api.TargetField})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := tasks.InstallCRD(t.Context(), c, c, crd); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(api.Resource).Namespace(k.Namespace)
}

// gatedRecovery stands in for the recovery's executor, to drive the CLI
// against opstask's real approval gate on a real API server: a plan step,
// the gate (unless skipApproval), and an irreversible step it counts.
type gatedRecovery struct{ acted atomic.Int32 }

const testPlan = "recover etcd main: restore Full-00000000-00000380 into member-0; revisions 381-390 are LOST"

func (g *gatedRecovery) Execute(ctx context.Context, run *opstask.Run) error {
	cfg, err := opstask.DecodeConfig[api.RecoverFromQuorumLossConfig](run.Task, "recoverFromQuorumLoss")
	if err != nil {
		return err
	}
	plan, err := run.Step(ctx, "plan", func(context.Context) (string, string, error) { return testPlan, testPlan, nil })
	if err != nil {
		return err
	}
	if !cfg.SkipApproval {
		if err := run.Approval(ctx, "approve", plan); err != nil {
			return err
		}
	}
	_, err = run.Step(ctx, "stop", func(context.Context) (string, string, error) {
		g.acted.Add(1)
		return "stopped 3 members", "", nil
	})
	return err
}

// create recover-quorum writes its flags into the task's config; a task
// waiting at its approval gate (opstask's Run.Approval under a real
// controller over kubestore) is shown and approved with approve, a dry
// run approving nothing (no --yes); the queue lists it; the controller takes the approval up and the
// task finishes; a task that awaits nothing cannot be approved.
// deploy/rbac.yaml's ClusterRole etcd-opstask-user grants exactly what
// these commands sent.
func TestRecoverQuorumApproval(t *testing.T) {
	k := testenv.StartKubernetes(t)
	tasks := installCRD(t, k)
	var requests rbactest.Recorder
	kubeconfig := requests.Kubeconfig(t, k.Config)
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		args = append(args, "--kubeconfig", kubeconfig, "--namespace", k.Namespace)
		var out, errOut bytes.Buffer
		code := Run(t.Context(), args, &out, &errOut)
		t.Logf("opstask %s → exit %d\n%s%s", strings.Join(args[:min(len(args), 3)], " "), code, out.String(), errOut.String())
		if code != wantCode {
			t.Fatalf("opstask %v: exit %d, want %d", args, code, wantCode)
		}
		return out.String() + errOut.String()
	}
	config := func(name string) map[string]any {
		t.Helper()
		u, err := tasks.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return u.Object["spec"].(map[string]any)["config"].(map[string]any)
	}

	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	store, err := kubestore.New(kubestore.Config{Client: dyn, Resource: api.Resource, Kind: "EtcdOpsTask", Namespace: k.Namespace, TargetField: api.TargetField})
	if err != nil {
		t.Fatal(err)
	}
	exec := &gatedRecovery{}
	c, err := opstask.New(opstask.Config{Store: store, LeaseDuration: 2 * time.Second, Settle: opstask.NoSettle,
		Handlers: []opstask.Handler{{Name: "recoverFromQuorumLoss", Executor: exec, Resumable: true}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stop := sync.OnceFunc(func() { cancel(); <-done })
	defer stop()

	out := cli(ExitSucceeded, "create", "recover-quorum", "--name", "recover", "--etcd", "main", "--allow-data-loss", "--wait=false")
	if !strings.Contains(out, "review it with `opstask tasks approve recover`") {
		t.Errorf("create printed %q; want the hint to approve", out)
	}
	if got := config("recover"); !reflect.DeepEqual(got, map[string]any{"recoverFromQuorumLoss": map[string]any{"allowDataLoss": true}}) {
		t.Errorf("config of --allow-data-loss: %v", got)
	}
	waitApproval(t, tasks, "recover", "approve", opstask.ApprovalStateAwaiting)
	// The queue, by the plugin's tasks command set to EtcdOpsTasks.
	out = cli(ExitSucceeded, "tasks")
	if !regexp.MustCompile(`(?m)^main\s+1\s+recover\s+recoverFromQuorumLoss\s+InProgress\s.*approve`).MatchString(out) {
		t.Errorf("tasks printed %q; want recover first in main's queue, awaiting its approval", out)
	}
	token := opstask.ApprovalToken("approve", testPlan)

	out = cli(ExitSucceeded, "tasks", "approve", "recover") // a dry run without --yes
	if !strings.Contains(out, testPlan) || !strings.Contains(out, "dry run: step approve not approved ("+token+")") {
		t.Errorf("approve without --yes printed %q; want the plan and its token, not approved", out)
	}
	if got := annotation(t, tasks, "recover"); got != "" || exec.acted.Load() != 0 {
		t.Fatalf("after a dry run: annotation %q, acted %d times; want neither", got, exec.acted.Load())
	}
	out = cli(ExitSucceeded, "tasks", "approve", "recover", "--yes")
	if !strings.Contains(out, testPlan) || !strings.Contains(out, "step approve approved") {
		t.Errorf("approve printed %q; want the plan and the approval", out)
	}
	if got := annotation(t, tasks, "recover"); got != token {
		t.Errorf("annotation %s = %q, want %s", opstask.ApprovalAnnotation, got, token)
	}
	cli(ExitSucceeded, "tasks", "wait", "recover", "--timeout", "60s")
	if n := exec.acted.Load(); n != 1 {
		t.Errorf("the approved step ran %d times, want once", n)
	}
	out = cli(ExitFailed, "tasks", "approve", "recover", "--yes")
	if !strings.Contains(out, "no step awaits approval") || !strings.Contains(out, "is Succeeded") {
		t.Errorf("approve of a finished task printed %q; want no step awaits approval", out)
	}

	cli(ExitSucceeded, "create", "recover-quorum", "--name", "unattended", "--etcd", "main", "--skip-approval", "--timeout", "60s")
	if got := config("unattended"); !reflect.DeepEqual(got, map[string]any{"recoverFromQuorumLoss": map[string]any{"skipApproval": true}}) {
		t.Errorf("config of --skip-approval: %v", got)
	}
	if n := exec.acted.Load(); n != 2 {
		t.Errorf("the irreversible step ran %d times in all, want twice (once unattended)", n)
	}

	stop()
	rules := rbactest.Rules(t, "../deploy/rbac.yaml", map[string]string{"etcd-opstask": k.Namespace})
	var user []rbactest.Rule
	for _, r := range rules {
		if strings.HasSuffix(r.Role, ": ClusterRole etcd-opstask-user") {
			user = append(user, r)
		}
	}
	if len(user) == 0 {
		t.Fatal("deploy/rbac.yaml has no ClusterRole etcd-opstask-user")
	}
	rbactest.Check(t, user, requests.Requests(), nil)
}

func waitApproval(t *testing.T, tasks dynamic.ResourceInterface, name, step string, state opstask.ApprovalState) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		u, err := tasks.Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		task, err := kubestore.Decode(u, api.TargetField)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range task.Status.Approvals {
			if a.Step == step && a.State == state {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: approval of step %s not %s within a minute: %+v", name, step, state, task.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func annotation(t *testing.T, tasks dynamic.ResourceInterface, name string) string {
	t.Helper()
	u, err := tasks.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetAnnotations()[opstask.ApprovalAnnotation]
}
