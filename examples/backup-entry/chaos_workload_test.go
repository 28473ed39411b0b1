package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/replicatest"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// The backup-entry chaos workload: replicas of the controller with leader
// election, a generator of BackupBuckets (on GCS, S3 and Azure, some with
// a small spec.maxEntries) and of BackupEntries that it fills with data,
// deletes with the grace period or forced, and whose buckets it sometimes
// deletes; entries placed by a pool that grows and shrinks, entries that
// migrate from legacy prefixes (or name a shared bucket as their source,
// which must be refused), and a second installation of the controller
// whose pool has the same name and writes into the same store
// (chaos_pool_test.go); and the ground truth the generator records,
// outside the system under test, for the checker.

// beStore is one object store the BackupBuckets of the workload live in.
type beStore struct {
	// kind names the store in reports: "gcs", "s3", "abs".
	kind string
	// direct is the store's bucket, opened without faults (restarts of the
	// store itself still hit it).
	direct *blob.Bucket
	// url is the spec.url of a BackupBucket whose keys are under prefix,
	// as the controller reaches the store (through its proxy, if any).
	url func(prefix string) string
	// secret names the credentials Secret, in the workload's namespace.
	secret string
	// keys lists the whole bucket over time.
	keys *chaos.KeyHistory
	// bucket is the store bucket's name (S3), for the URLs the generator
	// spells itself: migrations' sources.
	bucket string
	// since is when keys started listing.
	since time.Time
}

// beWorld is where the workload runs.
type beWorld struct {
	direct *rest.Config // the test's own: no faults
	ns     string
	// runID starts the name of every cluster-scoped object of the run:
	// on a shared control plane the resources of other tests are visible.
	runID  string
	stores []*beStore
	// secrets are the credentials Secrets the stores name, created in ns.
	secrets []*corev1.Secret
	// replicaConfig is the API server config of replica slot i, and the
	// proxy it goes through (nil: no faults on it).
	replicaConfig func(i int) (*rest.Config, *faultproxy.Proxy)
	// pool, if set, is a pool of BackupBuckets on S3 that the controller
	// grows for the entries that name no bucket, and shrinks.
	pool *bePool
	// legacy, if set, is the S3 bucket of the migrations' legacy
	// prefixes, which no BackupBucket names.
	legacy *beStore
	// installation is the controller's --installation; "" is the UID of
	// kube-system.
	installation string
}

// beOptions tune the workload; the zero value of wrap is the real
// controller.
type beOptions struct {
	// replicas of the controller; 2 as deployed.
	replicas int
	// grace is the controller's deletion grace period.
	grace time.Duration
	// bound is the liveness bound: how long after an entry's prefix may be
	// deleted, or after the faults stopped if later, it and its entry may
	// still exist.
	bound time.Duration
	// wrap wraps the controller's API access: a scope for tests on a
	// shared control plane, or a planted bug.
	wrap clientWrap
	log  logr.Logger
	// label names a second installation in the operations and
	// violations ("installation 2"); "" for the first.
	label string
	// slower makes the pauses between the generator's operations that
	// many times as long (default 1): a second installation is there for
	// its pool's store buckets, not for load.
	slower int
	// deletes is how the generator deletes entries: default some of
	// those admitted for 2 s, keeping three.
	deletes deletePolicy
	// migrateOneIn makes one in that many new entries migrate, when the
	// world has a legacy store; default 4.
	migrateOneIn int
	// entries starts the names of the entries after the run's ID:
	// "<runID>--<entries>-<n>"; default "e". Two installations whose
	// entries have one name in one store bucket refuse the second
	// (PrefixTaken); a planted bug of the buckets' ownership is clearer
	// without that.
	entries string
}

// deletePolicy is how the generator picks the entries it deletes.
type deletePolicy int

const (
	// deleteSome deletes entries admitted for 2 s (and now and then one
	// that is not), and keeps three.
	deleteSome deletePolicy = iota
	// deleteNone never deletes an entry: all its data must stay.
	deleteNone
	// deleteSoon deletes any entry placed in a bucket, admitted or not,
	// and keeps none: its buckets empty often.
	deleteSoon
)

// bucketTruth is what the generator did with one BackupBucket.
type bucketTruth struct {
	name   string
	store  *beStore
	prefix string // its keys' prefix in the store: "bb-<n>/"
	max    int    // spec.maxEntries
	uid    types.UID
	// deleteSent is when the generator first sent its deletion; zero: kept.
	deleteSent time.Time
	entries    []*entryTruth
	// pool says that it is a pool's bucket, learned from an entry placed
	// in it: the pool's first, which the generator made, or one the
	// controller made. The generator never deletes it; the pool deletes
	// the ones it made, and their store buckets, once empty.
	pool bool
}

// entryTruth is what the generator did with one BackupEntry.
type entryTruth struct {
	name string
	// bucket is the bucket it names; for an entry of the pool, nil until
	// the generator reads where the pool placed it.
	bucket *bucketTruth
	// pool says that it names no bucket: the pool places it.
	pool bool
	// migration, if set, is its spec.migrateFrom.
	migration *migrationTruth
	uid       types.UID
	// admittedSeen is when the generator first read status.prefix; only
	// then does it write data under the prefix, as a cluster's backups do.
	admittedSeen time.Time
	// refusedSeen says the generator read it refused for a full bucket
	// (before it was admitted, if it was).
	refusedSeen bool
	data        []string // store keys it wrote under the prefix
	lookalikes  []string // store keys beside the prefix: never to be deleted
	// deleteSent and forceSent are when the generator first sent the
	// deletion and the force annotation; zero: not done.
	deleteSent, forceSent time.Time
	forceLater            time.Time // when to force a deletion under way
	// deletionTS is the entry's deletionTimestamp, read after the deletion.
	deletionTS time.Time
	// prefixAtDelete says that status.prefix was set when the entry was
	// deleted, as far as a read after the deletion or the audit's last
	// state of it showed.
	prefixAtDelete bool
}

// storePrefix is the entry's prefix in its store.
func (e *entryTruth) storePrefix() string { return e.bucket.prefix + e.name + "/" }

// protected says whether the entry's prefix has its grace period: it was
// admitted (status.prefix set) when deleted. An entry without status.prefix
// has nothing to keep and goes at once, marker and all.
func (e *entryTruth) protected() bool { return !e.admittedSeen.IsZero() || e.prefixAtDelete }

// allowedFrom is when the entry's prefix may first be deleted: its
// deletionTimestamp plus the grace period, or its deletion when forced or
// never admitted; zero when it may not (not deleted).
func (e *entryTruth) allowedFrom(grace time.Duration) time.Time {
	if e.deleteSent.IsZero() {
		return time.Time{}
	}
	if !e.protected() {
		return e.deleteSent
	}
	// The deletionTimestamp is in seconds and set once the API server
	// handles the request: never before the second the request was sent.
	at := e.deleteSent.Truncate(time.Second).Add(grace)
	if !e.deletionTS.IsZero() {
		at = e.deletionTS.Add(grace)
	}
	if !e.forceSent.IsZero() {
		if forced := maxTime(e.forceSent, e.deleteSent); forced.Before(at) {
			at = forced
		}
	}
	return at
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// beTruth is what the generator did.
type beTruth struct {
	mu      sync.Mutex
	buckets []*bucketTruth
	entries map[string]*entryTruth
	order   []*entryTruth // in creation order
	stopped time.Time     // when the workload stopped
}

// finalizerCheck is what the store held under an entry's prefix when the
// audit saw the entry gone, its finalizer removed.
type finalizerCheck struct {
	entry string
	seen  time.Time
	keys  []string
	err   error
}

// quotaBreach is a set of an entry-limited bucket's prefixes that all
// existed at once, more than its spec.maxEntries.
type quotaBreach struct {
	bucket   string
	max      int
	prefixes []string
	from, to time.Time
}

type beWorkload struct {
	w           beWorld
	o           beOptions
	seed        uint64
	truth       beTruth
	entryAudit  *chaos.DeleteAudit
	bucketAudit *chaos.DeleteAudit
	cl          client.Client // direct
	replicas    *chaos.Replicas
	// ctx ends with the run: the key histories of the pool's store
	// buckets list until then.
	ctx context.Context
	// peer is a second installation that runs beside this one (the first),
	// with a replica of its own and no faults.
	peer *beWorkload

	hooks      sync.WaitGroup
	mu         sync.Mutex
	finalizers []finalizerCheck
	breaches   []quotaBreach
	quotaLists int
	// lostWrites are the writes under an admitted entry's prefix that
	// found its pool's store bucket gone.
	lostWrites []string

	storesMu sync.Mutex
	// poolStores are the pool's store buckets the generator saw entries
	// placed in, by name.
	poolStores map[string]*beStore
	legacySeq  int // guarded by truth.mu
	// dataDeleted are the kinds of store (s3, gcs, abs, pool) where an
	// entry with data was sent for deletion (guarded by truth.mu): until
	// one of a kind is, the generator writes to and deletes entries of
	// that kind first, so that a run on a loaded machine, which makes
	// fewer operations, still deletes keys in every kind of store.
	dataDeleted map[string]bool
}

// newBEWorkload starts the audits (before anything is created), the key
// histories and the quota sampler, and creates the credentials Secrets.
func newBEWorkload(ctx context.Context, w beWorld, o beOptions, seed uint64) (*beWorkload, error) {
	cl, err := client.New(w.direct, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	g := &beWorkload{w: w, o: o, seed: seed, cl: cl, ctx: ctx, truth: beTruth{entries: map[string]*entryTruth{}}, poolStores: map[string]*beStore{}, dataDeleted: map[string]bool{}}
	g.replicas = &chaos.Replicas{N: o.replicas, Config: w.replicaConfig, Run: g.runManager, Log: o.log}

	// The audits: informers on the test's own connection, whose relists
	// after an API server restart report the deletions their watch missed.
	ctrllog.SetLogger(o.log)
	c, err := cache.New(w.direct, cache.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	entryInf, err := c.GetInformer(ctx, &api.BackupEntry{})
	if err != nil {
		return nil, err
	}
	if g.entryAudit, err = chaos.AuditDeletes(entryInf); err != nil {
		return nil, err
	}
	// The moment an entry is seen gone is the moment to look at its
	// prefix: its finalizer is removed, so the prefix must be empty.
	if _, err := entryInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: g.entryGone}); err != nil {
		return nil, err
	}
	bucketInf, err := c.GetInformer(ctx, &api.BackupBucket{})
	if err != nil {
		return nil, err
	}
	if g.bucketAudit, err = chaos.AuditDeletes(bucketInf); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, errors.New("audit informers did not sync")
	}
	for _, s := range w.stores {
		g.listKeys(s, false)
	}
	if w.legacy != nil {
		// Only a bug deletes it: then its keys are gone.
		g.listKeys(w.legacy, true)
	}
	go g.sampleQuota(ctx, 700*time.Millisecond)
	for _, s := range w.secrets {
		s = s.DeepCopy()
		s.Namespace = w.ns
		if err := chaos.Retry(func(ctx context.Context) error {
			err := cl.Create(ctx, s.DeepCopy())
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}); err != nil {
			return nil, fmt.Errorf("create Secret %s: %w", s.Name, err)
		}
	}
	return g, nil
}

// entryGone lists the prefix of an entry of the run that the audit saw
// deleted. What it finds was there after the finalizer was removed: the
// generator stops writing under a prefix before it deletes the entry.
func (g *beWorkload) entryGone(obj any) {
	seen := time.Now()
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	be, ok := obj.(*api.BackupEntry)
	if !ok {
		return
	}
	g.truth.mu.Lock()
	e := g.truth.entries[be.Name]
	var b *bucketTruth
	if e != nil {
		b = e.bucket
	}
	g.truth.mu.Unlock()
	if b == nil {
		return // unknown, or never placed where the generator saw
	}
	g.hooks.Add(1)
	go func() {
		defer g.hooks.Done()
		var keys []string
		err := chaos.Retry(func(ctx context.Context) (err error) {
			keys, err = listKeys(ctx, b.store.direct, b.prefix+e.name+"/")
			if b.pool && gcerrors.Code(err) == gcerrors.NotFound {
				// The pool deleted its store bucket: nothing is left
				// under the prefix.
				return nil
			}
			return err
		})
		g.mu.Lock()
		defer g.mu.Unlock()
		g.finalizers = append(g.finalizers, finalizerCheck{entry: e.name, seen: seen, keys: keys, err: err})
	}()
}

func listKeys(ctx context.Context, b *blob.Bucket, prefix string) ([]string, error) {
	var out []string
	iter := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := iter.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, o.Key)
	}
}

// sampleQuota lists the prefixes of each entry-limited bucket every
// interval until ctx ends. A listing is not a snapshot: a prefix deleted
// while it runs and one created later may both be in it, which a bucket
// never held at once. But a prefix exists for one interval of time (from
// the admission's marker until the prefix is deleted; the generator writes
// under a prefix only while its entry is admitted and not deleted), so the
// prefixes that two successive listings both show all existed together
// between the two: those are what the check counts.
func (g *beWorkload) sampleQuota(ctx context.Context, every time.Duration) {
	type listing struct {
		dirs     []string
		from, to time.Time
	}
	prev := map[string]listing{}
	// A deleted bucket admits no more entries: once its prefixes are gone
	// it is not listed again (a long run deletes many).
	done := map[string]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		g.truth.mu.Lock()
		buckets := slices.Clone(g.truth.buckets)
		g.truth.mu.Unlock()
		for _, b := range buckets {
			if b.max == 0 || done[b.name] {
				continue
			}
			g.truth.mu.Lock()
			deleted := !b.deleteSent.IsZero()
			g.truth.mu.Unlock()
			start := time.Now()
			dirs, err := listDirs(ctx, b.store.direct, b.prefix)
			if err != nil {
				continue
			}
			cur := listing{dirs: dirs, from: start, to: time.Now()}
			g.mu.Lock()
			g.quotaLists++
			if p, ok := prev[b.name]; ok {
				both := slices.DeleteFunc(slices.Clone(p.dirs), func(d string) bool { return !slices.Contains(cur.dirs, d) })
				if len(both) > b.max {
					g.breaches = append(g.breaches, quotaBreach{bucket: b.name, max: b.max, prefixes: both, from: p.to, to: cur.from})
				}
			}
			g.mu.Unlock()
			prev[b.name] = cur
			done[b.name] = deleted && len(dirs) == 0
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// listDirs lists the prefixes ("directories") right under root, as
// share.Quota counts them.
func listDirs(ctx context.Context, b *blob.Bucket, root string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []string
	iter := b.List(&blob.ListOptions{Prefix: root, Delimiter: "/"})
	for {
		o, err := iter.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if o.IsDir {
			out = append(out, o.Key)
		}
	}
}

// bucketClasses are the buckets the run starts with, and replaces when it
// deletes one: on each store, one that holds a few entries (the quota, and
// waiting entries admitted when a place frees) and one without a limit.
var bucketClasses = []int{2, 0}

// generate creates buckets and entries, writes data, deletes entries (with
// the grace period, forced, or forced during the grace period) and now and
// then a bucket, until ctx ends.
func (g *beWorkload) generate(ctx context.Context, ops *chaos.Ops) error {
	stream := uint64(0x6265)
	if g.o.label != "" {
		stream++ // a second installation draws its own operations
	}
	rng := rand.New(rand.NewPCG(g.seed, stream))
	defer func() {
		g.truth.mu.Lock()
		g.truth.stopped = time.Now()
		g.truth.mu.Unlock()
	}()
	for i, s := range g.w.stores {
		for _, max := range bucketClasses {
			// 3 entries on the first store, 2 on the second: both limits.
			if max > 0 {
				max += 1 - i%2
			}
			if err := g.newBucket(s, max, ops); err != nil {
				return err
			}
		}
	}
	if g.w.pool != nil {
		if err := g.newPoolFirst(ops); err != nil {
			return err
		}
	}
	for ctx.Err() == nil {
		if err := g.refresh(); err != nil {
			return err
		}
		if err := g.forceDue(ops); err != nil {
			return err
		}
		var err error
		switch n := rng.IntN(100); {
		case n < 35:
			err = g.newEntry(rng, ops)
		case n < 55:
			err = g.writeData(rng, ops)
		case n < 85:
			err = g.deleteEntry(rng, ops)
		case n < 88:
			err = g.replaceBucket(rng, ops)
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(150+rng.IntN(250)) * time.Millisecond * time.Duration(max(g.o.slower, 1))):
		}
	}
	return nil
}

// create creates obj and returns its UID.
func (g *beWorkload) create(obj client.Object) (types.UID, error) {
	var uid types.UID
	err := chaos.Retry(func(ctx context.Context) error {
		o := obj.DeepCopyObject().(client.Object)
		err := g.cl.Create(ctx, o)
		if apierrors.IsAlreadyExists(err) {
			// An earlier attempt was applied.
			err = g.cl.Get(ctx, client.ObjectKeyFromObject(o), o)
		}
		uid = o.GetUID()
		return err
	})
	return uid, err
}

func (g *beWorkload) newBucket(s *beStore, max int, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	n := len(g.truth.buckets)
	b := &bucketTruth{name: fmt.Sprintf("%s--bb-%d", g.w.runID, n), store: s, prefix: fmt.Sprintf("bb-%d/", n), max: max}
	g.truth.buckets = append(g.truth.buckets, b)
	g.truth.mu.Unlock()
	obj := &api.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: b.name},
		Spec: api.BackupBucketSpec{URL: s.url(b.prefix), MaxEntries: max,
			SecretRef: &api.SecretReference{Namespace: g.w.ns, Name: s.secret}},
	}
	uid, err := g.create(obj)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", b.name, err)
	}
	g.truth.mu.Lock()
	b.uid = uid
	g.truth.mu.Unlock()
	g.add(ops, fmt.Sprintf("create bucket (%s, max %d)", s.kind, max))
	return nil
}

// entryName is the name of the generator's n-th entry.
func (g *beWorkload) entryName(n int) string {
	return fmt.Sprintf("%s--%s-%d", g.w.runID, cmp.Or(g.o.entries, "e"), n)
}

// add counts an operation of kind, named for the installation.
func (g *beWorkload) add(ops *chaos.Ops, kind string) { ops.Add(g.opName(kind)) }

// opName is kind, prefixed with the installation's label if it has one.
func (g *beWorkload) opName(kind string) string {
	if g.o.label == "" {
		return kind
	}
	return g.o.label + ": " + kind
}

// liveBuckets are the buckets not deleted that the generator made and
// names in entries: not the pool's.
func (g *beWorkload) liveBuckets() []*bucketTruth {
	return slices.DeleteFunc(slices.Clone(g.truth.buckets), func(b *bucketTruth) bool { return !b.deleteSent.IsZero() || b.pool })
}

// liveEntries are b's entries not deleted.
func liveEntries(b *bucketTruth) []*entryTruth {
	return slices.DeleteFunc(slices.Clone(b.entries), func(e *entryTruth) bool { return !e.deleteSent.IsZero() })
}

// newEntry creates an entry: one in three (all, without buckets of the
// generator's) in the pool (newPoolEntry), the others in a bucket that has
// fewer than its limit and two more (so that some wait for a place): its
// look-alike keys first, beside the prefix it will get, which must survive
// everything. In a limited bucket, one in four is named as a sibling of a
// live entry, its name plus "c": the sibling's prefix then starts with the
// other's name. One in four migrates (newMigration).
func (g *beWorkload) newEntry(rng *rand.Rand, ops *chaos.Ops) error {
	if g.w.pool != nil && (len(g.w.stores) == 0 || rng.IntN(3) == 0) {
		return g.newPoolEntry(rng, ops)
	}
	g.truth.mu.Lock()
	cands := slices.DeleteFunc(g.liveBuckets(), func(b *bucketTruth) bool {
		limit := b.max + 2
		if b.max == 0 {
			limit = 4
		}
		return len(liveEntries(b)) >= limit
	})
	if len(cands) == 0 {
		g.truth.mu.Unlock()
		return nil
	}
	b := cands[rng.IntN(len(cands))]
	name := g.entryName(len(g.truth.order))
	// Not in an unlimited bucket: there every entry has a look-alike
	// directory of that name beside its prefix.
	if live := liveEntries(b); b.max > 0 && len(live) > 0 && rng.IntN(4) == 0 {
		if sib := live[rng.IntN(len(live))].name + "c"; g.truth.entries[sib] == nil {
			name = sib
		}
	}
	e := &entryTruth{name: name, bucket: b, lookalikes: []string{b.prefix + name + "-notes.txt"}}
	if b.max == 0 {
		// A directory beside the prefix; in a limited bucket it would
		// take a place (Quota counts directories), so there the siblings
		// are entries.
		e.lookalikes = append(e.lookalikes, b.prefix+name+"c/notes")
	}
	g.truth.entries[name] = e
	g.truth.order = append(g.truth.order, e)
	b.entries = append(b.entries, e)
	g.truth.mu.Unlock()
	for _, key := range e.lookalikes {
		if err := g.write(b.store, key, ops); err != nil {
			return err
		}
	}
	return g.createEntry(rng, e, api.BackupEntrySpec{BucketName: b.name}, b.max == 0, "create entry ("+b.store.kind+")", ops)
}

// createEntry creates entry e with spec, one in four migrating when the
// world has a legacy store and mayMigrate (newMigration), and counts it as
// kind. Only an entry sure of a place (a bucket without a limit, a pool)
// may migrate: a migration waits for the admission, and the generator
// keeps a migrating entry until its migration is done, so a full bucket
// of them would wait for good.
func (g *beWorkload) createEntry(rng *rand.Rand, e *entryTruth, spec api.BackupEntrySpec, mayMigrate bool, kind string, ops *chaos.Ops) error {
	if g.w.legacy != nil && mayMigrate && (rng.IntN(cmp.Or(g.o.migrateOneIn, 4)) == 0 || g.firstMigrations()) {
		m, from, err := g.newMigration(rng, ops)
		if err != nil {
			return err
		}
		g.truth.mu.Lock()
		e.migration = m
		g.truth.mu.Unlock()
		spec.MigrateFrom = from
		kind += ", migrating from " + m.kind
	}
	spec.ShootUID = "uid-" + e.name
	uid, err := g.create(&api.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: e.name}, Spec: spec})
	if err != nil {
		return fmt.Errorf("create entry %s: %w", e.name, err)
	}
	g.truth.mu.Lock()
	e.uid = uid
	g.truth.mu.Unlock()
	g.add(ops, kind)
	return nil
}

// firstMigrations says whether the workload has made fewer than two
// migrations: the first two entries that may migrate do (from a legacy
// prefix, then from a shared bucket; newMigration).
func (g *beWorkload) firstMigrations() bool {
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	return g.legacySeq < 2
}

func (g *beWorkload) write(s *beStore, key string, ops *chaos.Ops) error {
	if _, err := g.writeKey(s, key, ops); err != nil {
		return err
	}
	return nil
}

// writeKey writes key to s and records it there. On a store bucket that
// may go (a pool's, the legacy one) it reports false, writing nothing,
// when the bucket is gone.
func (g *beWorkload) writeKey(s *beStore, key string, ops *chaos.Ops) (bool, error) {
	gone := false
	err := chaos.Retry(func(ctx context.Context) error {
		err := s.direct.WriteAll(ctx, key, []byte("data of "+key), nil)
		gone = s.keys.BucketMayGo && gcerrors.Code(err) == gcerrors.NotFound
		if gone {
			return nil
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("write %s: %w", key, err)
	}
	if gone {
		g.add(ops, "write object: the store bucket is gone")
		return false, nil
	}
	s.keys.Expect(key, time.Now())
	g.add(ops, "write object")
	return true, nil
}

// refresh reads the entries: their UIDs, where the pool placed them,
// which are admitted, and how their migrations go.
func (g *beWorkload) refresh() error {
	var list api.BackupEntryList
	if err := chaos.Retry(func(ctx context.Context) error { return g.cl.List(ctx, &list) }); err != nil {
		return fmt.Errorf("list entries: %w", err)
	}
	// The buckets the pool placed entries in, read once each (and their
	// store buckets opened) before the entries' admissions count: the
	// generator writes there once it sees an entry admitted.
	g.truth.mu.Lock()
	need := map[string]bool{}
	for _, be := range list.Items {
		if e := g.truth.entries[be.Name]; e != nil && e.pool && e.bucket == nil && be.UID == e.uid && be.Spec.BucketName != "" {
			need[be.Spec.BucketName] = true
		}
	}
	g.truth.mu.Unlock()
	placed := map[string]*bucketTruth{}
	for name := range need {
		b, err := g.poolBucket(name)
		if err != nil {
			return err
		}
		placed[name] = b
	}
	now := time.Now()
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	for i := range list.Items {
		be := &list.Items[i]
		e := g.truth.entries[be.Name]
		if e == nil || be.UID != e.uid {
			continue
		}
		if b := placed[be.Spec.BucketName]; e.pool && e.bucket == nil && b != nil {
			e.bucket = b
			b.entries = append(b.entries, e)
		}
		e.migration.see(be, now)
		if !e.admittedSeen.IsZero() || !e.deleteSent.IsZero() || e.bucket == nil {
			continue
		}
		if be.Status.Prefix != "" {
			e.admittedSeen = now
		} else if c := meta.FindStatusCondition(be.Status.Conditions, api.ConditionAdmitted); c != nil && c.Reason == "BucketFull" {
			e.refusedSeen = true
		}
	}
	return nil
}

// writeData writes a backup under the prefix of an admitted entry that is
// not deleted.
func (g *beWorkload) writeData(rng *rand.Rand, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	var cands []*entryTruth
	for _, e := range g.truth.order {
		if !e.admittedSeen.IsZero() && e.deleteSent.IsZero() && len(e.data) < 4 {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		g.truth.mu.Unlock()
		return nil
	}
	e := cands[rng.IntN(len(cands))]
	if p := g.needsData(cands); p != nil {
		e = p // a kind of store without data gets some first
	}
	key := fmt.Sprintf("%sv2/Full-%08d", e.storePrefix(), len(e.data))
	e.data = append(e.data, key)
	g.truth.mu.Unlock()
	written, err := g.writeKey(e.bucket.store, key, ops)
	if err == nil && !written {
		// An admitted entry that is not deleted has its prefix in its
		// bucket: the checker reports this (invOwner).
		g.mu.Lock()
		g.lostWrites = append(g.lostWrites, fmt.Sprintf("%s, of entry %s, at %s: the store bucket %s is gone", key, e.name, ts(time.Now()), e.bucket.store.bucket))
		g.mu.Unlock()
	}
	return err
}

// needsData is the first of cands without data in a kind of store where
// no entry with data was sent for deletion yet and no candidate has data;
// nil when there is none. g.truth.mu is held.
func (g *beWorkload) needsData(cands []*entryTruth) *entryTruth {
	has := map[string]bool{}
	for _, e := range cands {
		if e.bucket != nil && len(e.data) > 0 {
			has[e.bucket.store.kind] = true
		}
	}
	for _, e := range cands {
		if e.bucket != nil && len(e.data) == 0 && !g.dataDeleted[e.bucket.store.kind] && !has[e.bucket.store.kind] {
			return e
		}
	}
	return nil
}

// coverageFirst is the first of cands with data in a kind of store where
// no entry with data was sent for deletion yet; nil when there is none.
// g.truth.mu is held.
func (g *beWorkload) coverageFirst(cands []*entryTruth) *entryTruth {
	for _, e := range cands {
		if e.bucket != nil && !g.dataDeleted[e.bucket.store.kind] && len(e.data) > 0 {
			return e
		}
	}
	return nil
}

// deleteEntry deletes an entry: with the grace period, forced (the
// annotation first), or with the grace period and then forced within it.
// An entry waiting for a place is deleted too, and goes at once.
func (g *beWorkload) deleteEntry(rng *rand.Rand, ops *chaos.Ops) error {
	if g.o.deletes == deleteNone {
		return nil
	}
	g.truth.mu.Lock()
	var cands []*entryTruth
	for _, e := range g.truth.order {
		if g.o.deletes == deleteSoon {
			if e.deleteSent.IsZero() && e.bucket != nil {
				cands = append(cands, e)
			}
			continue
		}
		if m := e.migration; m != nil && (m.kind == migrateLegacy && m.doneSeen.IsZero() || m.kind != migrateLegacy && !m.refusedSeen) && (rng.IntN(20) != 0 || m.first) {
			continue // migrated (or refused) before it is deleted, mostly
		}
		// Old enough to have been admitted and have data, mostly.
		if e.deleteSent.IsZero() && e.uid != "" && (!e.admittedSeen.IsZero() && time.Since(e.admittedSeen) > 2*time.Second || rng.IntN(8) == 0) {
			cands = append(cands, e)
		}
	}
	// An entry with data in a kind of store where none was deleted yet goes
	// first, even while fewer than three are left to keep: on a loaded
	// machine few entries are admitted, and a run that kept them all would
	// delete no key there (ci19: "s3 keys deleted: 0").
	p := g.coverageFirst(cands)
	if p != nil {
		g.dataDeleted[p.bucket.store.kind] = true
	}
	g.truth.mu.Unlock()
	if p != nil {
		return g.deleteOne(p, true, ops)
	}
	if len(cands) == 0 || len(cands) < 3 && g.o.deletes == deleteSome { // keep some
		return nil
	}
	e := cands[rng.IntN(len(cands))]
	switch n := rng.IntN(10); {
	case n < 4:
		return g.deleteOne(e, false, ops)
	case n < 7:
		return g.deleteOne(e, true, ops)
	default:
		if err := g.deleteOne(e, false, ops); err != nil {
			return err
		}
		g.truth.mu.Lock()
		e.forceLater = time.Now().Add(time.Duration(rng.Int64N(int64(g.o.grace))))
		g.truth.mu.Unlock()
		return nil
	}
}

// deleteOne deletes the entry, forced or not, and reads back its
// deletionTimestamp and whether it had a prefix.
func (g *beWorkload) deleteOne(e *entryTruth, force bool, ops *chaos.Ops) error {
	if force {
		if err := g.force(e); err != nil {
			return err
		}
	}
	g.truth.mu.Lock()
	e.deleteSent = time.Now()
	uid := e.uid
	g.truth.mu.Unlock()
	err := chaos.Retry(func(ctx context.Context) error {
		obj := &api.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: e.name}}
		return client.IgnoreNotFound(g.cl.Delete(ctx, obj, client.Preconditions{UID: &uid}))
	})
	if err != nil {
		return fmt.Errorf("delete entry %s: %w", e.name, err)
	}
	kind := "delete entry (grace period)"
	if force {
		kind = "delete entry (forced)"
	}
	g.add(ops, kind)
	var got api.BackupEntry
	err = chaos.Retry(func(ctx context.Context) error {
		return client.IgnoreNotFound(g.cl.Get(ctx, client.ObjectKey{Name: e.name}, &got))
	})
	if err != nil {
		return fmt.Errorf("read deleted entry %s: %w", e.name, err)
	}
	if got.UID == uid && got.DeletionTimestamp != nil {
		g.truth.mu.Lock()
		e.deletionTS = got.DeletionTimestamp.Time
		e.prefixAtDelete = got.Status.Prefix != ""
		g.truth.mu.Unlock()
	}
	return nil
}

// force sets the force annotation on the entry.
func (g *beWorkload) force(e *entryTruth) error {
	g.truth.mu.Lock()
	if e.forceSent.IsZero() {
		e.forceSent = time.Now()
	}
	g.truth.mu.Unlock()
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, api.ForceDeletionAnnotation)
	err := chaos.Retry(func(ctx context.Context) error {
		obj := &api.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: e.name}}
		return client.IgnoreNotFound(g.cl.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)))
	})
	if err != nil {
		return fmt.Errorf("force the deletion of entry %s: %w", e.name, err)
	}
	return nil
}

// forceDue forces the deletions under way that are due to be forced.
func (g *beWorkload) forceDue(ops *chaos.Ops) error {
	now := time.Now()
	g.truth.mu.Lock()
	var due []*entryTruth
	for _, e := range g.truth.order {
		if !e.forceLater.IsZero() && !now.Before(e.forceLater) {
			e.forceLater = time.Time{}
			due = append(due, e)
		}
	}
	g.truth.mu.Unlock()
	for _, e := range due {
		if err := g.force(e); err != nil {
			return err
		}
		g.add(ops, "force a deletion under way")
	}
	return nil
}

// replaceBucket deletes a bucket that has lived for 10 s, with its
// entries (some forced), and creates another of its class.
func (g *beWorkload) replaceBucket(rng *rand.Rand, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	cands := slices.DeleteFunc(g.liveBuckets(), func(b *bucketTruth) bool { return len(b.entries) < 3 })
	if len(cands) == 0 {
		g.truth.mu.Unlock()
		return nil
	}
	b := cands[rng.IntN(len(cands))]
	live := liveEntries(b)
	g.truth.mu.Unlock()
	for _, e := range live {
		if err := g.deleteOne(e, rng.IntN(2) == 0, ops); err != nil {
			return err
		}
	}
	g.truth.mu.Lock()
	b.deleteSent = time.Now()
	uid := b.uid
	g.truth.mu.Unlock()
	err := chaos.Retry(func(ctx context.Context) error {
		obj := &api.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: b.name}}
		return client.IgnoreNotFound(g.cl.Delete(ctx, obj, client.Preconditions{UID: &uid}))
	})
	if err != nil {
		return fmt.Errorf("delete bucket %s: %w", b.name, err)
	}
	g.add(ops, "delete bucket")
	return g.newBucket(b.store, b.max, ops)
}

// runManager runs one replica until ctx ends or it exits.
func (g *beWorkload) runManager(ctx context.Context, cfg *rest.Config, i int) error {
	flags := kubecmd.Flags{Namespace: g.w.ns, LeaderElect: true}
	mgr, err := flags.NewManager(rest.CopyConfig(cfg), "backup-entry", scheme, replicatest.CrashOptions(g.o.log.WithValues("replica", i)))
	if err != nil {
		return err
	}
	o := controllerOptions{grace: g.o.grace, wrap: g.o.wrap, installation: g.w.installation}
	if p := g.w.pool; p != nil {
		o.quota = pool.Limits{p.provider: p.quota}
	}
	if err := setupControllers(mgr, o); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// pending lists what the controller still has to do: deleted entries and
// buckets not gone, keys of deleted entries not gone, entries waiting for
// a place in a bucket that has one or in their pool, migrations not done,
// sources that are shared buckets not refused yet. Empty means it caught
// up.
func (g *beWorkload) pending(ctx context.Context) ([]string, error) {
	var entries api.BackupEntryList
	var buckets api.BackupBucketList
	if err := g.cl.List(ctx, &entries); err != nil {
		return nil, err
	}
	if err := g.cl.List(ctx, &buckets); err != nil {
		return nil, err
	}
	for _, s := range g.stores() {
		if err := s.keys.List(ctx); err != nil {
			return nil, err
		}
	}
	dirs, err := g.limitedDirs(ctx, buckets.Items)
	if err != nil {
		return nil, err
	}
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	var out []string
	live := map[string]*api.BackupEntry{}
	for i := range entries.Items {
		be := &entries.Items[i]
		e := g.truth.entries[be.Name]
		if e == nil || be.UID != e.uid {
			continue
		}
		live[be.Name] = be
		switch m := e.migration; {
		case !e.deleteSent.IsZero():
			out = append(out, "entry "+be.Name)
		case e.pool && be.Status.Prefix == "":
			out = append(out, fmt.Sprintf("entry %s waits for a place in its pool (bucket %q)", be.Name, be.Spec.BucketName))
		case be.Status.Prefix == "":
			// A migration waits for the admission (waiting says whether
			// the entry should have one).
		case m != nil && m.kind == migrateLegacy && (be.Status.Migration == nil || be.Status.Migration.Step != migrate.StepDone):
			out = append(out, fmt.Sprintf("entry %s migrates from %s (status.migration %+v)", be.Name, m.source, be.Status.Migration))
		case m != nil && m.kind != migrateLegacy && !refusedShared(be):
			out = append(out, fmt.Sprintf("entry %s, whose source %s is a shared bucket, is not refused yet", be.Name, m.source))
		}
	}
	for _, b := range buckets.Items {
		for _, t := range g.truth.buckets {
			if t.name == b.Name && t.uid == b.UID && !t.deleteSent.IsZero() {
				out = append(out, "bucket "+b.Name)
			}
		}
	}
	for _, s := range g.stores() {
		for key, r := range s.keys.Keys() {
			if e := g.ownerOf(s, key); e != nil && !e.deleteSent.IsZero() && r.GoneBy.IsZero() {
				out = append(out, "key "+key)
			}
		}
	}
	out = append(out, g.waiting(live, dirs)...)
	return out, nil
}

// limitedDirs lists the prefixes of each limited bucket of the generator's
// that buckets (read from the API server) hold: its own, not deleted, and
// the pool's that exist (a pool bucket whose store bucket is gone holds
// none).
func (g *beWorkload) limitedDirs(ctx context.Context, buckets []api.BackupBucket) (map[string][]string, error) {
	exists := map[types.UID]bool{}
	for _, b := range buckets {
		exists[b.UID] = true
	}
	g.truth.mu.Lock()
	var limited []*bucketTruth
	for _, b := range g.truth.buckets {
		if b.max > 0 && b.deleteSent.IsZero() && (!b.pool || exists[b.uid]) {
			limited = append(limited, b)
		}
	}
	g.truth.mu.Unlock()
	dirs := map[string][]string{}
	for _, b := range limited {
		d, err := listDirs(ctx, b.store.direct, b.prefix)
		if b.pool && gcerrors.Code(err) == gcerrors.NotFound {
			d, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		dirs[b.name] = d
	}
	return dirs, nil
}

// waiting names the entries that are neither deleted nor admitted while
// their bucket has a place: the bucket's count of prefixes (as
// share.Quota counts them, in dirs) is below its limit, or it has
// none. live are the entries read, by name; dirs the prefixes of the
// limited buckets.
func (g *beWorkload) waiting(live map[string]*api.BackupEntry, dirs map[string][]string) []string {
	var out []string
	for _, b := range g.truth.buckets {
		if !b.deleteSent.IsZero() {
			continue
		}
		for _, e := range liveEntries(b) {
			be := live[e.name]
			if be == nil || be.Status.Prefix != "" {
				continue
			}
			if b.max == 0 || len(dirs[b.name]) < b.max {
				out = append(out, fmt.Sprintf("entry %s waits for a place in bucket %s (max %d), which holds %d prefixes", e.name, b.name, b.max, len(dirs[b.name])))
			}
		}
	}
	return out
}

// ownerOf returns the entry whose prefix holds key in store s, nil if
// none. Call with g.truth.mu held.
func (g *beWorkload) ownerOf(s *beStore, key string) *entryTruth {
	for _, b := range g.truth.buckets {
		if b.store != s || !strings.HasPrefix(key, b.prefix) {
			continue
		}
		name, _, ok := strings.Cut(strings.TrimPrefix(key, b.prefix), "/")
		if e := g.truth.entries[name]; ok && e != nil && e.bucket == b {
			return e
		}
	}
	return nil
}

// settled: every deletion that will be due is, and is done; every entry
// that can have a place has one. The generator reads the entries on
// meanwhile (refresh): where the pool placed them, and how their
// migrations go.
func (g *beWorkload) settled(ctx context.Context) error {
	if err := g.refresh(); err != nil {
		return err
	}
	now := time.Now()
	g.truth.mu.Lock()
	var last time.Time
	for _, e := range g.truth.order {
		if at := e.allowedFrom(g.o.grace); at.After(last) {
			last = at
		}
	}
	g.truth.mu.Unlock()
	p, err := g.pending(ctx)
	if err != nil {
		return err
	}
	if len(p) > 0 {
		return fmt.Errorf("%d not done: %s", len(p), strings.Join(p[:min(len(p), 5)], ", "))
	}
	if now.Before(last) {
		return fmt.Errorf("the last grace period ends at %s", ts(last))
	}
	return nil
}

func ts(t time.Time) string { return t.Format("15:04:05.000") }

// openGCS opens a bucket of a fake-gcs-server at endpoint (its JSON API's
// base URL) without credentials.
func openGCS(ctx context.Context, endpoint, bucket string) (*blob.Bucket, error) {
	return backupstore.OpenBucket(ctx, gcsURL(endpoint, bucket, ""), nil)
}

// gcsURL is the spec.url of a bucket on the fake-gcs-server at endpoint:
// the emulator needs no token, and a service account key would want one
// from Google.
func gcsURL(endpoint, bucket, prefix string) string {
	u := fmt.Sprintf("gs://%s?endpoint=%s&anonymous=true", bucket, endpoint)
	if prefix != "" {
		u += "&prefix=" + prefix
	}
	return u
}
