package opstask

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// taskCache holds the tasks an Informer delivered, indexed so that a Sync
// reads only the tasks that can change state: the unfinished ones, the
// finished ones still held or in a cleanup (active), and the finished ones
// whose TTL has run out, found in a heap ordered by expiry. The heap's
// minimum is when the next finished task expires: Run's timer, instead of a
// rescan.
//
// A finished task that is neither active nor expiring soon, and one an
// Informer delivered with SetFinished, is kept by reference only (its
// identity and target; see Getter): a Sync reads it whole from the store
// when its TTL has run out.
type taskCache struct {
	expire    func(*Task) time.Time        // when a finished task's TTL runs out
	expireRef func(FinishedTask) time.Time // the same, of a task by reference
	// byRef reports whether to keep the finished, inactive task t, whose
	// TTL runs out at at, by reference only; nil: never.
	byRef func(t *Task, at time.Time) bool
	// cleanable reports whether the controller may clean up a finished
	// task of kind in state (see Controller.canClean).
	cleanable func(kind string, state TaskState) bool
	notify    func()

	mu      sync.Mutex
	ready   bool   // the current inform pass delivered every task
	pass    bool   // an inform pass runs
	gen     uint64 // the current inform pass
	tasks   map[string]*cacheEntry
	active  map[string]*cacheEntry
	expiry  expiryHeap
	invalid map[string]invalidTask
	targets map[metricTarget]int // tasks per target, for the metrics
	names   map[string]string    // targets kept by reference, interned
}

type cacheEntry struct {
	key string // namespace/name
	// t is the task; nil when it is kept by reference, by key and target
	// (and, when the controller cannot clean it up, by f, to report it).
	// No UID: the task is read before anything is done to it, and the
	// writes that follow carry the UID read.
	t      *Task
	target string
	f      *FinishedTask
	gen    uint64
	at     time.Time // finished and not active: when its TTL runs out
	idx    int       // its index in expiry; -1 when it is not there
}

// metricTarget returns the metric series the task of e counts in.
func (e *cacheEntry) metricTarget() metricTarget {
	if e.t != nil {
		return metricTarget{e.t.Namespace, e.t.Spec.Target}
	}
	ns, _, _ := strings.Cut(e.key, "/")
	return metricTarget{ns, e.target}
}

// taskRef names a task whose TTL ran out, kept by reference: a Sync reads
// it before it acts on it.
type taskRef struct{ namespace, name string }

type invalidTask struct {
	err error
	gen uint64
}

func newTaskCache(expire func(*Task) time.Time, expireRef func(FinishedTask) time.Time, byRef func(*Task, time.Time) bool,
	cleanable func(string, TaskState) bool, notify func()) *taskCache {
	return &taskCache{expire: expire, expireRef: expireRef, byRef: byRef, cleanable: cleanable, notify: notify, tasks: map[string]*cacheEntry{},
		active: map[string]*cacheEntry{}, invalid: map[string]invalidTask{}, targets: map[metricTarget]int{}, names: map[string]string{}}
}

var _ TaskEvents = (*taskCache)(nil)

// begin starts an inform pass: tasks not delivered again by its Synced are
// dropped then.
func (c *taskCache) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.ready, c.pass = false, true
}

// end marks the cache stale after an inform pass ended: Sync lists until
// the next pass has synced.
func (c *taskCache) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready, c.pass = false, false
}

// syncing reports whether an inform pass runs and has not delivered every
// task yet: Run waits for it rather than list.
func (c *taskCache) syncing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pass && !c.ready
}

func (c *taskCache) Set(t *Task) {
	c.mu.Lock()
	e := c.entryLocked(t.Key())
	e.t, e.f = t, nil
	if !t.State().Finished() || t.Held || cleanupClaimed(t) {
		c.active[e.key] = e
	} else {
		e.at = c.expire(t)
		if c.byRef != nil && c.byRef(t, e.at) {
			e.t, e.target = nil, c.intern(t.Spec.Target)
		}
		heap.Push(&c.expiry, e)
	}
	c.targets[e.metricTarget()]++
	c.mu.Unlock()
	c.notify()
}

func (c *taskCache) SetFinished(f FinishedTask) {
	c.mu.Lock()
	e := c.entryLocked(f.Namespace + "/" + f.Name)
	e.t, e.f, e.target = nil, nil, c.intern(f.Target)
	if !c.cleanable(f.Kind, f.State) {
		kept := f
		e.f = &kept
	}
	e.at = c.expireRef(f)
	heap.Push(&c.expiry, e)
	c.targets[e.metricTarget()]++
	c.mu.Unlock()
	c.notify()
}

// intern returns target, sharing the memory of an equal target already
// kept: a few targets serve many tasks.
func (c *taskCache) intern(target string) string {
	if s, ok := c.names[target]; ok {
		return s
	}
	c.names[target] = target
	return target
}

// entryLocked returns the entry of key, unindexed, for this pass.
func (c *taskCache) entryLocked(key string) *cacheEntry {
	e := c.tasks[key]
	if e == nil {
		e = &cacheEntry{key: key, idx: -1}
		c.tasks[key] = e
	} else {
		c.unindexLocked(e)
	}
	e.gen = c.gen
	delete(c.invalid, key)
	return e
}

func (c *taskCache) Invalid(namespace, name string, err error) {
	key := namespace + "/" + name
	c.mu.Lock()
	c.removeLocked(key)
	c.invalid[key] = invalidTask{err: err, gen: c.gen}
	c.mu.Unlock()
	c.notify()
}

func (c *taskCache) Gone(namespace, name string) {
	key := namespace + "/" + name
	c.mu.Lock()
	c.removeLocked(key)
	delete(c.invalid, key)
	c.mu.Unlock()
	c.notify()
}

func (c *taskCache) Synced() {
	c.mu.Lock()
	for key, e := range c.tasks {
		if e.gen != c.gen {
			c.removeLocked(key)
		}
	}
	for key, inv := range c.invalid {
		if inv.gen != c.gen {
			delete(c.invalid, key)
		}
	}
	c.ready = true
	c.mu.Unlock()
	c.notify()
}

func (c *taskCache) removeLocked(key string) {
	if e := c.tasks[key]; e != nil {
		c.unindexLocked(e)
		delete(c.tasks, key)
	}
}

func (c *taskCache) unindexLocked(e *cacheEntry) {
	mt := e.metricTarget()
	if c.targets[mt]--; c.targets[mt] <= 0 {
		delete(c.targets, mt)
		delete(c.names, mt.target) // at worst, a target is kept twice
	}
	delete(c.active, e.key)
	if e.idx >= 0 {
		heap.Remove(&c.expiry, e.idx)
	}
}

// snapshot returns copies of the tasks a Sync at now acts on, the
// references of those kept by reference whose TTL ran out (to be read
// first), and when the next finished task expires (zero: none). ok is false
// while the cache is not synced. A task the store could not read fails the
// Sync, as it fails a List.
func (c *taskCache) snapshot(now time.Time) (tasks []*Task, refs []taskRef, next time.Time, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return nil, nil, time.Time{}, false, nil
	}
	if len(c.invalid) > 0 {
		var errs []error
		for key, inv := range c.invalid {
			errs = append(errs, fmt.Errorf("task %s: %w", key, inv.err))
		}
		return nil, nil, time.Time{}, true, errors.Join(errs...)
	}
	tasks = make([]*Task, 0, len(c.active))
	for _, e := range c.active {
		tasks = append(tasks, e.t.DeepCopy())
	}
	// The expired tasks are the heap's nodes at or before now: a walk from
	// the root that stops below every later one visits only them and their
	// children.
	var walk func(i int)
	walk = func(i int) {
		if i >= len(c.expiry) {
			return
		}
		e := c.expiry[i]
		if e.at.After(now) {
			if next.IsZero() || e.at.Before(next) {
				next = e.at
			}
			return
		}
		switch {
		case e.t != nil:
			tasks = append(tasks, e.t.DeepCopy())
		case e.f != nil:
			// Not the controller's to clean up: only reported, which
			// needs no more than the reference.
			tasks = append(tasks, e.f.task())
		default:
			ns, name, _ := strings.Cut(e.key, "/")
			refs = append(refs, taskRef{namespace: ns, name: name})
		}
		walk(2*i + 1)
		walk(2*i + 2)
	}
	walk(0)
	return tasks, refs, next, true, nil
}

// hasTarget reports whether the cache holds a task of the target.
func (c *taskCache) hasTarget(mt metricTarget) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.targets[mt] > 0
}

// expiryHeap orders finished tasks by when their TTL runs out.
type expiryHeap []*cacheEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*cacheEntry)
	e.idx = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.idx = -1
	return e
}

// inform keeps the cache fed by the store's Informer until ctx is done,
// informing again from scratch a second after each failure. Its caller
// began the first pass (taskCache.begin), so that Run waits for it.
func (c *Controller) inform(ctx context.Context, inf Informer) {
	log := logr.FromContextOrDiscard(ctx)
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			c.cache.begin()
		}
		err := inf.Inform(ctx, c.cache)
		c.cache.end()
		if ctx.Err() != nil {
			return
		}
		log.V(1).Info("opstask inform ended; informing again", "error", err)
		c.notify()
		timer := c.cfg.Clock.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-timer.C():
		}
		timer.Stop()
	}
}
