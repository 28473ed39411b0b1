package opstask

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/retention"
)

// syncWorkers bounds the queues and expired tasks a Sync acts on at once.
const syncWorkers = 8

// Defaults of Config.
const (
	DefaultTTL           = time.Hour
	DefaultTimeout       = time.Hour
	DefaultMaxConcurrent = 4
	DefaultLeaseDuration = 30 * time.Second
	DefaultSettle        = 2 * time.Second
	DefaultResyncPeriod  = 30 * time.Second
	DefaultRetryInterval = 5 * time.Second
)

// NoSettle is the Config.Settle of a store where creation order is visible at
// once (memstore): tasks are started as soon as they are seen. It is the
// only negative Settle New accepts.
const NoSettle time.Duration = -1

// Config configures a Controller. Zero fields take the defaults above; New
// rejects negative durations and counts (except Settle's NoSettle), with an
// error wrapping ErrInvalidConfig that names the field and its value.
type Config struct {
	// Store holds the tasks. Required.
	Store Store
	// Handlers are the task kinds the controller runs; a task of another kind
	// is rejected with code InvalidSpec. At least one is required.
	Handlers []Handler
	// Clock is the source of time for every decision and timer. Default:
	// the real clock.
	Clock clock.WithTicker
	// Metrics, when set, records finished tasks.
	Metrics *Metrics
	// Identity prefixes the run IDs of this controller, e.g. the pod name.
	Identity string

	// MaxConcurrent bounds the executions running at once in this
	// controller (across targets; a target runs one task at a time).
	MaxConcurrent int
	// DefaultTTL applies to finished tasks whose spec has no
	// ttlSecondsAfterFinished.
	DefaultTTL time.Duration
	// DefaultTimeout applies to kinds without a Timeout.
	DefaultTimeout time.Duration
	// LeaseDuration is how long an InProgress task (or a task in cleanup)
	// may go without a write before another controller takes its execution
	// (or cleanup) over. The controller running it renews every
	// LeaseDuration/3, bounds each write by 2/3 of it, and stops its
	// executor (or Handler.Cleanup) when no write confirmed its claim for 2/3
	// of it.
	LeaseDuration time.Duration
	// Settle is how long after a task's creation second ends the
	// controller waits before starting it, so that a task created at the
	// same time, which sorts before it, is seen first (creation timestamps
	// have a resolution of one second). NoSettle means no wait, for stores
	// where creation order is immediately visible (in memory); any other
	// negative value is refused.
	Settle time.Duration
	// ClockSkewTolerance is how much longer than its TTL a finished task
	// is kept before its cleanup and deletion: the finish time was read on
	// the clock of the controller that finished the task, and the TTL is
	// judged on the clock of the one that deletes it. A controller whose
	// clock is ahead of the finishing one's by at most the tolerance never
	// deletes a task early. Zero, the default, assumes the clocks agree
	// (NTP). Must not be negative.
	ClockSkewTolerance time.Duration
	// ResyncPeriod bounds the time between two reads of the whole store.
	ResyncPeriod time.Duration
	// RetryInterval is the wait after a transient error (a store error, a
	// precondition that could not be checked, a failed cleanup).
	RetryInterval time.Duration
}

// Controller runs tasks from a Store: one at a time per target, in queue
// order, up to MaxConcurrent targets at once, then deletes them after their
// TTL. Create it with New and start it with Run.
type Controller struct {
	cfg   Config
	kinds map[string]*Handler

	trigger chan struct{}
	// confirmed, when set (by tests, see export_test.go), is called each
	// time a lease records a successful write of the task with key at the
	// write's start: a test on a fake clock steps past a renewal only after
	// the lease has counted it.
	confirmed func(key string, at time.Time)
	// cache holds the tasks of a store that is an Informer, for Sync; nil
	// for other stores, which Sync lists.
	cache *taskCache

	mu       sync.Mutex
	running  map[string]*runner // by task key
	reserved int                // slots reserved for starts in flight
	observed map[string]observation
	// returned holds, by task key, the run ID of this controller's last
	// execution of the task whose executor has returned.
	returned map[string]string
	// withoutKind holds the UIDs of expired tasks this controller leaves
	// alone because it lacks their kind, so that each is logged once.
	withoutKind map[string]bool
	// metricTargets holds the targets whose metric series this controller
	// recorded, each with the number of the last recording (metricSeq
	// counts them), so that a Sync deletes the series of a target left
	// without tasks, and only those recorded before its List.
	metricTargets map[metricTarget]uint64
	metricSeq     uint64
	// metricsEmpty holds, for a recorded target a Sync found without
	// tasks, when that was first seen: its series go ForgetAfter later.
	metricsEmpty map[metricTarget]time.Time
	wg           sync.WaitGroup
}

// metricTarget names a target's metric series: its namespace and name.
type metricTarget struct{ namespace, target string }

// recordFinished records a task that reached a final state in the metrics,
// and remembers its target so that its series can be deleted when the
// target has no task left.
func (c *Controller) recordFinished(t *Task) {
	if c.cfg.Metrics == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.metricSeq++
	c.metricTargets[metricTarget{t.Namespace, t.Spec.Target}] = c.metricSeq
	c.cfg.Metrics.finished(t)
}

// forgetMetricTargets deletes the metric series of the targets that have
// had no task in the tasks of any Sync for MetricsConfig.ForgetAfter:
// without tasks, a target's series would stay for the life of the process,
// one set per target ever seen, and deleting them at once would lose the
// last counts before they were scraped. tasks were read by a List that
// began after recording number seq: a target recorded after the List began
// may have a task the List missed, and is left for the next Sync.
func (c *Controller) forgetMetricTargets(live func(metricTarget) bool, seq uint64, now time.Time) {
	if c.cfg.Metrics == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for mt, at := range c.metricTargets {
		if live(mt) || at > seq {
			delete(c.metricsEmpty, mt)
			continue
		}
		since, ok := c.metricsEmpty[mt]
		if !ok {
			c.metricsEmpty[mt] = now
			continue
		}
		if now.Sub(since) >= c.cfg.Metrics.forgetAfter {
			delete(c.metricTargets, mt)
			delete(c.metricsEmpty, mt)
			c.cfg.Metrics.forget(mt.namespace, mt.target)
		}
	}
}

// observation is when this controller first saw a task claimed by another
// run (an execution or a cleanup) at its current version.
type observation struct {
	rv     string
	seenAt time.Time
}

// New validates cfg and returns a Controller.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: Config.Store is nil", ErrInvalidConfig)
	}
	if len(cfg.Handlers) == 0 {
		return nil, fmt.Errorf("%w: Config.Handlers is empty", ErrInvalidConfig)
	}
	kinds := make(map[string]*Handler, len(cfg.Handlers))
	for i := range cfg.Handlers {
		k := &cfg.Handlers[i]
		switch {
		case k.Name == "":
			return nil, fmt.Errorf("%w: Config.Handlers[%d].Name is empty", ErrInvalidConfig, i)
		case k.Executor == nil:
			return nil, fmt.Errorf("%w: Config.Handlers[%d] (%q).Executor is nil", ErrInvalidConfig, i, k.Name)
		case kinds[k.Name] != nil:
			return nil, fmt.Errorf("%w: Config.Handlers[%d].Name %q registered twice", ErrInvalidConfig, i, k.Name)
		}
		kinds[k.Name] = k
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DefaultTTL", &cfg.DefaultTTL, DefaultTTL},
		{"DefaultTimeout", &cfg.DefaultTimeout, DefaultTimeout},
		{"LeaseDuration", &cfg.LeaseDuration, DefaultLeaseDuration},
		{"ResyncPeriod", &cfg.ResyncPeriod, DefaultResyncPeriod},
		{"RetryInterval", &cfg.RetryInterval, DefaultRetryInterval},
	} {
		if *d.v < 0 {
			return nil, fmt.Errorf("%w: Config.%s = %s: must not be negative", ErrInvalidConfig, d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	switch {
	case cfg.Settle == 0:
		cfg.Settle = DefaultSettle
	case cfg.Settle < 0 && cfg.Settle != NoSettle:
		return nil, fmt.Errorf("%w: Config.Settle = %s: must not be negative (NoSettle turns the wait off)", ErrInvalidConfig, cfg.Settle)
	}
	if cfg.ClockSkewTolerance < 0 {
		return nil, fmt.Errorf("%w: Config.ClockSkewTolerance = %s: must not be negative", ErrInvalidConfig, cfg.ClockSkewTolerance)
	}
	if cfg.MaxConcurrent < 0 {
		return nil, fmt.Errorf("%w: Config.MaxConcurrent = %d: must not be negative", ErrInvalidConfig, cfg.MaxConcurrent)
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = DefaultMaxConcurrent
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	c := &Controller{
		cfg:           cfg,
		kinds:         kinds,
		trigger:       make(chan struct{}, 1),
		running:       map[string]*runner{},
		observed:      map[string]observation{},
		returned:      map[string]string{},
		metricTargets: map[metricTarget]uint64{},
		metricsEmpty:  map[metricTarget]time.Time{},
	}
	if _, ok := cfg.Store.(Informer); ok {
		c.cache = newTaskCache(c.expiresAt, c.notify)
	}
	return c, nil
}

// Run processes tasks until ctx is done, then waits for its executions to
// return and returns ctx's error. Executions stopped this way leave their
// tasks InProgress, for this or another controller to take over after
// LeaseDuration. The logger comes from ctx (logr.FromContextOrDiscard).
func (c *Controller) Run(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	defer c.wg.Wait()
	if inf, ok := c.cfg.Store.(Informer); ok {
		c.cache.begin()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.inform(ctx, inf)
		}()
	} else if w, ok := c.cfg.Store.(Watcher); ok {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.watch(ctx, w)
		}()
	}
	for {
		var next time.Duration
		var err error
		if c.cache == nil || !c.cache.syncing() {
			next, err = c.Sync(ctx) // else the end of the sync triggers one
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			log.Error(err, "opstask sync failed; retrying", "after", c.cfg.RetryInterval)
			next = c.cfg.RetryInterval
		}
		if next <= 0 || next > c.cfg.ResyncPeriod {
			next = c.cfg.ResyncPeriod
		}
		timer := c.cfg.Clock.NewTimer(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-c.trigger:
		case <-timer.C():
		}
		timer.Stop()
	}
}

func (c *Controller) watch(ctx context.Context, w Watcher) {
	log := logr.FromContextOrDiscard(ctx)
	for ctx.Err() == nil {
		err := w.Watch(ctx, c.notify)
		if ctx.Err() != nil {
			return
		}
		log.V(1).Info("opstask watch ended; watching again", "error", err)
		c.notify()
		timer := c.cfg.Clock.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-timer.C():
		}
		timer.Stop()
	}
}

// notify asks Run for another Sync.
func (c *Controller) notify() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Sync reads the tasks and acts on what it read: rejects invalid and
// duplicate tasks, admits and starts the head of each idle queue, takes over
// executions whose controller stopped, and cleans up and deletes tasks
// whose TTL ran out (executed tasks only if their kind is registered).
// Under Run with a store that is an Informer, it reads the tasks that can
// change state from the controller's copy, and no task from the store;
// otherwise it lists every task. Executions run in goroutines under ctx: canceling it stops them as
// Run's shutdown does. It returns when the next Sync is due
// because of time alone (0: none), and the first error. Run calls it; it is
// exported for tests and for callers with their own loop.
func (c *Controller) Sync(ctx context.Context) (time.Duration, error) {
	c.mu.Lock()
	seq := c.metricSeq
	c.mu.Unlock()
	now := c.cfg.Clock.Now()
	tasks, expires, live, err := c.read(ctx, now)
	if err != nil {
		return 0, err
	}
	c.forgetMetricTargets(live, seq, c.cfg.Clock.Now())
	now = c.cfg.Clock.Now()
	var (
		next time.Time
		errs []error
	)
	requeue := func(at time.Time) {
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	requeue(expires)
	queues := map[string][]*Task{}
	var order []string
	for _, t := range tasks {
		k := t.TargetKey()
		if _, ok := queues[k]; !ok {
			order = append(order, k)
		}
		queues[k] = append(queues[k], t)
	}
	c.forgetObservations(tasks)
	// Queues whose oldest unfinished task is older get free slots first.
	for _, q := range queues {
		SortTasks(q)
	}
	sort.Slice(order, func(i, j int) bool {
		return oldestUnfinished(queues[order[i]]).Before(oldestUnfinished(queues[order[j]]))
	})
	// Queues are independent, and so are expired tasks: act on them
	// concurrently, so that a Sync costs a few write latencies, not one per
	// queue. Slots are reserved beforehand, older queues first.
	var mu sync.Mutex
	jobs := make([]func() (time.Time, error), 0, len(order))
	busy := c.busyTargets()
	for _, k := range order {
		q := queues[k]
		slot := !busy[k] && needsSlot(q) && c.reserveSlot()
		jobs = append(jobs, func() (time.Time, error) { return c.syncQueue(ctx, q, now, slot) })
	}
	var withoutKind []*Task
	for _, t := range tasks {
		switch {
		case !t.State().Finished():
		case t.Deleting:
			// Its deletion was asked for: nothing to clean up, and no
			// executor runs for a finished task, so its hold goes (others'
			// finalizers may keep it).
			if t.Held {
				jobs = append(jobs, func() (time.Time, error) { return time.Time{}, c.release(ctx, t) })
			}
		case !c.canClean(t):
			if t.Held {
				jobs = append(jobs, func() (time.Time, error) { return time.Time{}, c.release(ctx, t) })
			}
			withoutKind = append(withoutKind, t)
		default:
			jobs = append(jobs, func() (time.Time, error) {
				if t.Held {
					// Left by the execution: released before the cleanup.
					if err := c.release(ctx, t); err != nil || t.Held {
						return time.Time{}, err // a conflict triggered another Sync
					}
				}
				return c.cleanup(ctx, t, now)
			})
		}
	}
	c.reportWithoutKind(ctx, withoutKind, now)
	work := make(chan func() (time.Time, error))
	var wg sync.WaitGroup
	for range min(syncWorkers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range work {
				at, err := job()
				mu.Lock()
				requeue(at)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, job := range jobs {
		work <- job
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	var d time.Duration
	if !next.IsZero() {
		d = next.Sub(now)
		if d <= 0 {
			d = time.Nanosecond
		}
	}
	return d, errors.Join(errs...)
}

// read returns the tasks a Sync at now acts on, when the next finished task
// not among them expires (zero: unknown or none), and which metric targets
// have tasks. From the cache when it is synced, they are the tasks that can
// change state (see taskCache); otherwise every task, by List.
func (c *Controller) read(ctx context.Context, now time.Time) ([]*Task, time.Time, func(metricTarget) bool, error) {
	if c.cache != nil {
		tasks, next, ok, err := c.cache.snapshot(now)
		if err != nil {
			return nil, time.Time{}, nil, fmt.Errorf("opstask: read tasks: %w", err)
		}
		if ok {
			return tasks, next, c.cache.hasTarget, nil
		}
	}
	tasks, err := c.cfg.Store.List(ctx)
	if err != nil {
		return nil, time.Time{}, nil, fmt.Errorf("opstask: list tasks: %w", err)
	}
	live := make(map[metricTarget]bool, len(tasks))
	for _, t := range tasks {
		live[metricTarget{t.Namespace, t.Spec.Target}] = true
	}
	return tasks, time.Time{}, func(mt metricTarget) bool { return live[mt] }, nil
}

// Running returns how many executions this controller runs, or has
// reserved a slot for, now. An execution counts until its task's final
// status is written and its slot is free again, which is a moment after a
// reader of the store sees the task finished: a task waiting for the same
// target starts only at a Sync after that. A simulation that calls Sync
// itself on a fake clock waits for Running to fall before it steps the
// clock, as the etcd-opstask example's does; Run needs no such care, since
// the end of an execution wakes it.
func (c *Controller) Running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.running) + c.reserved
}

// busyTargets returns the target keys of the executions this controller
// runs: their queues take no slot even when the tasks read show them
// pending (a cache that has not yet delivered the claim).
func (c *Controller) busyTargets() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	busy := make(map[string]bool, len(c.running))
	for _, r := range c.running {
		busy[r.target] = true
	}
	return busy
}

// forgetObservations drops lease observations, and the record of returned
// executions, of tasks no longer claimed (InProgress, or in a cleanup).
func (c *Controller) forgetObservations(tasks []*Task) {
	inProgress := make(map[string]bool, len(tasks))
	for _, t := range tasks {
		if t.State() == TaskStateInProgress || cleanupClaimed(t) {
			inProgress[t.Key()] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.observed {
		if !inProgress[k] {
			delete(c.observed, k)
		}
	}
	for k := range c.returned {
		if !inProgress[k] {
			delete(c.returned, k)
		}
	}
}

// canClean reports whether this controller may clean up and delete the
// finished task t after its TTL. Never delete what you cannot clean up: a
// task whose kind is not registered here may have run an executor whose
// Cleanup only a controller with the kind can run. A rejected task never
// ran, so there is nothing to clean up whatever its kind.
func (c *Controller) canClean(t *Task) bool {
	return c.kinds[t.Kind()] != nil || t.State() == TaskStateRejected
}

// reportWithoutKind logs, once per task, the finished tasks past their TTL
// that this controller leaves alone because it does not have their kind,
// and sets the metric that counts them.
func (c *Controller) reportWithoutKind(ctx context.Context, tasks []*Task, now time.Time) {
	log := logr.FromContextOrDiscard(ctx)
	expired := map[string]bool{}
	byKind := map[string]int{}
	c.mu.Lock()
	for _, t := range tasks {
		if e, _, err := c.expiry(t, now); err != nil || e == nil {
			continue
		}
		expired[t.UID] = true
		byKind[t.Kind()]++
		if !c.withoutKind[t.UID] {
			log.Info("opstask leaves a finished task past its TTL alone: its kind is not registered in this controller, which cannot run its Cleanup; a controller that has the kind cleans it up and deletes it",
				"task", t.Key(), "kind", t.Kind(), "state", t.State())
		}
	}
	c.withoutKind = expired
	c.mu.Unlock()
	c.cfg.Metrics.setWithoutKind(byKind)
}

// oldestUnfinished returns the first unfinished task of a sorted queue, or
// its last task when all are finished.
func oldestUnfinished(q []*Task) *Task {
	for _, t := range q {
		if !t.State().Finished() {
			return t
		}
	}
	return q[len(q)-1]
}

// needsSlot reports whether a queue may start a task: it has a pending task
// and none in progress.
func needsSlot(q []*Task) bool {
	pending := false
	for _, t := range q {
		switch t.State() {
		case TaskStateInProgress:
			return false
		case TaskStatePending:
			pending = pending || !t.Deleting
		}
	}
	return pending
}

// syncQueue acts on one target's queue, sorted, with an execution slot
// reserved for it if slot is set. It returns when to look again because of
// time alone.
func (c *Controller) syncQueue(ctx context.Context, q []*Task, now time.Time, slot bool) (time.Time, error) {
	log := logr.FromContextOrDiscard(ctx)
	if slot {
		defer func() {
			if slot {
				c.releaseSlot() // not handed to start
			}
		}()
	}
	var next time.Time
	requeue := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}

	// Reject invalid specs and duplicates wherever they are in the queue:
	// both are properties of the queue, not of the target's state.
	type seenKey struct{ kind, key string }
	unfinished := map[seenKey]string{} // duplicate key -> first task name
	var pending []*Task
	busy := false
	for _, t := range q {
		switch t.State() {
		case TaskStateInProgress:
			busy = true
			if k, key, err := c.kindAndKey(t); err == nil && !k.AllowDuplicates {
				if _, ok := unfinished[seenKey{k.Name, key}]; !ok {
					unfinished[seenKey{k.Name, key}] = t.Name
				}
			}
		case TaskStatePending:
			if t.Deleting {
				// Never started; a hold on it is a leftover.
				if t.Held {
					if err := c.release(ctx, t); err != nil {
						return next, err
					}
				}
				continue
			}
			k, key, err := c.kindAndKey(t)
			if err != nil {
				if rerr := c.reject(ctx, t, now, codeOf(err, CodeInvalidSpec), err.Error()); rerr != nil {
					return next, rerr
				}
				continue
			}
			if !k.AllowDuplicates {
				sk := seenKey{k.Name, key}
				if first, ok := unfinished[sk]; ok {
					msg := fmt.Sprintf("duplicate of unfinished task %s (kind %s) for the same target", first, k.Name)
					if rerr := c.reject(ctx, t, now, CodeDuplicate, msg); rerr != nil {
						return next, rerr
					}
					continue
				}
				unfinished[sk] = t.Name
			}
			pending = append(pending, t)
		}
	}

	// Executions of this queue: a deleted one is stopped and released, and
	// one that another controller started is taken over when its claim
	// lapsed.
	for _, t := range q {
		if t.State() != TaskStateInProgress {
			continue
		}
		check := c.checkForeign
		if t.Deleting {
			check = c.stopDeleted
		}
		at, err := check(ctx, t, now)
		if !at.IsZero() {
			requeue(at)
		}
		if err != nil {
			return next, err
		}
	}
	if busy {
		return next, nil
	}

	// Admit and start the head of the queue; rejected heads make way.
	for _, t := range pending {
		if c.cfg.Settle > 0 {
			if ready := t.CreationTimestamp.Add(time.Second + c.cfg.Settle); now.Before(ready) {
				requeue(ready)
				return next, nil
			}
		}
		if !slot {
			return next, nil // a finishing execution triggers another Sync
		}
		k, _, _ := c.kindAndKey(t)
		err := c.admit(ctx, k, t)
		if errors.Is(err, ErrUnmet) || errors.Is(err, ErrInvalidSpec) {
			// A spec a precondition cannot use is rejected too: checking it
			// again would block the queue for good.
			code := CodePreconditionFailed
			if !errors.Is(err, ErrUnmet) {
				code = CodeInvalidSpec
			}
			if rerr := c.reject(ctx, t, now, codeOf(err, code), err.Error()); rerr != nil {
				return next, rerr
			}
			continue
		}
		if err != nil {
			log.Info("opstask precondition could not be checked; retrying", "task", t.Key(), "error", err.Error())
			requeue(now.Add(c.cfg.RetryInterval))
			return next, nil
		}
		slot = false // start takes the reservation over
		return next, c.start(ctx, k, t)
	}
	return next, nil
}

func (c *Controller) kindAndKey(t *Task) (*Handler, string, error) {
	name, raw, err := t.Spec.Member()
	if err != nil {
		return nil, "", err
	}
	k := c.kinds[name]
	if k == nil {
		return nil, "", fmt.Errorf("%w: spec.config.%s: no such task kind is registered", ErrInvalidSpec, name)
	}
	key, err := k.dupKey(t, raw)
	if err != nil {
		return nil, "", WithCode(CodeInvalidSpec, err)
	}
	return k, key, nil
}

// admit checks the preconditions of k in order. Their error is returned as
// it is: it becomes the task's lastErrors message, which is for people; the
// log says which precondition it was.
func (c *Controller) admit(ctx context.Context, k *Handler, t *Task) error {
	for i, p := range k.Preconditions {
		if err := p.Check(ctx, t.DeepCopy()); err != nil {
			logr.FromContextOrDiscard(ctx).V(1).Info("opstask precondition failed", "task", t.Key(), "kind", k.Name, "precondition", i, "error", err.Error())
			return err
		}
	}
	return nil
}

// reject moves a pending task to Rejected.
func (c *Controller) reject(ctx context.Context, t *Task, now time.Time, code ErrorCode, msg string) error {
	runID := c.newRunID()
	if err := t.Status.Transition(TaskStateRejected, now, runID, "rejected: "+msg); err != nil {
		return err
	}
	t.Status.AddError(code, msg, now)
	if err := c.cfg.Store.UpdateStatus(ctx, t); err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			c.notify()
			return nil
		}
		return fmt.Errorf("opstask: reject task %s: %w", t.Key(), err)
	}
	logr.FromContextOrDiscard(ctx).Info("opstask task rejected", "task", t.Key(), "code", code, "reason", msg)
	c.recordFinished(t)
	return nil
}

// reserveSlot reserves an execution slot, if one is free, for a start or a
// takeover; launch turns the reservation into a running execution and
// releaseSlot gives it back.
func (c *Controller) reserveSlot() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.running)+c.reserved >= c.cfg.MaxConcurrent {
		return false
	}
	c.reserved++
	return true
}

func (c *Controller) releaseSlot() {
	c.mu.Lock()
	c.reserved--
	c.mu.Unlock()
}

// start claims a pending task (Pending → InProgress, guarded by its
// resourceVersion) and runs it in the slot reserved for it. The claim is the
// lease's first write, so it has the lease's deadline too: a claim that
// takes longer than 2/3 of the lease is given up, not run.
func (c *Controller) start(ctx context.Context, k *Handler, t *Task) error {
	runID := c.newRunID()
	started, err := t.startedWith()
	if err != nil {
		c.releaseSlot()
		return fmt.Errorf("opstask: start task %s: %w", t.Key(), err)
	}
	l := c.newLease(t, runID)
	err = l.write(ctx, func(t *Task, now time.Time) error {
		if err := t.Status.Transition(TaskStateInProgress, now, runID, "execution started"); err != nil {
			return err
		}
		// What a takeover checks the spec against (checkStartedWith):
		// written with the claim, guarded by the version the
		// preconditions were checked on.
		t.Status.StartedWith = started
		return nil
	})
	if err != nil {
		c.releaseSlot()
		if errors.Is(err, ErrLostClaim) {
			c.notify() // another controller got there first: look again
			return nil
		}
		return fmt.Errorf("opstask: start task %s: %w", t.Key(), err)
	}
	if err := c.hold(ctx, l); err != nil {
		c.releaseSlot()
		if errors.Is(err, ErrLostClaim) {
			c.notify()
			return nil
		}
		return fmt.Errorf("opstask: start task %s: %w", t.Key(), err)
	}
	c.launch(ctx, k, l, false)
	return nil
}

// hold puts the execution hold on the task of l, which l has just claimed,
// through l: the executor may run only while the task is held, so that a
// request to delete it leaves it at the head of its queue until the
// executor has returned. A hold that cannot be written leaves the claim to
// lapse (a lost claim triggers another Sync at once): no executor runs, and
// a controller takes the execution over after LeaseDuration. Errors wrap
// ErrLostClaim when the task changed or is gone.
func (c *Controller) hold(ctx context.Context, l *lease) error {
	if l.last().Held {
		return nil
	}
	return l.do(ctx, "hold", nil, func(ctx context.Context, t *Task) error {
		return c.cfg.Store.SetHeld(ctx, t, true)
	})
}

// release removes the execution hold from t, at its current version, once
// no executor of t can be running; a task whose deletion was requested is
// then deleted.
func (c *Controller) release(ctx context.Context, t *Task) error {
	if err := c.cfg.Store.SetHeld(ctx, t, false); err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			c.notify()
			return nil
		}
		return fmt.Errorf("opstask: release hold on task %s: %w", t.Key(), err)
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("opstask hold released", "task", t.Key(), "state", t.State(), "deleting", t.Deleting)
	return nil
}

// stopDeleted handles an InProgress task whose deletion was requested. Its
// target stays busy until the task is gone, and its hold is released only
// when no executor of it can be running: this controller stops its own
// execution (cause ErrDeleted) and releases the hold once the executor has
// returned; an execution by another controller is released when nobody
// wrote the task for LeaseDuration, as a takeover would be, since that
// controller's watchdog has canceled it by then. The task is never resumed.
func (c *Controller) stopDeleted(ctx context.Context, t *Task, now time.Time) (time.Time, error) {
	c.mu.Lock()
	r := c.running[t.Key()]
	returned := c.returned[t.Key()]
	c.mu.Unlock()
	if r != nil {
		r.stop(ErrDeleted) // the end of its run triggers another Sync
		return time.Time{}, nil
	}
	if !t.Held {
		// Held by someone else's finalizer only: nothing of ours to release.
		return time.Time{}, nil
	}
	if lo := t.Status.LastOperation; lo == nil || lo.RunID != returned {
		if expires := c.leaseExpiry(t, now); now.Before(expires) {
			return expires, nil
		}
		logr.FromContextOrDiscard(ctx).Info("opstask releasing a deleted task whose run stopped renewing", "task", t.Key())
	}
	return time.Time{}, c.release(ctx, t)
}

// checkForeign handles an InProgress task this controller does not run: it
// takes the execution over when nobody wrote the task for LeaseDuration, and
// fails it when its timeout has passed.
func (c *Controller) checkForeign(ctx context.Context, t *Task, now time.Time) (time.Time, error) {
	c.mu.Lock()
	if c.running[t.Key()] != nil {
		c.mu.Unlock()
		return time.Time{}, nil
	}
	c.mu.Unlock()
	if expires := c.leaseExpiry(t, now); now.Before(expires) {
		return expires, nil
	}
	if !c.reserveSlot() {
		return now.Add(c.cfg.RetryInterval), nil
	}
	prev := ""
	if t.Status.LastOperation != nil {
		prev = t.Status.LastOperation.RunID
	}
	k, _, err := c.kindAndKey(t)
	runID := c.newRunID()
	var fail error
	switch changed := checkStartedWith(t); {
	case changed != nil:
		// Before anything else: a kind or config put in since the start
		// is never resumed, whatever it is.
		fail = changed
	case err != nil:
		fail = err
	case c.deadline(k, t).Compare(now) <= 0:
		fail = WithCode(CodeTimeout, fmt.Errorf("%w: run %s stopped renewing and the timeout has passed", ErrTimeout, prev))
	case !k.Resumable:
		fail = WithCode(CodeInterrupted, fmt.Errorf("%w: run %s stopped renewing for %s", ErrInterrupted, prev, c.cfg.LeaseDuration))
	}
	if fail != nil {
		c.releaseSlot()
		if err := t.Status.Transition(TaskStateFailed, now, runID, fail.Error()); err != nil {
			return time.Time{}, err
		}
		t.Status.AddError(codeOf(fail, CodeInvalidSpec), fail.Error(), now)
		if err := c.cfg.Store.UpdateStatus(ctx, t); err != nil {
			if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
				c.notify()
				return time.Time{}, nil
			}
			return time.Time{}, fmt.Errorf("opstask: fail interrupted task %s: %w", t.Key(), err)
		}
		logr.FromContextOrDiscard(ctx).Info("opstask interrupted task failed", "task", t.Key(), "previousRun", prev, "reason", fail.Error())
		c.recordFinished(t)
		c.notify()
		return time.Time{}, nil
	}
	l := c.newLease(t, runID)
	err = l.write(ctx, func(t *Task, now time.Time) error {
		return t.Status.Progress(now, runID, fmt.Sprintf("resumed: run %s stopped renewing", prev))
	})
	if err != nil {
		c.releaseSlot()
		if errors.Is(err, ErrLostClaim) {
			c.notify()
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("opstask: take over task %s: %w", t.Key(), err)
	}
	if err := c.hold(ctx, l); err != nil {
		c.releaseSlot()
		if errors.Is(err, ErrLostClaim) {
			c.notify()
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("opstask: take over task %s: %w", t.Key(), err)
	}
	logr.FromContextOrDiscard(ctx).Info("opstask taking over interrupted execution", "task", t.Key(), "previousRun", prev, "run", runID)
	c.launch(ctx, k, l, true)
	return time.Time{}, nil
}

// deadline returns when t's execution times out.
func (c *Controller) deadline(k *Handler, t *Task) time.Time {
	d := c.cfg.DefaultTimeout
	if k.Timeout != nil {
		if kd, err := k.Timeout(t.DeepCopy()); err == nil && kd > 0 {
			d = kd
		}
	}
	start := t.CreationTimestamp
	if t.Status.StartedAt != nil {
		start = t.Status.StartedAt.Time
	}
	return start.Add(d)
}

// Expired is a finished task whose time-to-live has run out: Sync runs its
// kind's Cleanup and deletes it.
type Expired struct {
	Task *Task
	// FinishedAt is when the task reached its final state
	// (lastTransitionTime; its creation if it has none).
	FinishedAt time.Time
	// TTL is the time-to-live that applied: spec.ttlSecondsAfterFinished or
	// Config.DefaultTTL.
	TTL time.Duration
	// At is when the TTL ran out: TTL plus Config.ClockSkewTolerance after
	// the end of the second FinishedAt falls in (timestamps in Kubernetes
	// are truncated to the second, so the task may have finished up to a
	// second after FinishedAt).
	At time.Time
}

// DryRun returns the tasks that Sync would clean up and delete if it ran
// now, and why, without changing anything. Like Sync, it leaves out
// executed tasks whose kind is not registered in this controller.
func (c *Controller) DryRun(ctx context.Context) ([]Expired, error) {
	tasks, err := c.cfg.Store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("opstask: list tasks: %w", err)
	}
	now := c.cfg.Clock.Now()
	var out []Expired
	var errs []error
	for _, t := range tasks {
		if !t.State().Finished() || t.Deleting || !c.canClean(t) {
			continue
		}
		e, _, err := c.expiry(t, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e != nil {
			out = append(out, *e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task.Before(out[j].Task) })
	return out, errors.Join(errs...)
}

// expiresAt returns when the TTL of the finished task t runs out, as
// expiry judges it; a TTL expiry cannot read runs out at once, so that the
// Sync that acts on t reports the error.
func (c *Controller) expiresAt(t *Task) time.Time {
	at, _, _, err := c.ttlOf(t)
	if err != nil {
		return time.Time{}
	}
	return at
}

// ttlOf returns when the TTL of the finished task t runs out, when it
// finished, and its TTL.
func (c *Controller) ttlOf(t *Task) (at, finished time.Time, ttl time.Duration, err error) {
	ttl = c.cfg.DefaultTTL
	if t.Spec.TTLSecondsAfterFinished != nil {
		d, err := retention.Seconds(int64(*t.Spec.TTLSecondsAfterFinished))
		if err != nil {
			return time.Time{}, time.Time{}, 0, fmt.Errorf("opstask: task %s: spec.ttlSecondsAfterFinished: %w", t.Key(), err)
		}
		ttl = d
	}
	finished = t.Status.finishedAt()
	if finished.IsZero() {
		// A finished task without a transition time was written by
		// someone else; count from its creation rather than keep it forever.
		finished = t.CreationTimestamp
	}
	// Kubernetes truncates timestamps to the second: a task stamped
	// 10:00:00 may have finished at 10:00:00.9. Counting from the end of
	// the second makes the TTL never run out early (and up to a second
	// late). The tolerance covers a clock ahead of the finishing one's.
	return finished.Truncate(time.Second).Add(time.Second + c.cfg.ClockSkewTolerance + ttl), finished, ttl, nil
}

// expiry decides, for a finished task, whether its TTL has run out at now
// (a non-nil Expired) or when it will (next).
func (c *Controller) expiry(t *Task, now time.Time) (*Expired, time.Time, error) {
	at, finished, ttl, err := c.ttlOf(t)
	if err != nil {
		return nil, time.Time{}, err
	}
	var res retention.Result
	items := []retention.Item{{ID: t.Key(), Time: at.Add(-ttl)}}
	// A task is not a backup, and is judged alone: no guard keeps it.
	alone := retention.Options{AllowDeleteNewest: true}
	if err := alone.Evaluate(retention.TTL{After: ttl}, now, items, &res); err != nil {
		return nil, time.Time{}, err
	}
	if res.Decisions[0].Keep {
		return nil, res.Next, nil
	}
	return &Expired{Task: t, FinishedAt: finished, TTL: ttl, At: items[0].Time.Add(ttl)}, time.Time{}, nil
}

// cleanup deletes a finished task whose TTL ran out, after the kind's
// cleanup, and otherwise returns when it runs out. A cleanup is claimed like
// an execution: lastOperation Cleanup/InProgress with this controller's run
// ID, renewed through a lease (see lease) while Handler.Cleanup runs, so that
// of several controllers only one runs a task's cleanup at a time. Another
// controller's claim is taken over only when nobody wrote the task for
// LeaseDuration.
func (c *Controller) cleanup(ctx context.Context, t *Task, now time.Time) (time.Time, error) {
	e, next, err := c.expiry(t, now)
	if err != nil || e == nil {
		return next, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("task", t.Key())
	k := c.kinds[t.Kind()] // nil only for a rejected task: see canClean
	if k == nil || k.Cleanup == nil {
		if err := c.cfg.Store.Delete(ctx, t); err != nil {
			if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
				return time.Time{}, nil
			}
			return time.Time{}, fmt.Errorf("opstask: delete task %s: %w", t.Key(), err)
		}
		log.V(1).Info("opstask task deleted after its TTL", "state", t.State())
		return time.Time{}, nil
	}

	desc := "deleting what the task created"
	if lo := t.Status.LastOperation; cleanupClaimed(t) {
		// Another run's cleanup (this controller's own cleanups end before
		// the Sync that started them): it holds the task until nobody
		// wrote it for LeaseDuration.
		if expires := c.leaseExpiry(t, now); now.Before(expires) {
			return expires, nil
		}
		desc = fmt.Sprintf("resumed: cleanup run %s stopped renewing; deleting what the task created", lo.RunID)
	}
	runID := c.newRunID()
	l := c.newLease(t, runID)
	err = l.write(ctx, func(t *Task, now time.Time) error {
		return t.Status.Cleanup(now, LastOperationStateInProgress, runID, desc)
	})
	if err != nil {
		if errors.Is(err, ErrLostClaim) {
			c.notify() // another controller got there first: look again
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("opstask: begin cleanup of task %s: %w", t.Key(), err)
	}
	log = log.WithValues("run", runID)
	cleanCtx, cancel := context.WithCancelCause(ctx)
	stop := l.keep(ctx, cancel, func(t *Task, now time.Time) error {
		return t.Status.Cleanup(now, LastOperationStateInProgress, runID, desc)
	})
	err = k.Cleanup(cleanCtx, l.last())
	stop()
	cancel(nil)
	switch {
	case ctx.Err() != nil:
		// The controller stops: the claim lapses and another controller
		// (or this one, restarted) takes the cleanup over.
		return time.Time{}, ctx.Err()
	case l.isLost():
		log.Info("opstask cleanup abandoned: claim lost", "error", err)
		c.notify()
		return time.Time{}, nil
	case err != nil:
		werr := l.write(ctx, func(t *Task, now time.Time) error {
			if err := t.Status.Cleanup(now, LastOperationStateFailed, runID, err.Error()); err != nil {
				return err
			}
			t.Status.AddError(CodeCleanupFailed, err.Error(), now)
			return nil
		})
		if werr != nil && !errors.Is(werr, ErrLostClaim) {
			log.Error(werr, "opstask could not record failed cleanup")
		}
		log.Info("opstask cleanup failed; retrying", "error", err.Error())
		return c.cfg.Clock.Now().Add(c.cfg.RetryInterval), nil
	}
	if err := l.delete(ctx); err != nil {
		if errors.Is(err, ErrLostClaim) {
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("opstask: delete task %s: %w", t.Key(), err)
	}
	log.V(1).Info("opstask task deleted after its TTL and cleanup", "state", t.State())
	return time.Time{}, nil
}

// cleanupClaimed reports whether a run claims t's cleanup: its last
// operation is a Cleanup in progress.
func cleanupClaimed(t *Task) bool {
	lo := t.Status.LastOperation
	return t.State().Finished() && lo != nil && lo.Type == LastOperationTypeCleanup && lo.State == LastOperationStateInProgress
}

// leaseExpiry returns when the claim of another run on t lapses: LeaseDuration
// after this controller first saw t at its current version.
func (c *Controller) leaseExpiry(t *Task, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.observed[t.Key()]
	if !ok || o.rv != t.ResourceVersion {
		o = observation{rv: t.ResourceVersion, seenAt: now}
		c.observed[t.Key()] = o
	}
	return o.seenAt.Add(c.cfg.LeaseDuration)
}

// newRunID returns a fresh run ID.
func (c *Controller) newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if c.cfg.Identity != "" {
		id = c.cfg.Identity + "-" + id
	}
	return id
}
