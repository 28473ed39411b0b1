// Package taskctl is what a command-line client does with an operator's
// task resources of any kind, over client-go's dynamic client: list them,
// wait for one to finish while printing each change of its state, its
// last operation and its errors (DEP-05's "CLI capabilities to
// operators"), and approve the step a task waits at (opstask.Run.Approval).
// Creating a task stays the operator's own: its flags are its task kinds'
// configs.
//
//	tasks := taskctl.Tasks{Client: dyn.Resource(gvr).Namespace(ns), Resource: "etcdopstask", TargetField: "etcdName"}
//	state, err := tasks.Wait(ctx, name, os.Stdout)
//	os.Exit(taskctl.ExitCode(state, err))
package taskctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
)

// Exit codes of a command that waited for a task.
const (
	ExitSucceeded = 0 // the task Succeeded
	ExitFailed    = 1 // it Failed or was Rejected, was deleted, or the command failed
	ExitUsage     = 2 // bad usage (the command's own)
)

// ErrNotFinished is returned by Wait when the context ended before the
// task finished.
var ErrNotFinished = errclass.Retryable("taskctl: task did not finish")

// ErrNothingToApprove is returned by Approve when no step of the task
// awaits approval.
var ErrNothingToApprove = errclass.Terminal("taskctl: no step awaits approval")

// Tasks are the task resources of one kind in one namespace.
type Tasks struct {
	// Client reads and watches them: dyn.Resource(gvr).Namespace(ns).
	Client dynamic.ResourceInterface
	// Resource names them in messages, e.g. "etcdopstask".
	Resource string
	// TargetField is the spec field that names a task's target, as
	// kubestore.Config.TargetField.
	TargetField string
	// Clock times the printed lines (ages); nil means clock.RealClock.
	Clock clock.PassiveClock
}

func (t Tasks) now() time.Time {
	if t.Clock != nil {
		return t.Clock.Now()
	}
	return time.Now()
}

// ApproveOptions adjust Approve; nil means the defaults.
type ApproveOptions struct {
	// DryRun prints what Approve would approve and writes nothing.
	DryRun bool
}

// List prints a table of the tasks: name, target, kind, state, age and last
// operation.
func (t Tasks) List(ctx context.Context, out io.Writer) error {
	l, err := t.Client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list %ss: %w", t.Resource, err)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tTARGET\tKIND\tSTATE\tAGE\tLAST OPERATION")
	for i := range l.Items {
		task, err := kubestore.Decode(&l.Items[i], t.TargetField)
		if err != nil {
			return err
		}
		target := task.Spec.Target
		if target == "" {
			target = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", task.Name, target, kindOf(task), stateOf(task),
			t.now().Sub(task.CreationTimestamp).Round(time.Second), operation(task, ": "))
	}
	return w.Flush()
}

// Wait watches the task name until it finishes, is deleted or ctx ends,
// printing a line for each change of its state and last operation and for
// each new error, and returns its last state. It returns an error if the
// task does not exist, was deleted before it finished (with its last
// state), or did not finish before ctx ended (ErrNotFinished).
func (t Tasks) Wait(ctx context.Context, name string, out io.Writer) (opstask.TaskState, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return t.Client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return t.Client.Watch(ctx, o)
		},
	}
	var (
		last    string
		errs    int
		state   opstask.TaskState
		deleted bool
	)
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, func(store cache.Store) (bool, error) {
		if len(store.List()) == 0 {
			return false, fmt.Errorf("%s/%s not found", t.Resource, name)
		}
		return false, nil
	}, func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			fmt.Fprintf(out, "%s  %s/%s deleted\n", t.now().Format(time.TimeOnly), t.Resource, name)
			deleted = true
			return true, nil
		}
		task, err := kubestore.Decode(u, t.TargetField)
		if err != nil {
			return false, err
		}
		state = stateOf(task)
		line := string(state)
		if op := operation(task, "  "); op != "" {
			line += "  " + op
		}
		if line != last {
			fmt.Fprintf(out, "%s  %s\n", t.now().Format(time.TimeOnly), line)
			last = line
		}
		st := task.Status
		for _, e := range st.LastErrors[min(errs, len(st.LastErrors)):] {
			if lo := st.LastOperation; lo != nil && lo.Description == e.Description {
				fmt.Fprintf(out, "%s    error %s (above)\n", e.ObservedAt.Format(time.TimeOnly), e.Code)
				continue
			}
			fmt.Fprintf(out, "%s    error %s: %s\n", e.ObservedAt.Format(time.TimeOnly), e.Code, e.Description)
		}
		errs = len(st.LastErrors)
		return state.Finished(), nil
	})
	switch {
	case err != nil && (wait.Interrupted(err) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, watchtools.ErrWatchClosed)):
		return state, fmt.Errorf("%w: %s/%s (last: %s)", ErrNotFinished, t.Resource, name, last)
	case err != nil:
		return state, err
	case deleted && !state.Finished():
		return state, fmt.Errorf("%s/%s was deleted while %s", t.Resource, name, stateOrPending(state))
	}
	return state, nil
}

// Approve approves the steps of the task name that await approval
// (opstask.Run.Approval, recorded in status.approvals): it prints each
// one's description, which says the plan the step carries out and its
// token, and adds the token to the task's opstask.ApprovalAnnotation,
// unless the annotation holds it already. The annotation is written with a
// merge patch that carries the resourceVersion read. If the task changed
// in between only where approval does not look (its controller renewing
// its claim writes the status every few seconds), Approve reads it again
// and writes on that read, a few times at most; if the steps awaiting
// approval, their descriptions or tokens, the annotation or the task's
// UID changed, the Conflict is returned and nothing is approved: run it
// again to see the task as it is. With opts.DryRun, Approve prints and
// writes nothing. It returns ErrNothingToApprove when no step awaits
// approval.
func (t Tasks) Approve(ctx context.Context, name string, out io.Writer, opts *ApproveOptions) error {
	dryRun := opts != nil && opts.DryRun
	task, err := t.get(ctx, name)
	if err != nil {
		return err
	}
	approvals := task.Approvals
	var found bool
	var approve []string // the steps this call approves
	for _, a := range task.Status.Approvals {
		if a.State != opstask.ApprovalStateAwaiting {
			continue
		}
		found = true
		if a.Token == "" {
			return fmt.Errorf("%s/%s: step %s awaits approval but its approval records no token; its description: %s", t.Resource, name, a.Step, a.Description)
		}
		fmt.Fprintf(out, "%s/%s: step %s: %s\n", t.Resource, name, a.Step, a.Description)
		switch {
		case slices.Contains(approvals, a.Token):
			fmt.Fprintf(out, "%s/%s: step %s is approved already (%s); the controller goes on when it next takes the task\n", t.Resource, name, a.Step, a.Token)
		case dryRun:
			fmt.Fprintf(out, "%s/%s: dry run: step %s not approved (%s)\n", t.Resource, name, a.Step, a.Token)
		default:
			approvals = append(approvals, a.Token)
			approve = append(approve, a.Step)
		}
	}
	if !found {
		state := string(stateOf(task))
		if op := operation(task, ": "); op != "" {
			state += ", " + op
		}
		return fmt.Errorf("%w: %s/%s is %s", ErrNothingToApprove, t.Resource, name, state)
	}
	if len(approve) == 0 {
		return nil
	}
	value := strings.Join(approvals, ",")
	for attempt, rv := 1, task.ResourceVersion; ; attempt++ {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": rv,
			"annotations":     map[string]string{opstask.ApprovalAnnotation: value},
		}})
		if err != nil {
			return err
		}
		_, err = t.Client.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt == approveAttempts {
			return fmt.Errorf("approve %s/%s: %w", t.Resource, name, err)
		}
		again, gerr := t.get(ctx, name)
		if gerr != nil || !sameApproval(task, again) {
			return fmt.Errorf("approve %s/%s: %w", t.Resource, name, err)
		}
		rv = again.ResourceVersion
	}
	for _, s := range approve {
		fmt.Fprintf(out, "%s/%s: step %s approved\n", t.Resource, name, s)
	}
	return nil
}

// approveAttempts bounds Approve's writes: a controller renews its claim
// every few seconds, so a second read is almost always enough.
const approveAttempts = 5

// get reads and decodes the task name.
func (t Tasks) get(ctx context.Context, name string) (*opstask.Task, error) {
	u, err := t.Client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", t.Resource, name, err)
	}
	return kubestore.Decode(u, t.TargetField)
}

// sameApproval reports whether b asks for the approvals a asked for: the
// same task (UID), the same approvals given (the annotation) and the same
// steps awaiting approval, with the same descriptions and tokens.
func sameApproval(a, b *opstask.Task) bool {
	awaiting := func(t *opstask.Task) []opstask.Approval {
		var out []opstask.Approval
		for _, x := range t.Status.Approvals {
			if x.State == opstask.ApprovalStateAwaiting {
				out = append(out, opstask.Approval{Step: x.Step, Description: x.Description, Token: x.Token})
			}
		}
		return out
	}
	return a.UID == b.UID && slices.Equal(a.Approvals, b.Approvals) && slices.Equal(awaiting(a), awaiting(b))
}

// ExitCode is the exit code of a command that waited for a task with Wait.
func ExitCode(state opstask.TaskState, err error) int {
	if err == nil && state == opstask.TaskStateSucceeded {
		return ExitSucceeded
	}
	return ExitFailed
}

func stateOf(t *opstask.Task) opstask.TaskState {
	return stateOrPending(t.Status.State)
}

func stateOrPending(s opstask.TaskState) opstask.TaskState {
	if s == "" {
		return opstask.TaskStatePending
	}
	return s
}

func kindOf(t *opstask.Task) string {
	if k := t.Kind(); k != "" {
		return k
	}
	return "?"
}

func operation(t *opstask.Task, sep string) string {
	lo := t.Status.LastOperation
	if lo == nil {
		return ""
	}
	return fmt.Sprintf("%s/%s%s%s", lo.Type, lo.State, sep, lo.Description)
}
