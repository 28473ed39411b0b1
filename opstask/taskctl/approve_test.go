package taskctl_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
	"github.com/groundskeeper-io/groundskeeper/opstask/taskctl"
)

const plan = "restore Full-00000000-00000380 into member-0; revisions 381-390 are LOST"

// awaiting writes the status of a task waiting at its "approve" step with
// plan, as opstask's Run.Approval records it, and returns the token.
func awaiting(t *testing.T, c dynamic.ResourceInterface, name string) string {
	t.Helper()
	token := opstask.ApprovalToken("approve", plan)
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	desc := "awaiting approval: " + plan + "; approve with the token " + token + " (annotation " + opstask.ApprovalAnnotation + ")"
	setStatus(t, c, name, opstask.Status{State: opstask.TaskStateInProgress,
		Steps: []opstask.Step{
			{Name: "plan", State: opstask.StepStateCompleted, Description: plan, Result: "{}", Attempts: 1, LastUpdateTime: now},
		},
		Approvals: []opstask.Approval{
			{Step: "approve", State: opstask.ApprovalStateAwaiting, Description: desc, Token: token, LastUpdateTime: now},
		},
		LastOperation: &opstask.LastOperation{Type: opstask.LastOperationTypeExecution, State: opstask.LastOperationStateInProgress,
			Description: "step approve AwaitingApproval: " + desc, RunID: "r1", LastUpdateTime: now}})
	return token
}

func annotate(t *testing.T, c dynamic.ResourceInterface, name, value string) {
	t.Helper()
	patch := `{"metadata":{"annotations":{"` + opstask.ApprovalAnnotation + `":"` + value + `"}}}`
	if _, err := c.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func approvals(t *testing.T, c dynamic.ResourceInterface, name string) (string, string) {
	t.Helper()
	u, err := c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetAnnotations()[opstask.ApprovalAnnotation], u.GetResourceVersion()
}

// Approve shows the plan and adds the waiting step's token to the
// approvals a task has (an older plan's token stays); a dry run and a
// second approval write nothing; a task that awaits nothing, or none at
// all, is an error.
func TestApproveAddsTheTokenOfTheWaitingStep(t *testing.T) {
	tasks, c := setup(t)
	ctx := context.Background()
	create(t, c, "recover", "recover", "main")
	token := awaiting(t, c, "recover")
	annotate(t, c, "recover", "approve/0000000000") // an approval of an older plan

	var out bytes.Buffer
	_, rv := approvals(t, c, "recover")
	if err := tasks.Approve(ctx, "recover", &out, &taskctl.ApproveOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if got, rv2 := approvals(t, c, "recover"); got != "approve/0000000000" || rv2 != rv {
		t.Errorf("after a dry run: annotation %q, resourceVersion %s → %s; want unchanged", got, rv, rv2)
	}
	if s := out.String(); !strings.Contains(s, plan) || !strings.Contains(s, "dry run: step approve not approved ("+token+")") {
		t.Errorf("dry run printed:\n%s\nwant the plan and the token not approved", s)
	}

	out.Reset()
	if err := tasks.Approve(ctx, "recover", &out, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("approve printed:\n%s", out.String())
	got, rv := approvals(t, c, "recover")
	if got != "approve/0000000000,"+token {
		t.Errorf("annotation %q; want the older token and %s", got, token)
	}
	if s := out.String(); !strings.Contains(s, "testtask/recover: step approve: awaiting approval: "+plan) || !strings.Contains(s, "step approve approved") {
		t.Errorf("approve printed:\n%s\nwant the plan and the approval", s)
	}
	u, _ := c.Get(ctx, "recover", metav1.GetOptions{})
	if task, err := kubestore.Decode(u, opstasktest.TargetField); err != nil || len(task.Approvals) != 2 || task.Approvals[1] != token {
		t.Errorf("the store reads approvals %v, %v; want the older token and %s", task.Approvals, err, token)
	}

	out.Reset()
	if err := tasks.Approve(ctx, "recover", &out, nil); err != nil {
		t.Fatal(err)
	}
	if got2, rv2 := approvals(t, c, "recover"); got2 != got || rv2 != rv || !strings.Contains(out.String(), "approved already") {
		t.Errorf("second approval: annotation %q, resourceVersion %s → %s, printed %q; want nothing written, approved already", got2, rv, rv2, out.String())
	}

	create(t, c, "snap", "snapshot", "main")
	if err := tasks.Approve(ctx, "snap", &out, nil); !errors.Is(err, taskctl.ErrNothingToApprove) || !strings.Contains(err.Error(), "testtask/snap is Pending") {
		t.Errorf("approve a task that awaits nothing: %v; want ErrNothingToApprove", err)
	}
	if got, _ := approvals(t, c, "snap"); got != "" {
		t.Errorf("a task that awaits nothing got the annotation %q", got)
	}
	if err := tasks.Approve(ctx, "absent", &out, nil); !apierrors.IsNotFound(err) {
		t.Errorf("approve a missing task: %v; want NotFound", err)
	}
}

// changeAfterGet is the dynamic client with a fault: after each Get it
// changes the task on the API server, as another person approving at the
// same moment.
type changeAfterGet struct {
	dynamic.ResourceInterface
	change func()
}

func (c changeAfterGet) Get(ctx context.Context, name string, o metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	u, err := c.ResourceInterface.Get(ctx, name, o, sub...)
	c.change()
	return u, err
}

// A task changed between Approve's read and its write is not approved,
// and the other change is kept: the write carries the resourceVersion read.
func TestApproveRefusesATaskChangedMeanwhile(t *testing.T) {
	tasks, c := setup(t)
	create(t, c, "recover", "recover", "main")
	awaiting(t, c, "recover")
	tasks.Client = changeAfterGet{c, func() { annotate(t, c, "recover", "approve/1111111111") }}
	var out bytes.Buffer
	err := tasks.Approve(context.Background(), "recover", &out, nil)
	if !apierrors.IsConflict(err) {
		t.Fatalf("approve a task changed meanwhile: %v; want a Conflict", err)
	}
	t.Logf("conflict: %v", err)
	if got, _ := approvals(t, c, "recover"); got != "approve/1111111111" {
		t.Errorf("annotation %q; want the other change alone", got)
	}
	if strings.Contains(out.String(), "approved\n") {
		t.Errorf("printed an approval that failed:\n%s", out.String())
	}
}

// A task whose status alone changed between Approve's read and its write
// (its controller renewing its claim) is approved on a second read: the
// steps awaiting approval, their tokens and the approvals given are the
// same. (opsctl's TestRecoverQuorumApproval once failed on such a
// Conflict.)
func TestApproveOutlastsAStatusRenewal(t *testing.T) {
	tasks, c := setup(t)
	create(t, c, "recover", "recover", "main")
	token := awaiting(t, c, "recover")
	renewed := false
	tasks.Client = changeAfterGet{c, func() {
		if !renewed {
			renewed = true
			awaiting(t, c, "recover") // the same approval, a new lastUpdateTime and resourceVersion
			u, err := c.Get(context.Background(), "recover", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st, _, _ := unstructured.NestedMap(u.Object, "status")
			st["lastOperation"].(map[string]any)["description"] = "renewed"
			if err := unstructured.SetNestedMap(u.Object, st, "status"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}}
	_, before := approvals(t, c, "recover")
	var out bytes.Buffer
	if err := tasks.Approve(context.Background(), "recover", &out, nil); err != nil {
		t.Fatalf("approve a task whose status alone changed: %v\n%s", err, out.String())
	}
	got, after := approvals(t, c, "recover")
	if got != token || after == before {
		t.Errorf("annotation %q (resourceVersion %s, was %s); want %q written", got, after, before, token)
	}
	if !strings.Contains(out.String(), "step approve approved\n") {
		t.Errorf("output does not say the step was approved:\n%s", out.String())
	}
}
