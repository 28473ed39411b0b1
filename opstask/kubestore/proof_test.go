package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
)

var fullSnapshot = map[string]any{"type": "full"}

// tracker records executions across controllers and checks, as they happen,
// that no task starts twice and no target runs two tasks at once.
type tracker struct {
	t       testing.TB
	mu      sync.Mutex
	starts  map[string]int
	running map[string]string // target -> task
	order   map[string][]string
	by      map[string]int // controller identity -> executions
}

func newTracker(t testing.TB) *tracker {
	return &tracker{t: t, starts: map[string]int{}, running: map[string]string{}, order: map[string][]string{}, by: map[string]int{}}
}

func (tr *tracker) executor(identity string, work time.Duration) opstask.Executor {
	return opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
		tgt, name := run.Task.Spec.Target, run.Task.Name
		tr.mu.Lock()
		tr.starts[name]++
		if tr.starts[name] > 1 {
			tr.t.Errorf("task %s started %d times", name, tr.starts[name])
		}
		if other, busy := tr.running[tgt]; busy {
			tr.t.Errorf("target %s runs %s and %s at once", tgt, other, name)
		}
		tr.running[tgt] = name
		tr.order[tgt] = append(tr.order[tgt], name)
		tr.by[identity]++
		tr.mu.Unlock()
		select {
		case <-time.After(work):
		case <-ctx.Done():
		}
		tr.mu.Lock()
		delete(tr.running, tgt)
		tr.mu.Unlock()
		return nil
	})
}

// queueOrder returns, per target, the names of tasks in (creationTimestamp,
// name) order as the API server stored them.
func queueOrder(tasks map[string]*opstask.Task) map[string][]string {
	var all []*opstask.Task
	for _, t := range tasks {
		all = append(all, t)
	}
	opstask.SortTasks(all)
	out := map[string][]string{}
	for _, t := range all {
		out[t.Spec.Target] = append(out[t.Spec.Target], t.Name)
	}
	return out
}

func allFinished(tasks map[string]*opstask.Task, n int) bool {
	done := 0
	for _, t := range tasks {
		if t.State().Finished() {
			done++
		}
	}
	return done == n && len(tasks) == n
}

func runController(t testing.TB, c *opstask.Controller) (stop func()) {
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), testr.NewWithInterface(t, testr.Options{Verbosity: 0})))
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// TestFIFO: 50 tasks for 5 targets, created in shuffled order over several
// seconds, run in exact (creationTimestamp, name) order per target.
func TestFIFO(t *testing.T) {
	k := startKube(t)
	s := k.store(t, nil)
	const targets, perTarget = 5, 10
	rng := rand.New(rand.NewPCG(6, 5))
	perm := rng.Perm(targets * perTarget)
	for i, p := range perm {
		if i > 0 && i%10 == 0 {
			time.Sleep(1100 * time.Millisecond) // spread creation seconds
		}
		tk := task(fmt.Sprintf("snap-%02d", p), "onDemandSnapshot", fullSnapshot, fmt.Sprintf("etcd-%d", p%targets))
		if _, err := k.create(t.Context(), s, tk); err != nil {
			t.Fatal(err)
		}
	}
	tr := newTracker(t)
	c, err := opstask.New(opstask.Config{Store: s, MaxConcurrent: targets, Handlers: []opstask.Handler{
		{Name: "onDemandSnapshot", Executor: tr.executor("c1", 10*time.Millisecond), AllowDuplicates: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	stop := runController(t, c)
	defer stop()
	waitFor(t, 90*time.Second, "50 tasks to finish", func() bool { return allFinished(k.tasks(t, s), targets*perTarget) })
	stop()
	tasks := k.tasks(t, s)
	for _, tk := range tasks {
		if tk.State() != opstask.TaskStateSucceeded {
			t.Errorf("%s: %s %+v", tk.Name, tk.State(), tk.Status.LastErrors)
		}
	}
	want := queueOrder(tasks)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for tgt, names := range want {
		if !slices.Equal(names, tr.order[tgt]) {
			t.Errorf("target %s ran %v, want %v", tgt, tr.order[tgt], names)
		}
	}
	// The check has teeth only if creation order differs from name order.
	differs := false
	for _, names := range want {
		differs = differs || !slices.IsSorted(names)
	}
	if !differs {
		t.Fatal("creation order equals name order for every target: the test proves nothing; change the shuffle")
	}
}

// TestTwoControllers: two controllers with their own clients share the
// tasks, some created while they run.
func TestTwoControllers(t *testing.T) {
	k := startKube(t)
	const targets, perTarget = 4, 10
	tr := newTracker(t)
	var stops []func()
	for _, id := range []string{"replica-a", "replica-b"} {
		c, err := opstask.New(opstask.Config{Store: k.store(t, k.Config), Identity: id, MaxConcurrent: targets,
			Handlers: []opstask.Handler{{Name: "onDemandSnapshot", Executor: tr.executor(id, 30*time.Millisecond), AllowDuplicates: true}}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, stop := range stops {
				stop()
			}
		}()
		_ = c
		stops = append(stops, func() {})
		idx := len(stops) - 1
		stops[idx] = runController(t, c)
	}
	s := k.store(t, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	for i, p := range rng.Perm(targets * perTarget) {
		if i%8 == 7 {
			time.Sleep(700 * time.Millisecond)
		}
		tk := task(fmt.Sprintf("snap-%02d", p), "onDemandSnapshot", fullSnapshot, fmt.Sprintf("etcd-%d", p%targets))
		if _, err := k.create(t.Context(), s, tk); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 90*time.Second, "40 tasks to finish", func() bool { return allFinished(k.tasks(t, s), targets*perTarget) })
	tasks := k.tasks(t, s)
	want := queueOrder(tasks)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, tk := range tasks {
		if tk.State() != opstask.TaskStateSucceeded || tr.starts[tk.Name] != 1 {
			t.Errorf("%s: %s after %d starts, want Succeeded after 1", tk.Name, tk.State(), tr.starts[tk.Name])
		}
	}
	for tgt, names := range want {
		if !slices.Equal(names, tr.order[tgt]) {
			t.Errorf("target %s ran %v, want %v", tgt, tr.order[tgt], names)
		}
	}
	t.Logf("executions per controller: %v", tr.by)
}

const (
	helperEnv          = "OPSTASK_TEST_HELPER_HOST"
	helperTokenEnv     = "OPSTASK_TEST_HELPER_TOKEN"
	helperNamespaceEnv = "OPSTASK_TEST_HELPER_NAMESPACE"
)

// helperController is the controller that TestKilledController kills: it
// runs in a child process whose executors report progress and then block.
func helperController() int {
	cfg := &rest.Config{Host: os.Getenv(helperEnv), BearerToken: os.Getenv(helperTokenEnv),
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := kubestore.New(kubestore.Config{Client: dyn, Resource: opstasktest.Resource, Kind: opstasktest.GroupVersionKind.Kind,
		Namespace: os.Getenv(helperNamespaceEnv), TargetField: opstasktest.TargetField})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	block := opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
		if err := run.Progress(ctx, "copied 1 of 1000 backups"); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
	c, err := opstask.New(opstask.Config{Store: s, Identity: "doomed", Settle: opstask.NoSettle, Handlers: killKinds(block, block)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_ = c.Run(context.Background())
	return 0
}

func killKinds(snapshot, copyBackups opstask.Executor) []opstask.Handler {
	return []opstask.Handler{
		{Name: "onDemandSnapshot", Executor: snapshot, Resumable: true, AllowDuplicates: true},
		{Name: "copyBackups", Executor: copyBackups},
	}
}

// TestKilledController: a controller process is killed (SIGKILL) while it
// executes two tasks; the next controller resumes the resumable one, fails
// the other with a clear error, and runs the queued tasks behind them.
func TestKilledController(t *testing.T) {
	k := startKube(t)
	s := k.store(t, nil)
	store := map[string]any{"provider": "S3", "container": "backups"}
	copyCfg := map[string]any{"sourceStore": store, "targetStore": store}
	for _, tk := range []*opstask.Task{
		task("snap-1", "onDemandSnapshot", fullSnapshot, "etcd-main"),
		task("copy-1", "copyBackups", copyCfg, ""),
	} {
		if _, err := k.create(t.Context(), s, tk); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+k.Config.Host, helperTokenEnv+"="+k.Config.BearerToken, helperNamespaceEnv+"="+k.Namespace)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	waitFor(t, 30*time.Second, "the doomed controller to report progress on both tasks", func() bool {
		n := 0
		for _, tk := range k.tasks(t, s) {
			if lo := tk.Status.LastOperation; lo != nil && lo.Description == "copied 1 of 1000 backups" && strings.HasPrefix(lo.RunID, "doomed-") {
				n++
			}
		}
		return n == 2
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	// Tasks queued behind the interrupted ones.
	for _, tk := range []*opstask.Task{
		task("snap-2", "onDemandSnapshot", fullSnapshot, "etcd-main"),
		task("copy-2", "copyBackups", map[string]any{"sourceStore": store, "targetStore": store, "maxBackups": 5}, ""),
	} {
		if _, err := k.create(t.Context(), s, tk); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	resumed := map[string]bool{}
	ok := opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
		mu.Lock()
		resumed[run.Task.Name] = run.Resumed
		mu.Unlock()
		return run.Progress(ctx, "done")
	})
	lease := 3 * time.Second
	c, err := opstask.New(opstask.Config{Store: s, Identity: "next", LeaseDuration: lease, Handlers: killKinds(ok, ok)})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	stop := runController(t, c)
	defer stop()
	waitFor(t, 60*time.Second, "all four tasks to finish", func() bool { return allFinished(k.tasks(t, s), 4) })
	if took := time.Since(began); took < lease {
		t.Errorf("took over after %s, before the lease of %s", took, lease)
	}
	tasks := k.tasks(t, s)
	want := map[string]opstask.TaskState{"snap-1": opstask.TaskStateSucceeded, "snap-2": opstask.TaskStateSucceeded,
		"copy-1": opstask.TaskStateFailed, "copy-2": opstask.TaskStateSucceeded}
	for name, state := range want {
		if got := tasks[name].State(); got != state {
			t.Errorf("%s: %s, want %s (%+v)", name, got, state, tasks[name].Status)
		}
	}
	if e := tasks["copy-1"].Status.LastErrors; len(e) != 1 || e[0].Code != opstask.CodeInterrupted || !strings.Contains(e[0].Description, "doomed-") {
		t.Errorf("copy-1 errors %+v, want one Interrupted naming the doomed run", e)
	}
	mu.Lock()
	defer mu.Unlock()
	if !resumed["snap-1"] || resumed["snap-2"] || resumed["copy-2"] {
		t.Errorf("resumed flags %v, want only snap-1", resumed)
	}
	if _, ran := resumed["copy-1"]; ran {
		t.Error("the interrupted, non-resumable copy-1 ran again")
	}
	if tasks["snap-1"].Status.StartedAt.After(tasks["snap-2"].Status.StartedAt.Time) {
		t.Error("snap-2 started before snap-1")
	}
}

// TestCleanupAtTTL: rejected, failed and succeeded tasks are deleted exactly
// when their TTL runs out on a fake clock, counted from the end of the
// second they finished in (the API server truncates lastTransitionTime to
// it), not a second earlier.
func TestCleanupAtTTL(t *testing.T) {
	k := startKube(t)
	s := k.store(t, nil)
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second).Add(time.Second))
	ttl := func(n int32) *int32 { return &n }
	specs := []struct {
		tk  *opstask.Task
		ttl *int32
	}{
		{task("ok", "onDemandSnapshot", fullSnapshot, "etcd-a"), ttl(60)},
		{task("broken", "snapshotCompaction", map[string]any{}, "etcd-b"), ttl(120)},
		{task("refused", "recoverFromQuorumLoss", map[string]any{}, "etcd-c"), nil}, // DefaultTTL
	}
	for _, sp := range specs {
		sp.tk.Spec.TTLSecondsAfterFinished = sp.ttl
		if _, err := k.create(t.Context(), s, sp.tk); err != nil {
			t.Fatal(err)
		}
	}
	nop := opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })
	c, err := opstask.New(opstask.Config{Store: s, Clock: clk, Settle: opstask.NoSettle, DefaultTTL: 300 * time.Second, Handlers: []opstask.Handler{
		{Name: "onDemandSnapshot", Executor: nop},
		{Name: "snapshotCompaction", Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error {
			return opstask.WithCode("BucketGone", errors.New("backup bucket does not exist"))
		})},
		{Name: "recoverFromQuorumLoss", Executor: nop, Preconditions: []opstask.Precondition{opstask.PreconditionFunc(
			func(context.Context, *opstask.Task) error { return opstask.Unmet("QuorumPresent", "etcd-c has quorum") })}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	finishedAt := clk.Now()
	if _, err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "three finished tasks", func() bool { return allFinished(k.tasks(t, s), 3) })
	tasks := k.tasks(t, s)
	for name, want := range map[string]opstask.TaskState{"ok": opstask.TaskStateSucceeded, "broken": opstask.TaskStateFailed, "refused": opstask.TaskStateRejected} {
		if got := tasks[name]; got.State() != want || !got.Status.LastTransitionTime.Time.Equal(finishedAt) {
			t.Fatalf("%s: %s at %v, want %s at %v", name, got.State(), got.Status.LastTransitionTime, want, finishedAt)
		}
	}
	if e := tasks["broken"].Status.LastErrors; len(e) != 1 || e[0].Code != "BucketGone" {
		t.Errorf("broken: errors %+v", e)
	}
	if e := tasks["refused"].Status.LastErrors; len(e) != 1 || e[0].Code != "QuorumPresent" {
		t.Errorf("refused: errors %+v", e)
	}
	exists := func(name string) bool {
		_, err := k.dyn.Resource(opstasktest.Resource).Namespace(k.Namespace).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	for _, step := range []struct {
		at      time.Duration // after finishing
		present []string
		requeue time.Duration
	}{
		{0, []string{"ok", "broken", "refused"}, 61 * time.Second},
		{60 * time.Second, []string{"ok", "broken", "refused"}, time.Second},
		{61 * time.Second, []string{"broken", "refused"}, 60 * time.Second},
		{120 * time.Second, []string{"broken", "refused"}, time.Second},
		{121 * time.Second, []string{"refused"}, 180 * time.Second},
		{300 * time.Second, []string{"refused"}, time.Second},
		{301 * time.Second, nil, 0},
	} {
		clk.SetTime(finishedAt.Add(step.at))
		var before []string
		for _, name := range []string{"ok", "broken", "refused"} {
			if exists(name) {
				before = append(before, name)
			}
		}
		dry, err := c.DryRun(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var would []string
		for _, e := range dry {
			would = append(would, e.Task.Name)
			if !e.FinishedAt.Equal(finishedAt) || !e.At.Equal(finishedAt.Add(time.Second+e.TTL)) || e.At.After(clk.Now()) {
				t.Errorf("at +%s: dry run says %s finished at %v with TTL %s", step.at, e.Task.Name, e.FinishedAt, e.TTL)
			}
		}
		var want []string
		for _, name := range before {
			if !slices.Contains(step.present, name) {
				want = append(want, name)
			}
		}
		slices.Sort(would)
		slices.Sort(want)
		if !slices.Equal(would, want) {
			t.Errorf("at +%s: dry run would delete %v, want %v", step.at, would, want)
		}
		d, err := c.Sync(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if d != step.requeue {
			t.Errorf("at +%s: requeue after %s, want %s", step.at, d, step.requeue)
		}
		for _, name := range []string{"ok", "broken", "refused"} {
			if want := slices.Contains(step.present, name); exists(name) != want {
				t.Errorf("at +%s: %s exists = %v, want %v", step.at, name, !want, want)
			}
		}
	}
}

// TestTwoControllersCleanUpOnce: while one controller runs a task's
// Cleanup, another controller, with its own client, reads the task and
// leaves it alone; the first deletes it after its cleanup.
func TestTwoControllersCleanUpOnce(t *testing.T) {
	k := startKube(t)
	s := k.store(t, nil)
	var (
		mu      sync.Mutex
		cleaned []string
	)
	inCleanup := make(chan string, 2)
	release := make(chan struct{})
	cleanup := func(id string) func(context.Context, *opstask.Task) error {
		return func(ctx context.Context, task *opstask.Task) error {
			mu.Lock()
			cleaned = append(cleaned, id)
			mu.Unlock()
			inCleanup <- id
			select {
			case <-release: // deleting backups
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	ttl := int32(0)
	tk := task("snap-1", "onDemandSnapshot", fullSnapshot, "etcd-main")
	tk.Spec.TTLSecondsAfterFinished = &ttl
	if _, err := k.create(t.Context(), s, tk); err != nil {
		t.Fatal(err)
	}
	nop := opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })
	controller := func(id string) *opstask.Controller {
		c, err := opstask.New(opstask.Config{Store: k.store(t, k.Config), Identity: id, LeaseDuration: 30 * time.Second,
			Handlers: []opstask.Handler{{Name: "onDemandSnapshot", Executor: nop, Cleanup: cleanup(id)}}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	stopA := runController(t, controller("replica-a"))
	defer stopA()
	select {
	case id := <-inCleanup:
		if id != "replica-a" {
			t.Fatalf("cleanup started by %s", id)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("no cleanup 2 minutes after the task was created")
	}
	b := controller("replica-b")
	bCtx, stopB := context.WithCancel(t.Context())
	defer stopB()
	synced := make(chan error, 1)
	go func() {
		_, err := b.Sync(bCtx)
		synced <- err
	}()
	select {
	case id := <-inCleanup:
		t.Errorf("%s runs the cleanup while replica-a runs it", id)
	case err := <-synced:
		if err != nil {
			t.Fatalf("replica-b's Sync: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("replica-b's Sync did not return in 2 minutes")
	}
	close(release)
	waitFor(t, 30*time.Second, "the task to be deleted", func() bool { return len(k.tasks(t, s)) == 0 })
	stopB()
	mu.Lock()
	defer mu.Unlock()
	if len(cleaned) != 1 {
		t.Errorf("cleaned up by %v, want once by replica-a", cleaned)
	}
}
