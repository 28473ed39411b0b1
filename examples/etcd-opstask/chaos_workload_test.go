package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// The etcd-opstask chaos workload: two replicas of the controller, both
// running tasks (opstask promises multi-replica safety without leader
// election), a generator of a stream of tasks for a few etcd targets, and
// the ground truth recorded outside the system under test: what the
// generator did, and what recorders wrapped around each replica's handlers
// and store saw — every Execute and Cleanup (task, run, replica, start and
// end) and every delete a controller sent, with the task's status as it
// sent it.

// opsWorld is where the workload runs.
type opsWorld struct {
	direct *rest.Config // the test's own: no faults
	ns     string
	// etcd is the targets' etcd client URL as the replicas reach it.
	etcd string
	// bucket and endpoint are the S3 bucket of the backups and its
	// endpoint as the replicas reach it (it goes in their Secret).
	bucket, endpoint string
	// replicaConfig is the API server config of replica slot i, and the
	// proxy it goes through (nil: no faults on it).
	replicaConfig func(i int) (*rest.Config, *faultproxy.Proxy)
}

// opsOptions tune the workload; the zero value is the real thing.
type opsOptions struct {
	// bound is the liveness bound: how long after the faults stopped (or
	// after its creation, if later) a task may take to reach a final
	// state, and an expired task to be deleted.
	bound time.Duration
	// ttl is the range of the short TTLs, in seconds; the other tasks
	// keep theirs (an hour) through the run.
	ttl [2]int32
	// plannedOnly skips the kinds' real executors: an execution only
	// waits its planned time (the planted-bug runs, which test the
	// checker, not the kinds).
	plannedOnly bool
	// planted, if set, wraps each replica's store: a planted bug. identity
	// prefixes the replica's run IDs.
	planted func(identity string, s watchStore) watchStore
	log     logr.Logger
}

// opsTargets are the etcd names the tasks target; all are the world's
// etcd, each with a backup prefix of its own.
var opsTargets = []string{"ta", "tb", "tc"}

// maxQueued is how many unfinished tasks the generator keeps per target.
const maxQueued = 3

// codePlanned is the error code of an execution the generator planned to
// fail.
const codePlanned opstask.ErrorCode = "PlannedFailure"

// taskPlan is what the generator planned for a task. The recorder reads it
// by the task's name.
type taskPlan struct {
	kind string // "full", "delta" (onDemandSnapshot), "snapshotCompaction", "recoverFromQuorumLoss"
	// work is how long each execution waits (honouring its context)
	// before the kind's executor runs; fail fails it then instead.
	work time.Duration
	fail bool
	ttl  int32
	// cleanupWork is how long each cleanup takes; the first cleanupFails
	// cleanups fail, and are retried.
	cleanupWork  time.Duration
	cleanupFails int
}

// taskTruth is one task the generator submitted.
type taskTruth struct {
	name, target string
	plan         taskPlan
	uid          types.UID
	created      time.Time // creationTimestamp (seconds, the API server's clock)
	// deleteSent and deleteDone bracket the generator's delete request: a
	// task not running left its queue in between; a running one stays,
	// held, until its executor returned. Zero: not deleted by the
	// generator.
	deleteSent, deleteDone time.Time
}

// span is one call of a handler (an Execute or a Cleanup) as the recorder
// saw it.
type span struct {
	task    string
	uid     string
	run     string // the run ID
	replica string // slot.generation
	resumed bool
	start   time.Time
	end     time.Time // zero: it had not returned when the check ran
	err     string
}

// endOr returns the span's end, or at when it has none.
func (s *span) endOr(at time.Time) time.Time {
	if s.end.IsZero() {
		return at
	}
	return s.end
}

func (s *span) String() string {
	end := "still running"
	if !s.end.IsZero() {
		end = ts(s.end)
	}
	return fmt.Sprintf("run %s (replica %s%s) %s–%s", s.run, s.replica, map[bool]string{true: ", resumed"}[s.resumed], ts(s.start), end)
}

// storeDelete is one delete a controller sent through its store.
type storeDelete struct {
	replica string
	at      time.Time // when it was sent
	task    *opstask.Task
	err     error
}

// history is what the recorders saw.
type history struct {
	mu       sync.Mutex
	execs    []*span
	cleanups []*span
	deletes  []storeDelete
}

func (h *history) begin(list *[]*span, t *opstask.Task, run, replica string, resumed bool) *span {
	s := &span{task: t.Name, uid: t.UID, run: run, replica: replica, resumed: resumed, start: time.Now()}
	h.mu.Lock()
	defer h.mu.Unlock()
	*list = append(*list, s)
	return s
}

func (h *history) end(s *span, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s.end = time.Now()
	if err != nil {
		s.err = err.Error()
	}
}

// cleanupsOf returns how many cleanups of the task uid began.
func (h *history) cleanupsOf(uid string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, s := range h.cleanups {
		if s.uid == uid {
			n++
		}
	}
	return n
}

// snapshot returns copies of the spans and deletes.
func (h *history) snapshot() (execs, cleanups []span, deletes []storeDelete) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.execs {
		execs = append(execs, *s)
	}
	for _, s := range h.cleanups {
		cleanups = append(cleanups, *s)
	}
	return execs, cleanups, append([]storeDelete(nil), h.deletes...)
}

// watchStore is the store the controller gets: tasks.NewStore's, which
// also watches (Watch, over the manager's informer). Wrappers must keep Watch, or the controller would hear of
// new tasks only at its resync.
type watchStore interface {
	opstask.Store
	opstask.Watcher
}

// deleteRecorder records every delete the controller sends, with the task
// as it sent it: the delete is guarded by the task's resourceVersion, so a
// task it deleted was in exactly that state.
type deleteRecorder struct {
	watchStore
	hist    *history
	replica string
}

func (s deleteRecorder) Delete(ctx context.Context, t *opstask.Task) error {
	at := time.Now()
	err := s.watchStore.Delete(ctx, t)
	s.hist.mu.Lock()
	defer s.hist.mu.Unlock()
	s.hist.deletes = append(s.hist.deletes, storeDelete{replica: s.replica, at: at, task: t.DeepCopy(), err: err})
	return err
}

// opsTruth is what the generator did.
type opsTruth struct {
	mu      sync.Mutex
	tasks   map[string]*taskTruth
	order   []string // names in submission order
	stopped time.Time
}

type opsWorkload struct {
	w        opsWorld
	o        opsOptions
	seed     uint64
	truth    opsTruth
	hist     history
	audit    *chaos.DeleteAudit
	cache    cache.Cache   // the test's own view of the tasks (direct)
	cl       client.Client // direct
	replicas *chaos.Replicas
	gen      atomic.Int32 // replica generations
}

// newOpsWorkload starts the audit (before anything is created) and creates
// the Secret of the backup buckets.
func newOpsWorkload(ctx context.Context, w opsWorld, o opsOptions, seed uint64) (*opsWorkload, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(w.direct, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if o.ttl == [2]int32{} {
		o.ttl = [2]int32{4, 12}
	}
	g := &opsWorkload{w: w, o: o, seed: seed, cl: cl, truth: opsTruth{tasks: map[string]*taskTruth{}}}
	g.replicas = &chaos.Replicas{N: 2, Config: w.replicaConfig, Run: g.runManager, Log: o.log}

	// The audit: an informer on the test's own connection, whose relists
	// after an API server restart report the deletions its watch missed.
	// It logs through controller-runtime's root logger, which the test
	// sets (once: it is the process's).
	if g.cache, err = cache.New(w.direct, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{w.ns: {}}}); err != nil {
		return nil, err
	}
	inf, err := g.cache.GetInformer(ctx, &api.EtcdOpsTask{})
	if err != nil {
		return nil, err
	}
	if g.audit, err = chaos.AuditDeletes(inf); err != nil {
		return nil, err
	}
	go func() { _ = g.cache.Start(ctx) }()
	if !g.cache.WaitForCacheSync(ctx) {
		return nil, errors.New("audit informer did not sync")
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "minio", Namespace: w.ns}, StringData: map[string]string{
		"accessKeyID": testenv.S3AccessKeyID, "secretAccessKey": testenv.S3SecretAccessKey,
		"region": testenv.S3Region, "endpoint": w.endpoint, "s3ForcePathStyle": "true",
	}}
	return g, cl.Create(ctx, secret)
}

// plan returns the plan of the task name.
func (g *opsWorkload) plan(name string) taskPlan {
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	if t := g.truth.tasks[name]; t != nil {
		return t.plan
	}
	return taskPlan{}
}

// recordHandlers wraps each handler so that the history records its
// executions and cleanups. An execution first waits its planned time, so
// that executions last long enough for faults to hit them, and fails if
// planned; then the kind's executor runs. Every kind gets a Cleanup (the
// example's kinds have none): it waits its planned time and fails as often
// as planned.
func (g *opsWorkload) recordHandlers(replica string, hs []opstask.Handler) []opstask.Handler {
	out := make([]opstask.Handler, 0, len(hs))
	for _, h := range hs {
		inner := h.Executor
		h.Executor = opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) (err error) {
			s := g.hist.begin(&g.hist.execs, run.Task, run.ID, replica, run.Resumed)
			defer func() { g.hist.end(s, err) }()
			p := g.plan(run.Task.Name)
			if chaos.Sleep(ctx, p.work) != nil {
				return context.Cause(ctx)
			}
			if p.fail {
				return opstask.WithCode(codePlanned, fmt.Errorf("planned failure of %s", run.Task.Name))
			}
			if g.o.plannedOnly {
				return nil
			}
			return inner.Execute(ctx, run)
		})
		h.Cleanup = func(ctx context.Context, t *opstask.Task) (err error) {
			run := ""
			if lo := t.Status.LastOperation; lo != nil {
				run = lo.RunID
			}
			n := g.hist.cleanupsOf(t.UID)
			s := g.hist.begin(&g.hist.cleanups, t, run, replica, false)
			defer func() { g.hist.end(s, err) }()
			p := g.plan(t.Name)
			if chaos.Sleep(ctx, p.cleanupWork) != nil {
				return context.Cause(ctx)
			}
			if n < p.cleanupFails {
				return fmt.Errorf("planned cleanup failure %d of %s", n+1, t.Name)
			}
			return nil
		}
		out = append(out, h)
	}
	return out
}

// runManager runs one replica, as main does, with its handlers and store
// wrapped by the recorders, until ctx ends or it exits.
func (g *opsWorkload) runManager(ctx context.Context, cfg *rest.Config, i int) error {
	replica := fmt.Sprintf("%d.%d", i, g.gen.Add(1))
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	flags := kubecmd.Flags{Namespace: g.w.ns}
	mgr, err := flags.NewManager(rest.CopyConfig(cfg), "etcd-opstask", scheme, func(mo *manager.Options) {
		mo.Metrics.BindAddress = "0"
		mo.HealthProbeBindAddress = "0"
		mo.Logger = g.o.log.WithValues("replica", replica)
		mo.GracefulShutdownTimeout = ptr.To(2 * time.Second)
	})
	if err != nil {
		return err
	}
	o := options{namespace: g.w.ns, etcds: map[string]string{}, backupStores: map[string]string{}, backupSecrets: map[string]string{},
		defaultTTL: opstask.DefaultTTL, maxConcurrent: opstask.DefaultMaxConcurrent}
	for _, t := range opsTargets {
		o.etcds[t] = g.w.etcd
		o.backupStores[t] = fmt.Sprintf("s3://%s?prefix=%s/%s/", g.w.bucket, g.w.ns, t)
		o.backupSecrets[t] = "minio"
	}
	store, err := tasks.NewStore(mgr, &api.EtcdOpsTask{}, &tasks.Options{TargetField: api.TargetField, Namespace: g.w.ns})
	if err != nil {
		return err
	}
	closeOperator, err := addTaskController(mgr, o, func(c *opstask.Config) {
		c.Identity = "replica-" + replica
		c.Handlers = g.recordHandlers(replica, c.Handlers)
		var s watchStore = deleteRecorder{watchStore: store.(watchStore), hist: &g.hist, replica: replica}
		if g.o.planted != nil {
			s = g.o.planted(c.Identity, s)
		}
		c.Store = s
	})
	if err != nil {
		return err
	}
	defer closeOperator()
	return mgr.Start(ctx)
}

// generate submits tasks and deletes some until ctx ends.
func (g *opsWorkload) generate(ctx context.Context, ops *chaos.Ops) error {
	defer func() {
		g.truth.mu.Lock()
		g.truth.stopped = time.Now()
		g.truth.mu.Unlock()
	}()
	rng := rand.New(rand.NewPCG(g.seed, 0x6f7073)) // "ops"
	for seq := 0; ctx.Err() == nil; {
		var err error
		if rng.IntN(10) == 0 {
			err = g.deleteOne(ctx, rng, ops)
		} else if target := opsTargets[rng.IntN(len(opsTargets))]; g.queued(ctx, target) < maxQueued {
			seq++
			err = g.submit(rng, fmt.Sprintf("task-%04d", seq), target, ops)
		}
		if err != nil {
			return err
		}
		_ = chaos.Sleep(ctx, time.Duration(150+rng.IntN(450))*time.Millisecond)
	}
	return nil
}

// queued counts the unfinished tasks of target, as the audit's cache sees
// them.
func (g *opsWorkload) queued(ctx context.Context, target string) int {
	var list api.EtcdOpsTaskList
	if err := g.cache.List(ctx, &list, client.InNamespace(g.w.ns)); err != nil {
		return maxQueued
	}
	n := 0
	for _, t := range list.Items {
		if ptr.Deref(t.Spec.EtcdName, "") == target && !t.Status.State.Finished() {
			n++
		}
	}
	return n
}

// submit plans a task, records the plan, and creates it.
func (g *opsWorkload) submit(rng *rand.Rand, name, target string, ops *chaos.Ops) error {
	p := taskPlan{
		kind: []string{"full", "full", "full", "delta", "delta", "delta", "snapshotCompaction", "snapshotCompaction", "recoverFromQuorumLoss"}[rng.IntN(9)],
		work: time.Duration(1000+rng.IntN(4000)) * time.Millisecond,
		fail: rng.IntN(7) == 0,
		ttl:  3600,
	}
	if rng.IntN(5) < 3 {
		p.ttl = g.o.ttl[0] + rng.Int32N(g.o.ttl[1]-g.o.ttl[0]+1)
	}
	if rng.IntN(3) == 0 {
		p.cleanupWork = time.Duration(500+rng.IntN(2500)) * time.Millisecond
	}
	if rng.IntN(8) == 0 {
		p.cleanupFails = 1
	}
	t := &taskTruth{name: name, target: target, plan: p}
	g.truth.mu.Lock()
	g.truth.tasks[name] = t
	g.truth.order = append(g.truth.order, name)
	g.truth.mu.Unlock()

	var cfg api.EtcdOpsTaskConfig
	switch p.kind {
	case "full", "delta":
		cfg.OnDemandSnapshot = &api.OnDemandSnapshotConfig{Type: api.OnDemandSnapshotType(p.kind)}
	case "snapshotCompaction":
		cfg.SnapshotCompaction = &api.SnapshotCompactionConfig{}
	case "recoverFromQuorumLoss":
		cfg.RecoverFromQuorumLoss = &api.RecoverFromQuorumLossConfig{}
	}
	obj := &api.EtcdOpsTask{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: g.w.ns},
		Spec: api.EtcdOpsTaskSpec{Config: cfg, TTLSecondsAfterFinished: ptr.To(p.ttl), EtcdName: ptr.To(target)}}
	// Tasks are created one at a time: each is visible to List before the
	// next is created, so queue order is submission order.
	err := chaos.Retry(func(ctx context.Context) error {
		o := obj.DeepCopy()
		err := g.cl.Create(ctx, o)
		if apierrors.IsAlreadyExists(err) {
			// An earlier attempt was applied; names are never reused.
			err = g.cl.Get(ctx, client.ObjectKeyFromObject(o), o)
		}
		if err != nil {
			return err
		}
		g.truth.mu.Lock()
		t.uid, t.created = o.UID, o.CreationTimestamp.Time
		g.truth.mu.Unlock()
		return nil
	})
	if err != nil {
		return fmt.Errorf("create task %s: %w", name, err)
	}
	g.o.log.Info("generator: task created", "task", name, "target", target, "uid", t.uid, "created", t.created, "plan", fmt.Sprintf("%+v", p))
	ops.Add("submit " + p.kind)
	return nil
}

// deleteOne deletes one of the generator's recent unfinished tasks
// (pending or running), as a person who changed their mind would.
func (g *opsWorkload) deleteOne(ctx context.Context, rng *rand.Rand, ops *chaos.Ops) error {
	var list api.EtcdOpsTaskList
	if err := g.cache.List(ctx, &list, client.InNamespace(g.w.ns)); err != nil {
		return nil
	}
	g.truth.mu.Lock()
	var cands []*taskTruth
	states := map[string]opstask.TaskState{}
	for _, o := range list.Items {
		// Only tasks created in the last 8 s: a task left InProgress by a
		// killed replica waits 30 s for its takeover, and would otherwise
		// be the likeliest to go.
		if t := g.truth.tasks[o.Name]; t != nil && t.uid == o.UID && t.deleteSent.IsZero() && !o.Status.State.Finished() && time.Since(t.created) < 8*time.Second {
			cands = append(cands, t)
			states[o.Name] = o.Status.State
		}
	}
	if len(cands) == 0 {
		g.truth.mu.Unlock()
		return nil
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].name < cands[j].name })
	t := cands[rng.IntN(len(cands))]
	t.deleteSent = time.Now()
	uid := t.uid
	g.truth.mu.Unlock()

	first, gone := true, false
	err := chaos.Retry(func(ctx context.Context) error {
		obj := &api.EtcdOpsTask{ObjectMeta: metav1.ObjectMeta{Name: t.name, Namespace: g.w.ns}}
		err := g.cl.Delete(ctx, obj, client.Preconditions{UID: &uid})
		if apierrors.IsNotFound(err) {
			gone, err = first, nil
		}
		first = false
		return err
	})
	if err != nil {
		return fmt.Errorf("delete task %s: %w", t.name, err)
	}
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	if gone {
		// Deleted before our first attempt (by a controller, after its
		// TTL): not the generator's deletion.
		t.deleteSent = time.Time{}
		return nil
	}
	t.deleteDone = time.Now()
	state := states[t.name]
	if state == "" {
		state = opstask.TaskStatePending
	}
	g.o.log.Info("generator: task deleted", "task", t.name, "state", state, "sent", t.deleteSent, "done", t.deleteDone)
	ops.Add("delete " + strings.ToLower(string(state)) + " task")
	return nil
}

// finalState reads every task, directly.
func (g *opsWorkload) finalState(ctx context.Context) (map[string]api.EtcdOpsTask, error) {
	var list api.EtcdOpsTaskList
	if err := g.cl.List(ctx, &list, client.InNamespace(g.w.ns)); err != nil {
		return nil, err
	}
	out := map[string]api.EtcdOpsTask{}
	for _, t := range list.Items {
		out[t.Name] = t
	}
	return out, nil
}

// expiry returns when a finished task's TTL runs out, by opstask's rule:
// TTL after the end of the second of its lastTransitionTime.
func expiry(s opstask.Status, ttl int32) time.Time {
	if s.LastTransitionTime == nil {
		return time.Time{}
	}
	return s.LastTransitionTime.Truncate(time.Second).Add(time.Second + time.Duration(ttl)*time.Second)
}

// settled: every task the generator did not delete is finished, no
// cleanup runs, and every task whose TTL ran out is gone.
func (g *opsWorkload) settled(ctx context.Context) error {
	live, err := g.finalState(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	var pending []string
	for _, name := range g.truth.order {
		t := g.truth.tasks[name]
		o, ok := live[name]
		if !ok || o.UID != t.uid {
			continue
		}
		if !t.deleteSent.IsZero() {
			pending = append(pending, name+" deleted, still held")
			continue
		}
		switch lo := o.Status.LastOperation; {
		case !o.Status.State.Finished():
			pending = append(pending, fmt.Sprintf("%s %s", name, o.Status.State))
		case lo != nil && lo.Type == opstask.LastOperationTypeCleanup && lo.State == opstask.LastOperationStateInProgress:
			pending = append(pending, name+" in cleanup")
		case t.plan.ttl < 3600 && !now.Before(expiry(o.Status, t.plan.ttl)):
			pending = append(pending, name+" expired")
		case t.plan.ttl < 3600:
			pending = append(pending, name+" not yet expired")
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("%d tasks not done: %s", len(pending), strings.Join(pending[:min(len(pending), 6)], ", "))
	}
	return nil
}
