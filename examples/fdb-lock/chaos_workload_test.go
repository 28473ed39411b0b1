package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/examples/fdb-lock/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/replicatest"
	"github.com/groundskeeper-io/groundskeeper/internal/tuple"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// The fdb-lock chaos workload: two replicas (leader election on) of each of
// several instances, one per lock ID, contending for the global lock in a
// ConfigMap; a generator that keeps creating Databases and changing their
// specs so that every instance has global steps to run; and the ground
// truth, recorded outside the system under test: every transaction on the
// lock store, as the linearizability checker of locking/locktest takes it,
// and every global operation's start and end.

// lockWorld is where the workload runs.
type lockWorld struct {
	direct client.Client // the test's own: no faults
	config *rest.Config  // the same, for the replicas when there are no proxies
	ns     string
	// replicaConfig is the API server config of replica slot i, and the
	// proxy it goes through (nil: no faults on it). On the kubernetes lock
	// backend the replica reaches its lock store, a ConfigMap, through it
	// too.
	replicaConfig func(i int) (*rest.Config, *faultproxy.Proxy)
	// etcdEndpoint is the etcd client URL of replica slot i, for the etcd
	// lock backend; etcdPrefix is the lock's key prefix there.
	etcdEndpoint func(i int) string
	etcdPrefix   string
}

// lockOptions tune the workload; the zero value of plant is the real thing.
type lockOptions struct {
	// ids are the instances' lock IDs; each runs two replicas.
	ids []string
	// backend is the lock backend: kubernetes (a ConfigMap) or etcd.
	backend string
	// lockDuration is the lock's Duration, actionDuration how long a global
	// operation takes.
	lockDuration, actionDuration time.Duration
	// maxDatabases bounds the Databases that exist at once.
	maxDatabases int
	// plant breaks one instance on purpose, for the checker's tests.
	plant plant
	log   logr.Logger
}

// plant is a planted bug in the instance plant.id: a wrapper of its lock
// backend (around the recorded one, so that the ground truth is the store's
// own), a clock offset, a wrapper of its actor. Test-only: nothing in the
// controller can switch them on.
type plant struct {
	id      string
	backend func(locking.Backend) locking.Backend
	skew    time.Duration
	actor   func(actor) actor
}

// The lock store's keys, which the recorder reads transactions by: the
// default prefix, which the controller uses.
var (
	globalKey  = []byte(locking.DefaultPrefix + "/global")
	denyPrefix = []byte(locking.DefaultPrefix + "/denyList/")
)

// history is the ground truth about the lock: what the store did, in
// locktest's form, and when each global operation ran.
type history struct {
	mu      sync.Mutex
	ops     []locktest.Op
	steps   []step
	clients int // replica runs so far: each is a porcupine client
	// unclassified counts transactions whose error locktest.Classify does
	// not know (a killed replica's cancelled context, mostly): recorded as
	// unknown if they wrote, as unavailable if not.
	unclassified int
	// concurrent counts transactions that overlapped on one replica, whose
	// clock readings are therefore unreliable; the checker reports them.
	concurrent int
}

// step is one global operation, as the actor saw it.
type step struct {
	client     int // the replica run, as in the lock history
	id         string
	replica    string
	operation  string
	start, end time.Time
	err        error
}

func (h *history) newClient() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients++
	return h.clients
}

// recordingClock is a replica's lock clock: the real clock, shifted by
// offset (a planted bug), which remembers its last reading, so that the
// recorder learns the time the lock decided a transaction on (as
// locktest's Hammer does). Its timers are the real clock's: a shift does
// not change a duration.
type recordingClock struct {
	clock.RealClock
	offset time.Duration
	last   atomic.Int64
}

func (c *recordingClock) Now() time.Time {
	now := time.Now().Add(c.offset)
	c.last.Store(now.UnixNano())
	return now
}

func (c *recordingClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// recordedBackend records every transaction on the store it wraps as one
// operation of locktest's history: its kind, told from what it read and
// wrote (a Take reads its own deny-list key first; a Release clears the
// lock key or is refused with ErrNotHeld; anything else is a Holder read),
// its result, the record it wrote or was refused on, and the lock clock's
// reading it decided on. Every attempt of the Lock's retries is an
// operation of its own, which the model allows: a conflict changes
// nothing.
//
// One replica runs one reconcile at a time, so its transactions do not
// overlap and the clock's last reading is the transaction's; an overlap is
// counted, and the checker reports it.
type recordedBackend struct {
	locking.Backend
	h        *history
	client   int
	id       string
	lease    time.Duration
	clk      *recordingClock
	inflight atomic.Int32
}

func (b *recordedBackend) Update(ctx context.Context, fn func(locking.Txn) error) error {
	if b.inflight.Add(1) > 1 {
		b.h.mu.Lock()
		b.h.concurrent++
		b.h.mu.Unlock()
	}
	defer b.inflight.Add(-1)
	var tx *recordedTxn
	b.clk.last.Store(0)
	call := time.Now()
	err := b.Backend.Update(ctx, func(inner locking.Txn) error {
		tx = &recordedTxn{Txn: inner}
		return fn(tx)
	})
	op := locktest.Op{Client: b.client, ID: b.id, Lease: int64(b.lease), Now: b.clk.last.Load(),
		Call: call.UnixNano(), Return: time.Now().UnixNano()}
	if tx == nil {
		tx = &recordedTxn{} // failed before fn ran: nothing read or written
	}
	unclassified := tx.describe(&op, err)
	b.h.mu.Lock()
	b.h.ops = append(b.h.ops, op)
	if unclassified {
		b.h.unclassified++
	}
	b.h.mu.Unlock()
	return err
}

// recordedTxn passes a transaction through and notes what it read of the
// lock key and the deny list, and what it wrote to the lock key.
type recordedTxn struct {
	locking.Txn
	mu        sync.Mutex
	first     []byte // the first key read
	read      []byte // the lock key's value, as read
	readFound bool
	readDone  bool
	set       []byte // written to the lock key
	cleared   bool
}

func (t *recordedTxn) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	v, ok, err := t.Txn.Get(ctx, key)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first == nil {
		t.first = slices.Clone(key)
	}
	if err == nil && string(key) == string(globalKey) && !t.readDone && t.set == nil && !t.cleared {
		t.read, t.readFound, t.readDone = slices.Clone(v), ok, true
	}
	return v, ok, err
}

func (t *recordedTxn) Set(key, value []byte) error {
	t.mu.Lock()
	if string(key) == string(globalKey) {
		t.set, t.cleared = slices.Clone(value), false
	}
	t.mu.Unlock()
	return t.Txn.Set(key, value)
}

func (t *recordedTxn) Clear(key []byte) error {
	t.mu.Lock()
	if string(key) == string(globalKey) {
		t.set, t.cleared = nil, true
	}
	t.mu.Unlock()
	return t.Txn.Clear(key)
}

// describe fills op's kind, result and record from what the transaction
// did and what Update returned, and says whether the error was one
// locktest.Classify does not know.
func (t *recordedTxn) describe(op *locktest.Op, err error) (unclassified bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	wrote := t.set != nil || t.cleared
	switch {
	case t.set != nil:
		op.Kind = "take"
	case t.cleared:
		op.Kind = "release"
	case t.first != nil && strings.HasPrefix(string(t.first), string(denyPrefix)):
		op.Kind = "take"
	case errors.Is(err, locking.ErrNotHeld):
		op.Kind = "release"
	default:
		op.Kind = "holder" // what a Release of an absent record also is
	}
	if err != nil {
		if cerr := locktest.Classify(op, err); cerr != nil {
			// A killed replica's context, mostly: what wrote may have
			// committed.
			unclassified = true
			op.Result, op.Err = "unavailable", err.Error()
			if wrote {
				op.Result, op.Return = "unknown", math.MaxInt64
			}
		}
		if op.Result == "unknown" && !wrote {
			// A transaction that wrote nothing changed nothing.
			op.Result, op.Return = "unavailable", time.Now().UnixNano()
		}
		return unclassified
	}
	op.Result = "ok"
	read, readOK := decodeLock(t.read, t.readFound)
	switch op.Kind {
	case "take":
		w, _ := decodeLock(t.set, true)
		op.Holder, op.Start, op.End = w.holder, w.start, w.end
		switch {
		case !readOK:
			op.Outcome = "Taken"
		case read.holder == op.ID && read.start == w.start:
			op.Outcome = "Extended"
		case read.holder == op.ID:
			op.Outcome = "Taken"
		default:
			op.Outcome, op.Previous = "TakenOver", read.holder
		}
	case "holder":
		op.Present = readOK
		if readOK {
			op.Holder, op.Start, op.End = read.holder, read.start, read.end
		}
	}
	return false
}

type lockRecord struct {
	holder     string
	start, end int64
}

// decodeLock decodes a stored lock record, tuple{lockID, start, end}; ok
// is false for an absent or undecodable one (a corrupt record makes the
// Lock fail, so a successful transaction never read one).
func decodeLock(v []byte, found bool) (lockRecord, bool) {
	if !found {
		return lockRecord{}, false
	}
	t, err := tuple.Unpack(v)
	if err != nil || len(t) < 3 {
		return lockRecord{}, false
	}
	holder, ok1 := t[0].(string)
	start, ok2 := t[1].(int64)
	end, ok3 := t[2].(int64)
	return lockRecord{holder, start, end}, ok1 && ok2 && ok3
}

// stallingActor makes one operation in ten last twice the lock's duration,
// as a slow or stuck database command would: the step's context, which ends
// with its lease, must cut it short before the lock can pass to another
// instance. (The failed loop is retried at once and extends the lock
// again, so stalls do not cause take-overs: those come from a holder
// killed or cut off.) Load, not a bug: the lease is there for exactly
// this.
type stallingActor struct {
	next  actor
	stall time.Duration
	mu    sync.Mutex
	rng   *rand.Rand
}

func (a *stallingActor) Act(ctx context.Context, instance, operation string) error {
	a.mu.Lock()
	stall := a.rng.IntN(10) == 0
	a.mu.Unlock()
	if !stall {
		return a.next.Act(ctx, instance, operation)
	}
	return logAndWait{a.stall}.Act(ctx, instance, operation+" (stalled)")
}

// recordedActor records each global operation's start and end, around the
// actor that carries it out.
type recordedActor struct {
	next    actor
	h       *history
	client  int
	replica string
}

func (a recordedActor) Act(ctx context.Context, instance, operation string) error {
	start := time.Now()
	err := a.next.Act(ctx, instance, operation)
	s := step{client: a.client, id: instance, replica: a.replica, operation: operation, start: start, end: time.Now(), err: err}
	a.h.mu.Lock()
	a.h.steps = append(a.h.steps, s)
	a.h.mu.Unlock()
	return err
}

// dbTruth is what the generator asked of one Database.
type dbTruth struct {
	name    string
	uid     types.UID
	spec    DatabaseSpec // the last spec written
	asked   time.Time    // when it was written
	deleted bool
}

type lockWorkload struct {
	w        lockWorld
	o        lockOptions
	seed     uint64
	h        history
	replicas *chaos.Replicas

	mu      sync.Mutex
	dbs     []*dbTruth // in creation order
	stopped time.Time  // when the generator stopped
}

func newLockWorkload(w lockWorld, o lockOptions, seed uint64) *lockWorkload {
	g := &lockWorkload{w: w, o: o, seed: seed}
	g.replicas = &chaos.Replicas{N: 2 * len(o.ids), Config: g.replicaConfig, Run: g.runManager, Log: o.log}
	return g
}

func (g *lockWorkload) replicaConfig(i int) (*rest.Config, *faultproxy.Proxy) {
	if g.w.replicaConfig == nil {
		return g.w.config, nil
	}
	return g.w.replicaConfig(i)
}

// runManager runs replica slot i, of instance ids[i/2], until ctx ends or
// it exits: the controller as main builds it, on the slot's connections to
// the API server and (with the etcd backend) to etcd, with its lock
// backend and actor recorded.
func (g *lockWorkload) runManager(ctx context.Context, cfg *rest.Config, i int) error {
	id := g.o.ids[i/2]
	replica := fmt.Sprintf("%s-%d", id, i%2)
	log := g.o.log.WithValues("replica", replica)
	clk := &recordingClock{}
	planted := g.o.plant.id == id
	if planted {
		clk.offset = g.o.plant.skew
	}
	o := controllerOptions{
		lockID: id, lockURL: "configmap://" + g.w.ns + "/fdb-lock-global",
		lockDuration: g.o.lockDuration, actionDuration: g.o.actionDuration,
		deniedRetry: time.Second, clock: clk,
	}
	if g.o.backend == "etcd" {
		o.lockURL = etcdURL([]string{g.w.etcdEndpoint(i)}, g.w.etcdPrefix)
	}
	store, closer, err := openBackend(ctx, o, cfg)
	if err != nil {
		return err
	}
	defer closer.Close()
	client := g.h.newClient()
	var backend locking.Backend = &recordedBackend{Backend: store, h: &g.h, client: client, id: id, lease: g.o.lockDuration, clk: clk}
	var act actor = &stallingActor{next: logAndWait{g.o.actionDuration}, stall: 2 * g.o.lockDuration,
		rng: rand.New(rand.NewPCG(g.seed, uint64(client)))}
	if planted && g.o.plant.backend != nil {
		backend = g.o.plant.backend(backend)
	}
	if planted && g.o.plant.actor != nil {
		act = g.o.plant.actor(act)
	}
	act = recordedActor{next: act, h: &g.h, client: client, replica: replica}
	flags := kubecmd.Flags{Namespace: g.w.ns, LeaderElect: true}
	mgr, err := newManager(cfg, &flags, o, backend, act, replicatest.CrashOptions(log))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// generate creates Databases and changes their specs until ctx ends: a new
// version (every instance bounces its processes: they all contend for the
// lock), a coordinator count, an excluded process, and now and then a
// deletion.
func (g *lockWorkload) generate(ctx context.Context, ops *chaos.Ops) error {
	rng := rand.New(rand.NewPCG(g.seed, 0x66646c))
	defer func() {
		g.mu.Lock()
		g.stopped = time.Now()
		g.mu.Unlock()
	}()
	for ctx.Err() == nil {
		live := g.live()
		var err error
		switch n := rng.IntN(20); {
		case len(live) == 0 || (n < 4 && len(live) < g.o.maxDatabases):
			err = g.create(ops)
		case n < 5 && len(live) > 2:
			err = g.delete(live[rng.IntN(len(live))], ops)
		default:
			db := live[rng.IntN(len(live))]
			g.mu.Lock()
			spec := *db.spec.DeepCopy()
			g.mu.Unlock()
			kind := "change version"
			switch m := rng.IntN(10); {
			case m < 6:
				v := 1
				fmt.Sscanf(spec.Version, "v%d", &v)
				spec.Version = fmt.Sprintf("v%d", v+1)
			case m < 8:
				kind = "change coordinators"
				spec.Coordinators = 3 + 2*rng.IntN(3)
			default:
				kind = "exclude a process"
				spec.ExcludedProcesses = append(spec.ExcludedProcesses, fmt.Sprintf("%s-storage-%d", g.o.ids[rng.IntN(len(g.o.ids))], len(spec.ExcludedProcesses)))
			}
			err = g.setSpec(db, spec, kind, ops)
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(700+rng.IntN(1300)) * time.Millisecond):
		}
	}
	return nil
}

// live returns the Databases not deleted.
func (g *lockWorkload) live() []*dbTruth {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*dbTruth
	for _, d := range g.dbs {
		if !d.deleted {
			out = append(out, d)
		}
	}
	return out
}

func (g *lockWorkload) create(ops *chaos.Ops) error {
	g.mu.Lock()
	d := &dbTruth{name: fmt.Sprintf("db-%d", len(g.dbs)), spec: DatabaseSpec{Version: "v1", Coordinators: 3}, asked: time.Now()}
	g.dbs = append(g.dbs, d)
	g.mu.Unlock()
	obj := &Database{ObjectMeta: metav1.ObjectMeta{Namespace: g.w.ns, Name: d.name}, Spec: d.spec}
	var uid types.UID
	err := chaos.Retry(func(ctx context.Context) error {
		c := obj.DeepCopy()
		err := g.w.direct.Create(ctx, c)
		if apierrors.IsAlreadyExists(err) { // an earlier attempt was applied
			err = g.w.direct.Get(ctx, client.ObjectKeyFromObject(obj), c)
		}
		uid = c.UID
		return err
	})
	if err != nil {
		return fmt.Errorf("create database %s: %w", d.name, err)
	}
	g.mu.Lock()
	d.uid = uid
	g.mu.Unlock()
	ops.Add("create database")
	return nil
}

// setSpec writes spec as the Database's whole spec: idempotent, so that a
// retry after an answer lost in a fault does no harm.
func (g *lockWorkload) setSpec(d *dbTruth, spec DatabaseSpec, kind string, ops *chaos.Ops) error {
	g.mu.Lock()
	d.spec, d.asked = spec, time.Now()
	uid := d.uid
	g.mu.Unlock()
	err := chaos.Retry(func(ctx context.Context) error {
		var db Database
		if err := g.w.direct.Get(ctx, client.ObjectKey{Namespace: g.w.ns, Name: d.name}, &db); err != nil {
			return err
		}
		if db.UID != uid {
			return fmt.Errorf("database %s has uid %s, not its own %s", d.name, db.UID, uid)
		}
		db.Spec = *spec.DeepCopy()
		return g.w.direct.Update(ctx, &db)
	})
	if err != nil {
		return fmt.Errorf("%s of database %s: %w", kind, d.name, err)
	}
	ops.Add(kind)
	return nil
}

func (g *lockWorkload) delete(d *dbTruth, ops *chaos.Ops) error {
	g.mu.Lock()
	d.deleted, d.asked = true, time.Now()
	uid := d.uid
	g.mu.Unlock()
	err := chaos.Retry(func(ctx context.Context) error {
		obj := &Database{ObjectMeta: metav1.ObjectMeta{Namespace: g.w.ns, Name: d.name}}
		return client.IgnoreNotFound(g.w.direct.Delete(ctx, obj, client.Preconditions{UID: &uid}))
	})
	if err != nil {
		return fmt.Errorf("delete database %s: %w", d.name, err)
	}
	ops.Add("delete database")
	return nil
}

// pending lists what the generator asked that the status does not show
// yet, from a fresh list of the Databases; empty means every change was
// done.
func (g *lockWorkload) pending(ctx context.Context) ([]string, error) {
	var list api.DatabaseList
	if err := g.w.direct.List(ctx, &list, client.InNamespace(g.w.ns)); err != nil {
		return nil, err
	}
	byName := map[string]*Database{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, d := range g.dbs {
		if d.deleted {
			continue
		}
		db := byName[d.name]
		if db == nil || db.UID != d.uid {
			out = append(out, fmt.Sprintf("database %s (uid %s) is gone", d.name, d.uid))
			continue
		}
		if missing := undone(d.spec, db.Status, g.o.ids); len(missing) > 0 {
			out = append(out, fmt.Sprintf("database %s, asked at %s: %s", d.name, ts(d.asked), strings.Join(missing, ", ")))
		}
	}
	return out, nil
}

// undone says what of spec the status does not show, for instances ids.
func undone(spec DatabaseSpec, st DatabaseStatus, ids []string) []string {
	var out []string
	if spec.Coordinators != st.Coordinators {
		out = append(out, fmt.Sprintf("%d coordinators, not %d", st.Coordinators, spec.Coordinators))
	}
	for _, p := range spec.ExcludedProcesses {
		if !slices.Contains(st.ExcludedProcesses, p) {
			out = append(out, p+" not excluded")
		}
	}
	for _, id := range ids {
		if v := st.RunningVersions[id]; v != spec.Version {
			out = append(out, fmt.Sprintf("%s runs %q, not %s", id, v, spec.Version))
		}
	}
	return out
}

// settled: every change asked has been done.
func (g *lockWorkload) settled(ctx context.Context) error {
	p, err := g.pending(ctx)
	if err != nil {
		return err
	}
	if len(p) > 0 {
		return fmt.Errorf("%d databases not done: %s", len(p), strings.Join(p[:min(len(p), 3)], "; "))
	}
	return nil
}

func ts(t time.Time) string { return t.Format("15:04:05.000") }
