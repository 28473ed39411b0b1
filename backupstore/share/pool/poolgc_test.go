package pool_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

const grace = time.Hour

// gcPool is a pool of buckets with a limit of 1 entry each, whose empty
// buckets go after grace, on a real API server, over the buckets of one
// object store: entries are testbackup Backups in one namespace, bucket
// objects Backups in another (spec.prefix holds the store's bucket URL).
// The controllers are played by hand (settle). Hooks let a test act in
// the middle of a deletion.
type gcPool struct {
	t         *testing.T
	ctx       context.Context
	k         *testenv.Kubernetes
	cl        client.Client
	scheme    *runtime.Scheme
	ns, bns   string
	store     *testenv.BlobStore
	clock     *clocktesting.FakeClock
	pool      *pool.Pool[backup, backup]
	liveCalls int
	// afterLive runs after the n-th call of LiveEntries since the test
	// reset liveCalls; inDeprovision before the store's deletion.
	afterLive     func(n int)
	inDeprovision func()
	// hidden are entries the cache's List does not show yet.
	hidden map[string]bool
	// installation is Grow.Installation.
	installation string
}

// hidingCache is a cache that has not seen some entries yet.
type hidingCache struct {
	inNamespace
	p *gcPool
}

func (h hidingCache) List(ctx context.Context, ns string) ([]backup, error) {
	all, err := h.inNamespace.List(ctx, ns)
	return slices.DeleteFunc(all, func(e backup) bool { return h.p.hidden[e.Name] }), err
}

func newGCPool(t *testing.T, store *testenv.BlobStore, dryRun bool) *gcPool {
	k := testenv.StartKubernetes(t)
	if _, err := testbackup.Install(k.Config); err != nil {
		t.Fatal(err)
	}
	p := &gcPool{t: t, ctx: context.Background(), k: k, ns: k.Namespace, bns: k.Namespace + "-buckets", store: store,
		clock: clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)), hidden: map[string]bool{}, installation: "cluster-a"}
	if _, err := k.Client.CoreV1().Namespaces().Create(p.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.bns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.scheme = runtime.NewScheme()
	if err := testbackup.AddToScheme(p.scheme); err != nil {
		t.Fatal(err)
	}
	p.pool, p.cl = p.newPool(dryRun, true)
	return p
}

// newPool builds a Pool with its own client: the hooks and the stale
// cache apply to it only if hooked.
func (p *gcPool) newPool(dryRun, hooked bool) (*pool.Pool[backup, backup], client.Client) {
	t := p.t
	cl, err := client.New(p.k.Config, client.Options{Scheme: p.scheme})
	if err != nil {
		t.Fatal(err)
	}
	live := inNamespace{backups.Objects[backup](cl, cl), p.ns}
	var entries collect.Objects[backup] = live
	if hooked {
		entries = hidingCache{live, p}
	}
	buckets := inNamespace{backups.Objects[backup](cl, cl), p.bns}
	c, err := collect.New(collect.Config[backup]{Objects: entries, Finalizer: &collect.Finalizer[backup]{Name: "example.com/data"}, Secrets: backupstore.SecretsFrom(nil),
		Location: func(ctx context.Context, e backup) (collect.Location, error) {
			b, err := buckets.Get(ctx, p.bns, e.Spec.Bucket)
			if err != nil {
				return collect.Location{}, err
			}
			prefix, err := share.PrefixOf(e)
			return collect.Location{URL: b.Spec.Prefix, Prefix: prefix}, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := share.New(share.Config[backup, backup]{
		Entries: entries, Buckets: buckets, Collector: c, BucketFinalizer: "example.com/entries",
		Bucket: func(e backup) (string, string) { return p.bns, e.Spec.Bucket },
		Limit:  func(b backup) int { return b.Spec.Limit },
		Prefix: func(e backup) *string { return &e.Status.Prefix },
		Marker: func(e backup) []byte { return []byte(e.Name) }, MarkerKey: "marker",
		Clock: p.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The store's buckets are Grow's to create and delete, with their
	// owner markers; NewBucket is the test's (a pool without a first
	// bucket), naming a store bucket by the pool's name and number alone.
	grow := pool.Grow[backup]{Buckets: buckets, Secrets: backupstore.SecretsFrom(nil), Installation: p.installation,
		Member: func(b backup) string { return b.Spec.Pool },
		Store:  func(b backup) (string, string, string) { return b.Spec.Prefix, "", "" },
	}
	pl, err := pool.New(pool.Config[backup, backup]{
		Share: s, Create: func(ctx context.Context, b backup) error { return cl.Create(ctx, b) },
		Pool:   func(e backup) (string, error) { return e.Spec.Pool, nil },
		Member: func(b backup) string { return b.Spec.Pool },
		Grower: growerFuncs{NewBucket: func(pool string, n int) (backup, error) {
			name := fmt.Sprintf("%s-%d", pool, n)
			return &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: p.bns, Name: name},
				Spec: testbackup.Spec{Pool: pool, Limit: 1, Prefix: p.storeURL(name)}}, nil
		}, Provision: grow.Provision, Deprovision: func(ctx context.Context, b backup, opts *backupstore.DeleteOptions) (*backupstore.DeleteResult, error) {
			if hooked && p.inDeprovision != nil && (opts == nil || !opts.DryRun) {
				p.inDeprovision()
			}
			return grow.Deprovision(ctx, b, opts)
		}}.grower(),
		Claims: func(b backup) *[]string { return &b.Status.Claims },
		Assign: func(e backup, _, name string) { e.Spec.Bucket = name },

		DeleteEmptyAfter: grace,
		DryRun:           dryRun,
		LiveEntries: func(ctx context.Context) ([]backup, error) {
			all, err := live.List(ctx, "")
			if hooked && err == nil {
				p.liveCalls++
				if p.afterLive != nil {
					p.afterLive(p.liveCalls)
				}
			}
			return all, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return pl, cl
}

// storeURL is the URL of the store's bucket behind bucket object name.
func (p *gcPool) storeURL(name string) string {
	if p.store.Scheme == "file" {
		return p.store.URL + "/" + name
	}
	h := fnv.New32a()
	h.Write([]byte(p.store.Bucket))
	return strings.Replace(p.store.URL, p.store.Bucket, fmt.Sprintf("gc%08x-%s", h.Sum32(), name), 1)
}

// storeExists reports whether the store's bucket behind name exists.
func (p *gcPool) storeExists(name string) bool {
	p.t.Helper()
	url := p.storeURL(name)
	if p.store.Scheme == "file" {
		_, err := os.Stat(strings.TrimPrefix(url, "file://"))
		return err == nil
	}
	b, err := backupstore.OpenBucket(p.ctx, url, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	defer b.Close()
	_, err = b.List(nil).Next(p.ctx)
	return err == nil || err == io.EOF
}

// marker reads entry e's marker in the store of its bucket.
func (p *gcPool) marker(e string) error {
	var eb testbackup.Backup
	if err := p.cl.Get(p.ctx, client.ObjectKey{Namespace: p.ns, Name: e}, &eb); err != nil {
		return err
	}
	if eb.Spec.Bucket == "" || eb.Status.Prefix == "" {
		return fmt.Errorf("entry %s: bucket %q, prefix %q: not admitted", e, eb.Spec.Bucket, eb.Status.Prefix)
	}
	b, err := backupstore.OpenBucket(p.ctx, p.storeURL(eb.Spec.Bucket), nil)
	if err != nil {
		return err
	}
	defer b.Close()
	data, err := b.ReadAll(p.ctx, eb.Status.Prefix+"marker")
	if err == nil && string(data) != e {
		err = fmt.Errorf("marker of %s holds %q", e, data)
	}
	return err
}

func (p *gcPool) entry(name, bucket string) {
	p.t.Helper()
	if err := p.cl.Create(p.ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: name},
		Spec: testbackup.Spec{Pool: "p", Bucket: bucket}}); err != nil {
		p.t.Fatal(err)
	}
}

func (p *gcPool) deleteEntry(name string) {
	p.t.Helper()
	if err := p.cl.Delete(p.ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: name}}); err != nil {
		p.t.Fatal(err)
	}
}

// reconcileEntry runs the entry controller once for entry name.
func (p *gcPool) reconcileEntry(pool *pool.Pool[backup, backup], name string) error {
	var e testbackup.Backup
	if err := p.cl.Get(p.ctx, client.ObjectKey{Namespace: p.ns, Name: name}, &e); err != nil {
		return err
	}
	_, err := pool.ReconcileEntry(p.ctx, &e)
	return err
}

// bucket reads bucket object name; nil when it is gone.
func (p *gcPool) bucket(name string) *testbackup.Backup {
	p.t.Helper()
	var b testbackup.Backup
	err := p.cl.Get(p.ctx, client.ObjectKey{Namespace: p.bns, Name: name}, &b)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return &b
}

// settle plays the controllers (every bucket, then every entry) until a
// round writes nothing.
func (p *gcPool) settle() {
	p.t.Helper()
	versions := func() string {
		var v strings.Builder
		for _, ns := range []string{p.ns, p.bns} {
			var l testbackup.BackupList
			if err := p.cl.List(p.ctx, &l, client.InNamespace(ns)); err != nil {
				p.t.Fatal(err)
			}
			for _, o := range l.Items {
				fmt.Fprintf(&v, "%s/%s=%s ", ns, o.Name, o.ResourceVersion)
			}
		}
		return v.String()
	}
	for r := 0; r < 30; r++ {
		before := versions()
		var el, bl testbackup.BackupList
		if err := p.cl.List(p.ctx, &bl, client.InNamespace(p.bns)); err != nil {
			p.t.Fatal(err)
		}
		for i := range bl.Items {
			if _, err := p.pool.ReconcileBucket(p.ctx, &bl.Items[i]); err != nil && !apierrors.IsConflict(errors.Unwrap(err)) && !apierrors.IsConflict(err) {
				p.t.Logf("bucket %s: %v", bl.Items[i].Name, err)
			}
		}
		if err := p.cl.List(p.ctx, &el, client.InNamespace(p.ns)); err != nil {
			p.t.Fatal(err)
		}
		for i := range el.Items {
			if _, err := p.pool.ReconcileEntry(p.ctx, &el.Items[i]); err != nil && !apierrors.IsConflict(errors.Unwrap(err)) && !apierrors.IsConflict(err) {
				p.t.Logf("entry %s: %v", el.Items[i].Name, err)
			}
		}
		if versions() == before {
			return
		}
	}
	p.t.Fatal("the controllers still write after 30 rounds")
}

// twoBuckets places e0 in p-1 and e1 in p-2, then deletes e1: p-2 is
// empty and stamped at the fake clock's time.
func (p *gcPool) twoBuckets() {
	p.t.Helper()
	p.place("e0", "e1")
	p.deleteEntry("e1")
	p.settle()
	b := p.bucket("p-2")
	if b == nil || b.Annotations[pool.AnnotationEmptySince] != p.clock.Now().Format(time.RFC3339) || !p.storeExists("p-2") {
		p.t.Fatalf("p-2 once e1 is gone: %+v; want it stamped %s", b, p.clock.Now().Format(time.RFC3339))
	}
}

// place creates the entries one by one, each placed and admitted with its
// marker before the next.
func (p *gcPool) place(names ...string) {
	p.t.Helper()
	for _, e := range names {
		p.entry(e, "")
		p.settle()
		if err := p.marker(e); err != nil {
			p.t.Fatal(err)
		}
	}
}

// checkEntries fails unless every entry names a bucket that exists, is
// not being deleted, and holds the entry's marker.
func (p *gcPool) checkEntries() {
	p.t.Helper()
	var el testbackup.BackupList
	if err := p.cl.List(p.ctx, &el, client.InNamespace(p.ns)); err != nil {
		p.t.Fatal(err)
	}
	for _, e := range el.Items {
		b := p.bucket(e.Spec.Bucket)
		if b == nil || b.DeletionTimestamp != nil || b.Annotations[share.AnnotationDeleting] != "" {
			p.t.Errorf("entry %s names bucket %q: %+v", e.Name, e.Spec.Bucket, b)
			continue
		}
		if err := p.marker(e.Name); err != nil {
			p.t.Errorf("entry %s in bucket %s: %v", e.Name, e.Spec.Bucket, err)
		}
	}
}

// An empty bucket on MinIO and on Azurite is stamped when its last entry
// is gone, kept until the grace period is over (a second short of it, it
// and its store's bucket are there); an object written into its store's
// bucket outside the controller keeps it then (StoreNotEmpty: the
// deletion is given up); once that object is gone, after another grace
// period, it is deleted: the store's bucket, then the object. The pool
// grows past the gap (p-4 after p-1 and p-3). The pool keeps its first
// bucket, empty or not, and the next entry goes there.
func TestPoolDeletesAnEmptyBucketAfterGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store func(testing.TB) *testenv.BlobStore
	}{{"MinIO", testenv.S3}, {"Azurite", testenv.Azure}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newGCPool(t, tc.store(t), false)
			p.place("e0", "e1", "e3")
			p.deleteEntry("e1")
			p.settle()
			if b := p.bucket("p-2"); b == nil || b.Annotations[pool.AnnotationEmptySince] != p.clock.Now().Format(time.RFC3339) {
				t.Fatalf("p-2 once e1 is gone: %+v; want it stamped", b)
			}
			leftover, err := backupstore.OpenBucket(p.ctx, p.storeURL("p-2"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer leftover.Close()
			if err := leftover.WriteAll(p.ctx, "written/outside/the-controller", []byte("x"), nil); err != nil {
				t.Fatal(err)
			}
			b := p.bucket("p-2")
			after, err := p.pool.ReconcileBucket(p.ctx, b)
			if err != nil || after != grace {
				t.Errorf("reconcile of the stamped p-2: requeue after %s, %v; want %s", after, err, grace)
			}
			p.clock.Step(grace - time.Second)
			p.settle()
			if b := p.bucket("p-2"); b == nil || !p.storeExists("p-2") {
				t.Fatalf("p-2 deleted a second before its grace period is over: object %+v", b)
			}
			p.clock.Step(time.Second)
			p.settle()
			if b := p.bucket("p-2"); b == nil || b.Annotations[share.AnnotationDeleting] != "" || !p.storeExists("p-2") {
				t.Fatalf("p-2 after its grace period, its store's bucket holding another's object: %+v, store's bucket there: %v; want both kept", b, p.storeExists("p-2"))
			}
			if got, err := leftover.ReadAll(p.ctx, "written/outside/the-controller"); err != nil || string(got) != "x" {
				t.Fatalf("the object written outside the controller: %q, %v; want it kept", got, err)
			}
			if err := leftover.Delete(p.ctx, "written/outside/the-controller"); err != nil {
				t.Fatal(err)
			}
			p.settle()
			p.clock.Step(grace)
			p.settle()
			if b := p.bucket("p-2"); b != nil || p.storeExists("p-2") {
				t.Fatalf("p-2 after another grace period, its store's bucket holding its marker alone: object %+v, store's bucket there: %v", b, p.storeExists("p-2"))
			}
			// A cache that still shows the stamped p-2 does not create its
			// store's bucket again.
			if _, err := p.pool.ReconcileBucket(p.ctx, b); err != nil || p.storeExists("p-2") {
				t.Fatalf("reconcile of a stale copy of p-2: %v; store's bucket there: %v", err, p.storeExists("p-2"))
			}
			p.checkEntries()
			p.place("e4")
			if e := p.getEntry("e4"); e.Spec.Bucket != "p-4" {
				t.Errorf("e4 placed in %q, want p-4", e.Spec.Bucket)
			}

			// p-1, the first bucket, is kept when it is empty, and takes
			// the next entry.
			p.deleteEntry("e0")
			p.settle()
			p.clock.Step(2 * grace)
			p.settle()
			if b := p.bucket("p-1"); b == nil || b.Annotations[pool.AnnotationEmptySince] != "" || !p.storeExists("p-1") {
				t.Fatalf("the pool's first bucket, empty: %+v; want it kept, unstamped", b)
			}
			p.entry("e2", "")
			p.settle()
			var e2 testbackup.Backup
			if err := p.cl.Get(p.ctx, client.ObjectKey{Namespace: p.ns, Name: "e2"}, &e2); err != nil || e2.Spec.Bucket != "p-1" {
				t.Errorf("e2 placed in %q (%v), want p-1", e2.Spec.Bucket, err)
			}
			p.checkEntries()
		})
	}
}

// An entry that names the empty bucket on the API server, but not yet in
// the cache, keeps it: the deletion is decided on a fresh read. It loses
// its stamp.
func TestPoolKeepsABucketAnEntryNamesOnTheAPIServer(t *testing.T) {
	p := newGCPool(t, testenv.File(t), false)
	p.twoBuckets()
	p.hidden["late"] = true
	p.entry("late", "p-2")
	if err := p.reconcileEntry(p.pool, "late"); err != nil {
		t.Fatal(err)
	}
	p.clock.Step(grace)
	d, err := p.pool.DeleteEmpty(p.ctx, p.bucket("p-2"))
	if err != nil || d.Deleted || !strings.Contains(d.Kept, "late") {
		t.Errorf("DeleteEmpty: %+v, %v; want p-2 kept for the entry late", d, err)
	}
	if b := p.bucket("p-2"); b == nil || b.Annotations[pool.AnnotationEmptySince] != "" {
		t.Errorf("p-2: %+v; want it there, unstamped", b)
	}
	p.hidden = nil
	p.settle()
	p.checkEntries()
}

// A placement made between the decision's fresh read and the mark wins:
// the mark fails on the bucket's resourceVersion (or the read after it
// sees the place taken), and the bucket stays with the entry.
func TestPoolPlacementBeforeTheMarkWins(t *testing.T) {
	p := newGCPool(t, testenv.File(t), false)
	p.twoBuckets()
	other, _ := p.newPool(false, false)
	p.entry("racer", "")
	p.afterLive = func(n int) {
		if n == 1 {
			if _, err := other.Place(p.ctx, p.getEntry("racer")); err != nil {
				t.Errorf("place racer: %v", err)
			}
		}
	}
	p.clock.Step(grace)
	p.liveCalls = 0
	d, err := p.pool.DeleteEmpty(p.ctx, p.bucket("p-2"))
	p.afterLive = nil
	if d.Deleted {
		t.Errorf("DeleteEmpty: %+v, %v; want p-2 kept", d, err)
	}
	p.settle()
	if e := p.getEntry("racer"); e.Spec.Bucket != "p-2" {
		t.Errorf("racer placed in %q, want p-2", e.Spec.Bucket)
	}
	p.checkEntries()
}

func (p *gcPool) getEntry(name string) backup {
	p.t.Helper()
	var e testbackup.Backup
	if err := p.cl.Get(p.ctx, client.ObjectKey{Namespace: p.ns, Name: name}, &e); err != nil {
		p.t.Fatal(err)
	}
	return &e
}

// An entry created and admitted between the decision's fresh read and the
// mark (it names the bucket, it takes no place) is seen by the fresh read
// after the mark: the deletion is given up before the store is touched,
// and the entry's data stays.
func TestPoolEntryBeforeTheMarkKeepsItsData(t *testing.T) {
	p := newGCPool(t, testenv.File(t), false)
	p.twoBuckets()
	p.afterLive = func(n int) {
		if n == 1 {
			p.entry("direct", "p-2")
			if err := p.reconcileEntry(p.pool, "direct"); err != nil {
				t.Errorf("admit direct: %v", err)
			}
			if err := p.marker("direct"); err != nil {
				t.Errorf("direct not admitted before the mark: %v", err)
			}
		}
	}
	p.clock.Step(grace)
	p.liveCalls = 0
	d, err := p.pool.DeleteEmpty(p.ctx, p.bucket("p-2"))
	p.afterLive = nil
	if err != nil || d.Deleted || d.Store != nil {
		t.Errorf("DeleteEmpty: %+v, %v; want p-2 kept, its store untouched", d, err)
	}
	p.settle()
	p.checkEntries()
}

// While the store's bucket is being deleted: a placement goes to another
// bucket (Place skips the marked one and grows the pool), and an entry
// that names the marked bucket is not admitted to it; that entry makes
// the last fresh read give the deletion up, and the bucket, provisioned
// again, admits it.
func TestPoolDuringTheDeletion(t *testing.T) {
	p := newGCPool(t, testenv.File(t), false)
	p.twoBuckets()
	other, _ := p.newPool(false, false)
	p.entry("placed", "")
	p.inDeprovision = func() {
		p.inDeprovision = nil
		name, err := other.Place(p.ctx, p.getEntry("placed"))
		if name == "p-2" || !errors.Is(err, pool.ErrPoolFull) {
			t.Errorf("Place during the deletion: %q, %v; want the pool grown (ErrPoolFull)", name, err)
		}
		if name, err := other.Place(p.ctx, p.getEntry("placed")); name != "p-3" || err != nil {
			t.Errorf("Place once the pool grew: %q, %v; want p-3", name, err)
		}
		p.entry("direct", "p-2")
		if err := p.reconcileEntry(p.pool, "direct"); err != nil {
			t.Errorf("reconcile direct: %v", err)
		}
		e := p.getEntry("direct")
		if c := meta.FindStatusCondition(e.Status.Conditions, share.ConditionAdmitted); e.Status.Prefix != "" || c == nil || c.Reason != share.ReasonBucketDeleting {
			t.Errorf("direct during the deletion: prefix %q, condition %+v; want refused with %s", e.Status.Prefix, c, share.ReasonBucketDeleting)
		}
	}
	p.clock.Step(grace)
	d, err := p.pool.DeleteEmpty(p.ctx, p.bucket("p-2"))
	if err != nil || d.Deleted || !strings.Contains(d.Kept, "direct") {
		t.Errorf("DeleteEmpty: %+v, %v; want it given up for direct", d, err)
	}
	p.settle()
	if e := p.getEntry("placed"); e.Spec.Bucket != "p-3" {
		t.Errorf("placed in %q, want p-3", e.Spec.Bucket)
	}
	p.checkEntries()
}

// A bucket object recreated under the same name while the store's bucket
// is deleted is not deleted: the object's deletion carries the UID and
// resourceVersion of the last fresh read.
func TestPoolDeletesOnlyTheObjectItRead(t *testing.T) {
	p := newGCPool(t, testenv.File(t), false)
	p.twoBuckets()
	var uid string
	p.afterLive = func(n int) {
		if n != 3 {
			return
		}
		old := p.bucket("p-2")
		old.Finalizers = nil
		if err := p.cl.Update(p.ctx, old); err != nil {
			t.Fatal(err)
		}
		if err := p.cl.Delete(p.ctx, old); err != nil {
			t.Fatal(err)
		}
		// Recreated as the pool would create it.
		b := &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: p.bns, Name: "p-2",
			Annotations: map[string]string{pool.AnnotationCreatedBy: old.Annotations[pool.AnnotationCreatedBy]}}, Spec: old.Spec}
		if err := p.cl.Create(p.ctx, b); err != nil {
			t.Fatal(err)
		}
		uid = string(b.UID)
	}
	p.clock.Step(grace)
	p.liveCalls = 0
	d, err := p.pool.DeleteEmpty(p.ctx, p.bucket("p-2"))
	p.afterLive = nil
	if !apierrors.IsConflict(errors.Unwrap(err)) || d.Deleted {
		t.Errorf("DeleteEmpty: %+v, %v; want a conflict", d, err)
	}
	if b := p.bucket("p-2"); b == nil || string(b.UID) != uid {
		t.Errorf("the recreated p-2 (UID %s): %+v", uid, b)
	}
}

// A dry run reports the bucket whose grace period is over with what its
// deletion would delete (its owner marker), or why it would not (an
// object besides the marker: StoreNotEmpty), and deletes and marks
// nothing.
func TestPoolDryRunDeletesNothing(t *testing.T) {
	p := newGCPool(t, testenv.File(t), true)
	p.twoBuckets()
	b, err := backupstore.OpenBucket(p.ctx, p.storeURL("p-2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.WriteAll(p.ctx, "leftover/1", []byte("abc"), nil); err != nil {
		t.Fatal(err)
	}
	p.clock.Step(grace)
	marker, err := b.ReadAll(p.ctx, pool.BucketOwnerKey)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.pool.DeleteEmpty(p.ctx, p.bucket("p-2"))
	if err != nil || d.Deleted || d.Store != nil || !strings.Contains(d.Kept, "leftover/1") {
		t.Errorf("dry run, an object besides the marker: %+v, %v; want p-2 kept, naming leftover/1", d, err)
	}
	if err := b.Delete(p.ctx, "leftover/1"); err != nil {
		t.Fatal(err)
	}
	d, err = p.pool.DeleteEmpty(p.ctx, p.bucket("p-2"))
	if want := int64(len(marker)); err != nil || !d.Deleted || d.Store == nil || !slices.Equal(d.Store.Keys, []string{pool.BucketOwnerKey}) || d.Store.Bytes != want {
		t.Errorf("dry run: %+v (store %+v), %v; want p-2 with its owner marker, %d bytes", d, d.Store, err, want)
	}
	if err := b.WriteAll(p.ctx, "leftover/1", []byte("abc"), nil); err != nil {
		t.Fatal(err)
	}
	p.settle()
	if b := p.bucket("p-2"); b == nil || b.DeletionTimestamp != nil || b.Annotations[share.AnnotationDeleting] != "" || !p.storeExists("p-2") {
		t.Errorf("p-2 after a dry run: %+v", b)
	}
	if data, err := b.ReadAll(p.ctx, "leftover/1"); err != nil || string(data) != "abc" {
		t.Errorf("leftover/1 after a dry run: %q, %v", data, err)
	}
}

// New refuses a negative grace period, and a grace period without
// the store's deletion or the fresh list of entries, naming the fields.
func TestNewPoolDeletionConfig(t *testing.T) {
	c, err := collect.New(collect.Config[backup]{Objects: noObjects{}, Finalizer: &collect.Finalizer[backup]{Name: "f"}, Secrets: backupstore.SecretsFrom(nil),
		Location: func(context.Context, backup) (collect.Location, error) { return collect.Location{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := share.New(share.Config[backup, backup]{
		Entries: noObjects{}, Buckets: noObjects{}, Collector: c, BucketFinalizer: "g",
		Bucket: func(b backup) (string, string) { return b.Namespace, b.Spec.Bucket },
		Limit:  func(backup) int { return 1 },
		Prefix: func(b backup) *string { return &b.Status.Prefix },
	})
	if err != nil {
		t.Fatal(err)
	}
	newBucket := func(string, int) (backup, error) { return nil, nil }
	full := func() pool.Config[backup, backup] {
		return pool.Config[backup, backup]{
			Share: s, Pool: func(backup) (string, error) { return "p", nil }, Member: func(backup) string { return "p" },
			Grower: growerFuncs{NewBucket: newBucket, Deprovision: func(context.Context, backup, *backupstore.DeleteOptions) (*backupstore.DeleteResult, error) {
				return nil, nil
			}}.grower(),
			Create: func(context.Context, backup) error { return nil },
			Claims: func(b backup) *[]string { return &b.Status.Claims }, Assign: func(backup, string, string) {},
			DeleteEmptyAfter: time.Hour,
			LiveEntries:      func(context.Context) ([]backup, error) { return nil, nil },
		}
	}
	if _, err := pool.New(full()); err != nil {
		t.Fatalf("a full pool.Config: %v", err)
	}
	for _, tc := range []struct {
		field  string
		change func(*pool.Config[backup, backup])
	}{
		{"DeleteEmptyAfter = -1s", func(c *pool.Config[backup, backup]) { c.DeleteEmptyAfter = -time.Second }},
		{"pool.Config.Grower's Deprovision", func(c *pool.Config[backup, backup]) { c.Grower = growerFuncs{NewBucket: newBucket}.grower() }},
		{"pool.Config.LiveEntries", func(c *pool.Config[backup, backup]) { c.LiveEntries = nil }},
	} {
		cfg := full()
		tc.change(&cfg)
		if _, err := pool.New(cfg); !errors.Is(err, share.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming it", tc.field, err)
		}
	}
	cfg := full()
	cfg.DeleteEmptyAfter, cfg.Grower, cfg.LiveEntries = 0, growerFuncs{NewBucket: newBucket}.grower(), nil
	if _, err := pool.New(cfg); err != nil {
		t.Errorf("no deletion, no Deprovision: %v", err)
	}
}

// A bucket of the pool that the pool did not create (an administrator's)
// is never deleted, however long it has been empty.
func TestPoolDeletesOnlyTheBucketsItCreated(t *testing.T) {
	p := newGCPool(t, testenv.File(t), false)
	p.twoBuckets()
	b := p.bucket("p-2")
	if b.Annotations[pool.AnnotationCreatedBy] == "" {
		t.Fatalf("p-2, grown by the pool, has no %s annotation: %v", pool.AnnotationCreatedBy, b.Annotations)
	}
	delete(b.Annotations, pool.AnnotationCreatedBy)
	if err := p.cl.Update(p.ctx, b); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		p.clock.Step(grace)
		if d, err := p.pool.DeleteEmpty(p.ctx, p.bucket("p-2")); err != nil || d.Deleted {
			t.Fatalf("DeleteEmpty of a bucket the pool did not create: %+v, %v; want kept", d, err)
		}
	}
	if p.bucket("p-2") == nil || !p.storeExists("p-2") {
		t.Error("a bucket the pool did not create was deleted")
	}
}

// A pool keeps the administrator's bucket, never deleted anyway, and not
// also a bucket it created that sorts before it: that one is deleted once
// empty.
func TestPoolKeepsTheAdministratorsBucketAndNoOther(t *testing.T) {
	p := newGCPool(t, testenv.File(t), false)
	p.twoBuckets()
	// The roles swapped: p-1, first by name, created by the pool; p-2 the
	// administrator's.
	created := p.bucket("p-2").Annotations[pool.AnnotationCreatedBy]
	for name, createdBy := range map[string]string{"p-1": created, "p-2": ""} {
		b := p.bucket(name)
		if createdBy == "" {
			delete(b.Annotations, pool.AnnotationCreatedBy)
		} else {
			metav1.SetMetaDataAnnotation(&b.ObjectMeta, pool.AnnotationCreatedBy, createdBy)
		}
		if err := p.cl.Update(p.ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	p.deleteEntry("e0")
	p.settle()
	p.clock.Step(grace)
	p.settle()
	p.clock.Step(grace)
	p.settle()
	if b := p.bucket("p-1"); b != nil || p.storeExists("p-1") {
		t.Errorf("p-1, created by the pool and empty past its grace period: object there %t, store's bucket there %t; want it deleted", b != nil, p.storeExists("p-1"))
	}
	if b := p.bucket("p-2"); b == nil || !p.storeExists("p-2") {
		t.Errorf("p-2, the administrator's: object there %t, store's bucket there %t; want it kept", b != nil, p.storeExists("p-2"))
	}
}

// Two installations (two clusters: here two namespaces of one API server,
// each with its own pool controller) with pools of the same name share one
// store (MinIO), and their NewBucket names a store bucket by the pool's
// name and number alone, as Grow did before the installation's hash (and
// as two installations given one Installation still do): every store
// bucket the second pool grows into first is the first's. The owner
// markers keep them apart: the second pool places and admits no entry in
// the first's store buckets (its bucket objects over them are marked
// StoreNotOwned, by Place itself when it grows faster than the buckets are
// reconciled, and an entry that names one is refused), grows past them
// into store buckets of its own, and, when its entries go, deletes only
// its own store bucket; the first's entries, their data and store
// buckets stay.
func TestPoolsOfTwoInstallationsShareAStore(t *testing.T) {
	t.Parallel()
	store := testenv.S3(t)
	a := newGCPool(t, store, false)
	a.place("e0", "e1") // p-1 and p-2, the first installation's
	data, err := backupstore.OpenBucket(a.ctx, a.storeURL("p-2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	if err := data.WriteAll(a.ctx, a.ns+".e1/backup-1", []byte("a's backup"), nil); err != nil {
		t.Fatal(err)
	}

	b := newGCPool(t, store, false)
	b.installation = "cluster-b"
	b.pool, b.cl = b.newPool(false, true)
	// f0 is placed before any bucket of the second installation is
	// reconciled (Place alone, again after each growth): Place proves each
	// new bucket before it takes a place there, and grows past the first's.
	b.entry("f0", "")
	for i := 0; ; i++ {
		name, err := b.pool.Place(b.ctx, b.getEntry("f0"))
		if err == nil {
			if name != "p-3" {
				t.Errorf("f0 placed by Place alone in %s, want p-3", name)
			}
			break
		}
		if !errors.Is(err, pool.ErrPoolFull) || i == 5 {
			t.Fatalf("Place f0 (%d): %v", i+1, err)
		}
	}
	b.settle()
	if err := b.marker("f0"); err != nil {
		t.Fatal(err)
	}
	b.place("f1")
	if f0, f1 := b.getEntry("f0"), b.getEntry("f1"); f0.Spec.Bucket != "p-3" || f1.Spec.Bucket != "p-4" {
		t.Errorf("the second installation's entries placed in %s and %s, want p-3 and p-4 (p-1 and p-2 name the first's store buckets)", f0.Spec.Bucket, f1.Spec.Bucket)
	}
	for _, name := range []string{"p-1", "p-2"} {
		if o := b.bucket(name); o == nil || !strings.Contains(o.Annotations[pool.AnnotationStoreNotOwned], "holds the owner marker of bucket "+a.bns+"/"+name) {
			t.Errorf("the second installation's %s: %+v; want it marked %s, naming the first's bucket", name, o, pool.AnnotationStoreNotOwned)
		}
	}
	b.entry("direct", "p-2")
	b.settle()
	e := b.getEntry("direct")
	if c := meta.FindStatusCondition(e.Status.Conditions, share.ConditionAdmitted); e.Status.Prefix != "" || c == nil || c.Reason != pool.ReasonStoreNotOwned {
		t.Errorf("an entry of the second installation naming p-2: prefix %q, condition %+v; want refused, %s", e.Status.Prefix, c, pool.ReasonStoreNotOwned)
	}

	// The second installation's entries go, and its empty buckets' grace
	// periods pass.
	b.deleteEntry("direct")
	b.deleteEntry("f1")
	b.settle()
	for range 2 {
		b.clock.Step(grace)
		b.settle()
	}
	if o := b.bucket("p-4"); o != nil || b.storeExists("p-4") {
		t.Errorf("the second installation's own p-4, empty past its grace period: object there %t, store's bucket there %t; want it deleted", o != nil, b.storeExists("p-4"))
	}
	for _, name := range []string{"p-1", "p-2"} {
		if o := b.bucket(name); o == nil || o.Annotations[share.AnnotationDeleting] != "" {
			t.Errorf("the second installation's %s (not its store's bucket): %+v; want it kept, unmarked", name, o)
		}
	}
	// Nothing of the second installation's in the first's store buckets,
	// and all of the first's there.
	for name, want := range map[string][]string{"p-1": {a.ns + ".e0"}, "p-2": {a.ns + ".e1"}} {
		sb, err := backupstore.OpenBucket(a.ctx, a.storeURL(name), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := share.Entries(a.ctx, sb, "")
		sb.Close()
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("the first installation's store bucket %s holds entries %v, %v; want %v", name, got, err, want)
		}
	}
	if got, err := data.ReadAll(a.ctx, a.ns+".e1/backup-1"); err != nil || string(got) != "a's backup" {
		t.Errorf("the first installation's backup e1/backup-1: %q, %v", got, err)
	}
	a.checkEntries()
	b.checkEntries()
}

// A bucket the pool created whose store bucket holds no owner marker and
// does not bear the name this installation gives it (a store bucket a
// pool created before owner markers, or one that existed) is not deleted
// when its grace period is over: Deprovision refuses it (ErrNotOwned),
// the deletion is given up and the bucket marked StoreNotOwned, its data
// kept, and it takes no place. Once an administrator adopts it with the
// object's UID, it gets its marker and loses the mark; its data, no
// entry's of the pool, keeps it (StoreNotEmpty) until its owner deletes
// it, and then it goes after its grace period like any empty bucket of
// the pool.
func TestPoolKeepsAStoreBucketItCannotProve(t *testing.T) {
	t.Parallel()
	p := newGCPool(t, testenv.File(t), false)
	p.twoBuckets()
	store, err := backupstore.OpenBucket(p.ctx, p.storeURL("p-2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Delete(p.ctx, pool.BucketOwnerKey); err != nil {
		t.Fatal(err)
	}
	if err := store.WriteAll(p.ctx, "theirs/backup", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	p.clock.Step(grace)
	d, err := p.pool.DeleteEmpty(p.ctx, p.bucket("p-2"))
	if err != nil || d.Deleted || !strings.Contains(d.Kept, "holds no owner marker") {
		t.Errorf("DeleteEmpty of p-2 without a marker: %+v, %v; want it kept, no owner marker", d, err)
	}
	b := p.bucket("p-2")
	if b == nil || b.Annotations[pool.AnnotationStoreNotOwned] == "" || b.Annotations[share.AnnotationDeleting] != "" || b.Annotations[pool.AnnotationEmptySince] != "" {
		t.Fatalf("p-2 after the refused deletion: %+v; want it marked %s, neither marked for deletion nor stamped", b, pool.AnnotationStoreNotOwned)
	}
	if data, err := store.ReadAll(p.ctx, "theirs/backup"); err != nil || string(data) != "x" {
		t.Errorf("p-2's data after the refused deletion: %q, %v", data, err)
	}
	p.clock.Step(2 * grace)
	p.settle()
	if b := p.bucket("p-2"); b == nil || !p.storeExists("p-2") {
		t.Fatalf("p-2, not proven the pool's, after two more grace periods: object there %t, store's bucket there %t; want both kept", b != nil, p.storeExists("p-2"))
	}
	p.entry("e2", "")
	p.settle()
	if e := p.getEntry("e2"); e.Spec.Bucket == "p-2" || e.Spec.Bucket == "" {
		t.Errorf("e2 placed in %q; want a bucket other than p-2", e.Spec.Bucket)
	}
	p.deleteEntry("e2")
	p.settle()

	b = p.bucket("p-2")
	metav1.SetMetaDataAnnotation(&b.ObjectMeta, pool.AnnotationAdoptStore, string(b.UID))
	if err := p.cl.Update(p.ctx, b); err != nil {
		t.Fatal(err)
	}
	p.settle()
	if b := p.bucket("p-2"); b == nil || b.Annotations[pool.AnnotationStoreNotOwned] != "" {
		t.Fatalf("p-2 adopted: %+v; want it unmarked", b)
	}
	if marker, err := store.ReadAll(p.ctx, pool.BucketOwnerKey); err != nil || !strings.Contains(string(marker), string(b.UID)) {
		t.Errorf("p-2's marker once adopted: %s, %v", marker, err)
	}
	for range 2 {
		p.clock.Step(grace)
		p.settle()
	}
	if b := p.bucket("p-2"); b == nil || !p.storeExists("p-2") {
		t.Fatalf("p-2 adopted, its store's bucket holding theirs/backup: object there %t, store's bucket there %t; want both kept", b != nil, p.storeExists("p-2"))
	}
	if data, err := store.ReadAll(p.ctx, "theirs/backup"); err != nil || string(data) != "x" {
		t.Errorf("p-2's data once adopted: %q, %v; want it kept", data, err)
	}
	if err := store.Delete(p.ctx, "theirs/backup"); err != nil { // by its owner
		t.Fatal(err)
	}
	for range 2 {
		p.clock.Step(grace)
		p.settle()
	}
	if b := p.bucket("p-2"); b != nil || p.storeExists("p-2") {
		t.Errorf("p-2, adopted and empty past its grace period: object there %t, store's bucket there %t; want it deleted", b != nil, p.storeExists("p-2"))
	}
	p.checkEntries()
}
