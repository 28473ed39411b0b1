package opstask

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// syncWorkers bounds the queues and expired tasks a Sync acts on at once.
const syncWorkers = 8

// refHorizon: a finished task whose TTL runs out sooner than this after the
// controller learns of it is kept whole, the others by reference (see
// Getter), so that a task with a short TTL costs no extra read.
const refHorizon = time.Minute

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
		var byRef func(*Task, time.Time) bool
		if _, ok := cfg.Store.(Getter); ok {
			byRef = func(t *Task, at time.Time) bool {
				return !t.Deleting && c.canClean(t) && at.After(c.cfg.Clock.Now().Add(refHorizon))
			}
		}
		c.cache = newTaskCache(c.expiresAt, c.refExpiresAt, byRef, c.canCleanKind, c.notify)
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
// change state from the controller's copy, and from the store only, with
// Get, the finished tasks the copy keeps by reference whose TTL ran out
// (see Getter); otherwise it lists every task. Executions run in goroutines under ctx: canceling it stops them as
// Run's shutdown does. It returns when the next Sync is due
// because of time alone (0: none), and the first error. Run calls it; it is
// exported for tests and for callers with their own loop.
func (c *Controller) Sync(ctx context.Context) (time.Duration, error) {
	c.mu.Lock()
	seq := c.metricSeq
	c.mu.Unlock()
	now := c.cfg.Clock.Now()
	tasks, refs, expires, live, err := c.read(ctx, now)
	if err != nil {
		return 0, err
	}
	c.forgetMetricTargets(live, seq, c.cfg.Clock.Now())
	now = c.cfg.Clock.Now()
	c.forgetObservations(tasks)
	// Queues are independent, and so are expired tasks: act on them
	// concurrently, so that a Sync costs a few write latencies, not one per
	// queue.
	jobs := c.queueJobs(ctx, tasks, now)
	finished, withoutKind := c.finishedJobs(ctx, tasks, now)
	jobs = append(jobs, finished...)
	jobs = append(jobs, c.refJobs(ctx, refs, now)...)
	c.reportWithoutKind(ctx, withoutKind, now)
	next, err := runJobs(jobs)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if !expires.IsZero() && (next.IsZero() || expires.Before(next)) {
		next = expires
	}
	var d time.Duration
	if !next.IsZero() {
		d = next.Sub(now)
		if d <= 0 {
			d = time.Nanosecond
		}
	}
	return d, err
}

// read returns the tasks a Sync at now acts on, the references of the
// finished tasks kept by reference whose TTL ran out, when the next finished
// task not among them expires (zero: unknown or none), and which metric
// targets have tasks. From the cache when it is synced, they are the tasks
// that can change state (see taskCache); otherwise every task, by List.
func (c *Controller) read(ctx context.Context, now time.Time) ([]*Task, []taskRef, time.Time, func(metricTarget) bool, error) {
	if c.cache != nil {
		tasks, refs, next, ok, err := c.cache.snapshot(now)
		if err != nil {
			return nil, nil, time.Time{}, nil, fmt.Errorf("opstask: read tasks: %w", err)
		}
		if ok {
			return tasks, refs, next, c.cache.hasTarget, nil
		}
	}
	tasks, err := c.cfg.Store.List(ctx)
	if err != nil {
		return nil, nil, time.Time{}, nil, fmt.Errorf("opstask: list tasks: %w", err)
	}
	live := make(map[metricTarget]bool, len(tasks))
	for _, t := range tasks {
		live[metricTarget{t.Namespace, t.Spec.Target}] = true
	}
	return tasks, nil, time.Time{}, func(mt metricTarget) bool { return live[mt] }, nil
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

// Claimed reports when the last write that confirmed this controller's
// claim on the task with key (namespace/name) started, while it runs the
// task's execution; false when it runs none, or has given its claim up.
// The claim's watchdog counts from that instant.
//
// A write through a claim lands in the store a moment before the
// controller counts it. A test that steps a fake clock past a renewal must
// first wait until Claimed reports a time no earlier than the task's
// status.lastOperation.lastUpdateTime: stepped earlier, the clock may
// reach the claim's deadline before the renewal is counted, and the
// controller then gives the claim up as if the renewal had never been
// written. On a real clock the renewal is counted a third of the lease
// before its deadline.
func (c *Controller) Claimed(key string) (time.Time, bool) {
	c.mu.Lock()
	r := c.running[key]
	c.mu.Unlock()
	if r == nil {
		return time.Time{}, false
	}
	l := r.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return time.Time{}, false
	}
	return l.confirmedAt, true
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
