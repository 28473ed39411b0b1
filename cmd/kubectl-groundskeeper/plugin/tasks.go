package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
	"github.com/groundskeeper-io/groundskeeper/opstask/taskctl"
)

// TaskView is one task as tasks prints it with -o json or yaml.
type TaskView struct {
	Name   string            `json:"name"`
	Target string            `json:"target,omitempty"`
	Kind   string            `json:"kind"`
	State  opstask.TaskState `json:"state"`
	// Position is the task's place in its target's queue, 1 for the head;
	// 0 for a finished task, which is in no queue.
	Position int       `json:"position,omitempty"`
	Created  time.Time `json:"created"`
	// Deleting reports that its deletion was requested.
	Deleting bool `json:"deleting,omitempty"`
	// LastOperation is "type/state: description".
	LastOperation string         `json:"lastOperation,omitempty"`
	Steps         []opstask.Step `json:"steps,omitempty"`
	// Awaiting are the approvals that wait for a person, each with its
	// plan (description) and token.
	Awaiting []opstask.Approval `json:"awaitingApproval,omitempty"`
	// DeletedAt is when the TTL cleanup deletes the finished task (its
	// last transition plus spec.ttlSecondsAfterFinished); zero when it has
	// no TTL of its own (the controller's default applies) or is not
	// finished.
	DeletedAt time.Time `json:"deletedAt,omitzero"`
}

// TasksView is what tasks prints with -o json or yaml.
type TasksView struct {
	Resource  string     `json:"resource"`
	Namespace string     `json:"-"`
	Tasks     []TaskView `json:"tasks"`
}

type taskFlags struct {
	resource, targetField string
}

func (f *taskFlags) add(cmd *cobra.Command, e *env) {
	cmd.Flags().StringVar(&f.resource, "resource", e.opts.Tasks, "the task resource, as kubectl names one (etcdopstasks.ops.example.com)")
	cmd.Flags().StringVar(&f.targetField, "target-field", e.opts.TaskTargetField, "the spec field that names a task's target (etcdName)")
}

// tasks returns taskctl's handle on the task resources of the namespace.
func (f *taskFlags) tasks(e *env) (taskctl.Tasks, error) {
	rc, gvr, err := f.client(e)
	if err != nil {
		return taskctl.Tasks{}, err
	}
	ns, err := e.namespace()
	if err != nil {
		return taskctl.Tasks{}, err
	}
	return taskctl.Tasks{Client: rc.Namespace(ns), Resource: gvr.Resource, TargetField: f.targetField, Clock: e.clock}, nil
}

// client returns the client of the task resource, in every namespace.
func (f *taskFlags) client(e *env) (dynamic.NamespaceableResourceInterface, schema.GroupVersionResource, error) {
	if f.resource == "" {
		return nil, schema.GroupVersionResource{}, usageError{errors.New("--resource: name the task resource (etcdopstasks.ops.example.com)")}
	}
	_, dc, err := e.clients()
	if err != nil {
		return nil, schema.GroupVersionResource{}, err
	}
	gvr, err := e.resolve(f.resource)
	if err != nil {
		return nil, schema.GroupVersionResource{}, err
	}
	return dc.Resource(gvr), gvr, nil
}

// resolve finds the resource named as kubectl names one (plural, singular
// or short name, with or without its group) in the server's discovery.
func (e *env) resolve(arg string) (schema.GroupVersionResource, error) {
	m, err := e.flags.ToRESTMapper()
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("kubeconfig: %w", err)
	}
	fq, gr := schema.ParseResourceArg(arg)
	if fq != nil {
		if gvr, err := m.ResourceFor(*fq); err == nil {
			return gvr, nil
		}
	}
	gvr, err := m.ResourceFor(gr.WithVersion(""))
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("resource %q: %w", arg, err)
	}
	return gvr, nil
}

func listTasks(ctx context.Context, c dynamic.ResourceInterface, targetField string) ([]*opstask.Task, error) {
	l, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	tasks := make([]*opstask.Task, 0, len(l.Items))
	for i := range l.Items {
		t, err := kubestore.Decode(&l.Items[i], targetField)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	opstask.SortTasks(tasks)
	return tasks, nil
}

// taskViews orders the tasks by target, then queue order, and numbers
// each target's unfinished tasks from its head.
func taskViews(tasks []*opstask.Task) []TaskView {
	pos := map[string]int{}
	var targets []string
	byTarget := map[string][]TaskView{}
	for _, t := range tasks {
		v := TaskView{Name: t.Name, Target: t.Spec.Target, Kind: t.Kind(), State: t.State(),
			Created: t.CreationTimestamp.UTC(), Deleting: t.Deleting, Steps: t.Status.Steps}
		if !v.State.Finished() {
			pos[t.Spec.Target]++
			v.Position = pos[t.Spec.Target]
		} else if ttl := t.Spec.TTLSecondsAfterFinished; ttl != nil && t.Status.LastTransitionTime != nil {
			v.DeletedAt = t.Status.LastTransitionTime.Add(time.Duration(*ttl) * time.Second).UTC()
		}
		if lo := t.Status.LastOperation; lo != nil {
			v.LastOperation = fmt.Sprintf("%s/%s: %s", lo.Type, lo.State, lo.Description)
		}
		for _, a := range t.Status.Approvals {
			if a.State == opstask.ApprovalStateAwaiting {
				v.Awaiting = append(v.Awaiting, a)
			}
		}
		if _, ok := byTarget[t.Spec.Target]; !ok {
			targets = append(targets, t.Spec.Target)
		}
		byTarget[t.Spec.Target] = append(byTarget[t.Spec.Target], v)
	}
	var out []TaskView
	for _, tg := range targets {
		out = append(out, byTarget[tg]...)
	}
	return out
}

func newTasks(e *env) *cobra.Command {
	var f taskFlags
	var out *output
	var all, watching bool
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Show the task queues: per target, state, age, position, steps and the step awaiting approval",
		Long: `Show the out-of-band tasks (package opstask, DEP-05) of a task resource of any kind:
for each target its queue in order (the head runs first), each task's state,
age, position, current step and the step that awaits a person's approval,
with the plan it will carry out; and when the TTL cleanup deletes a
finished task. With -A, each namespace's queues are listed apart. With
--watch, the queues are printed again after each change of a task (a watch
of the task resource), until interrupted.`,
		Example: fmt.Sprintf(`  %[1]s tasks --resource etcdopstasks.ops.example.com --target-field etcdName -n prod
  %[1]s tasks --resource etcdopstasks.ops.example.com --target-field etcdName -n prod -o wide
  %[1]s tasks --resource etcdopstasks.ops.example.com --target-field etcdName -A
  %[1]s tasks --resource etcdopstasks.ops.example.com --target-field etcdName -n prod --watch
  %[1]s tasks approve compact-42 --resource etcdopstasks.ops.example.com -n prod --yes
  %[1]s tasks wait compact-42 --resource etcdopstasks.ops.example.com -n prod`, e.name),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			load, rc, err := taskLoader(e, &f, all)
			if err != nil {
				return err
			}
			if !watching {
				views, err := load(cmd.Context())
				if err != nil {
					return err
				}
				return printTasks(e, out, views, all)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return watchTasks(ctx, e, out, rc, load, all)
		},
	}
	f.add(cmd, e)
	out = addOutput(cmd)
	addAllNamespaces(cmd, &all)
	cmd.Flags().BoolVarP(&watching, "watch", "w", false, "after printing the queues, watch the task resource and print them again after each change of a task, until interrupted")
	cmd.AddCommand(newApprove(e), newWait(e))
	return cmd
}

// taskLoader returns what reads the queues (of the namespace, or with all
// of every namespace, each apart) and the client of the tasks it reads.
func taskLoader(e *env, f *taskFlags, all bool) (func(context.Context) ([]TasksView, error), dynamic.ResourceInterface, error) {
	if !all {
		tc, err := f.tasks(e)
		if err != nil {
			return nil, nil, err
		}
		ns, err := e.namespace()
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context) ([]TasksView, error) {
			tasks, err := listTasks(ctx, tc.Client, tc.TargetField)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", tc.Resource, err)
			}
			v := TasksView{Resource: tc.Resource, Namespace: ns, Tasks: taskViews(tasks)}
			if v.Tasks == nil {
				v.Tasks = []TaskView{}
			}
			return []TasksView{v}, nil
		}, tc.Client, nil
	}
	rc, gvr, err := f.client(e)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context) ([]TasksView, error) {
		tasks, err := listTasks(ctx, rc, f.targetField)
		if err != nil {
			return nil, fmt.Errorf("list %s in all namespaces: %w", gvr.Resource, err)
		}
		// Targets are named in a namespace: each namespace has its own
		// queues, as each namespace's controller sees them.
		byNS := map[string][]*opstask.Task{}
		for _, t := range tasks {
			byNS[t.Namespace] = append(byNS[t.Namespace], t)
		}
		var views []TasksView
		for _, ns := range slices.Sorted(maps.Keys(byNS)) {
			views = append(views, TasksView{Resource: gvr.Resource, Namespace: ns, Tasks: taskViews(byNS[ns])})
		}
		return views, nil
	}, rc, nil
}

// watchTasks prints the queues, then again after each change of a task
// that changes them, until ctx ends (Ctrl-C) or the watch fails. It reads
// them again after each change the watch of rc reports (made after the
// watch began, never on a timer), and prints only what differs from what
// it printed last.
func watchTasks(ctx context.Context, e *env, out *output, rc dynamic.ResourceInterface, load func(context.Context) ([]TasksView, error), all bool) error {
	l, err := rc.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return fmt.Errorf("tasks: watch: %w", err)
	}
	changes, err := notifyChanges(ctx, l.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return rc.Watch(ctx, o) },
	})
	if err != nil {
		return fmt.Errorf("tasks: watch: %w", err)
	}
	return watchPrint(ctx, e, out, "tasks", changes, load,
		func(a, b []TasksView) bool { return reflect.DeepEqual(a, b) },
		func(views []TasksView) error { return printTasks(e, out, views, all) })
}

// printTasks prints the queues of one namespace, or with all of every
// namespace that has tasks.
func printTasks(e *env, out *output, views []TasksView, all bool) error {
	w := e.streams.Out
	if out.structured() {
		return printViews(out, w, "TaskQueues", views, all, func(v TasksView) (string, string) { return v.Namespace, v.Resource })
	}
	now := e.clock.Now()
	t := &metav1.Table{ColumnDefinitions: columnsIn(all, "TARGET", "POS", "NAME", "KIND", "STATE", "AGE", "STEP", "AWAITING APPROVAL", "DELETED IN+", "LAST OPERATION+")}
	for _, v := range views {
		for _, tv := range v.Tasks {
			t.Rows = append(t.Rows, rowIn(all, v.Namespace, taskCells(tv, now)...))
		}
	}
	if all && len(t.Rows) == 0 {
		_, err := fmt.Fprintln(w, "No tasks found in any namespace.")
		return err
	}
	return out.print(w, "", "", "", nil, t)
}

// taskCells are the cells of a task's row.
func taskCells(tv TaskView, now time.Time) []any {
	target, pos := tv.Target, "-"
	if target == "" {
		target = "<none>"
	}
	if tv.Position > 0 {
		pos = fmt.Sprint(tv.Position)
	}
	step := "-"
	if n := len(tv.Steps); n > 0 {
		step = fmt.Sprintf("%s (%s)", tv.Steps[n-1].Name, tv.Steps[n-1].State)
	}
	awaiting := "-"
	if len(tv.Awaiting) > 0 {
		awaiting = tv.Awaiting[0].Step + ": " + tv.Awaiting[0].Description
	}
	deleted := "-"
	if !tv.DeletedAt.IsZero() {
		deleted = human(tv.DeletedAt.Sub(now))
	}
	state := string(tv.State)
	if tv.Deleting {
		state += ",Deleting"
	}
	lastOp := tv.LastOperation
	if lastOp == "" {
		lastOp = "-"
	}
	return []any{target, pos, tv.Name, tv.Kind, state, human(now.Sub(tv.Created)), step, awaiting, deleted, lastOp}
}

func newApprove(e *env) *cobra.Command {
	var f taskFlags
	var yes bool
	cmd := &cobra.Command{
		Use:   "approve TASK",
		Short: "Approve the step a task awaits (dry run unless --yes or confirmed)",
		Long: `Print each step of the task that awaits approval, with the plan it will carry
out, and approve it (opstask/taskctl's Approve): the step's token is added
to the task's approval annotation, with the resourceVersion read as a
precondition, so that a task changed meanwhile is not approved.`,
		Example: fmt.Sprintf(`  %[1]s tasks approve compact-42 --resource etcdopstasks.ops.example.com -n prod
  %[1]s tasks approve compact-42 --resource etcdopstasks.ops.example.com -n prod --yes`, e.name),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := f.tasks(e)
			if err != nil {
				return err
			}
			ctx, w := cmd.Context(), e.streams.Out
			if !yes {
				if !isTerminal(e.streams.In) {
					if err := tc.Approve(ctx, args[0], w, &taskctl.ApproveOptions{DryRun: true}); err != nil {
						return err
					}
					fmt.Fprintf(w, "dry run: nothing approved (run with --yes to approve)\n")
					return nil
				}
				if err := tc.Approve(ctx, args[0], w, &taskctl.ApproveOptions{DryRun: true}); err != nil {
					return err
				}
				ok, err := e.confirm("approve?")
				if err != nil || !ok {
					fmt.Fprintf(w, "nothing approved\n")
					return err
				}
			}
			return tc.Approve(ctx, args[0], w, nil)
		},
	}
	f.add(cmd, e)
	cmd.Flags().BoolVar(&yes, "yes", false, "approve without asking (otherwise a dry run, or a question on a terminal)")
	return cmd
}

func newWait(e *env) *cobra.Command {
	var f taskFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait TASK",
		Short: "Wait for a task to finish, printing each change of its state",
		Long: `Watch the task until it finishes, printing a line for each change of its
state and last operation and each new error (opstask/taskctl's Wait). The
exit code is 0 when it Succeeded, 1 otherwise.`,
		Example: fmt.Sprintf(`  %[1]s tasks wait compact-42 --resource etcdopstasks.ops.example.com -n prod --timeout 10m`, e.name),
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tc, err := f.tasks(e)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			state, err := tc.Wait(ctx, args[0], e.streams.Out)
			if err != nil {
				return err
			}
			if taskctl.ExitCode(state, nil) != taskctl.ExitSucceeded {
				return fmt.Errorf("%s/%s %s", tc.Resource, args[0], state)
			}
			return nil
		},
	}
	f.add(cmd, e)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: wait until interrupted)")
	return cmd
}
