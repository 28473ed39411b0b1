package pool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// inNamespace lists one namespace, whatever it is asked: entries and
// buckets are both testbackup Backups, in two namespaces.
type inNamespace struct {
	collect.Objects[backup]
	ns string
}

func (o inNamespace) List(ctx context.Context, _ string) ([]backup, error) {
	return o.Objects.List(ctx, o.ns)
}

// Two placers (two replicas, each with its own client) place 9 entries at
// once in a pool with a limit of 2 per bucket, retrying on conflicts and
// on a full pool, on a real API server: every entry gets one place, no
// bucket holds more than 2, the pool grows to 5 buckets named 1 to 5 and
// no bucket is created twice.
func TestPoolPlacementIsRaceFree(t *testing.T) {
	k, scheme, bucketNS := controlPlane(t)
	ctx := context.Background()
	var creates sync.Map // name -> number of successful creates
	newPool := func() *pool.Pool[backup, backup] {
		cl, err := client.New(k.Config, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		s := placingShare(t, cl, k.Namespace, bucketNS)
		p, err := pool.New(pool.Config[backup, backup]{
			Share:  s,
			Pool:   func(e backup) (string, error) { return e.Spec.Pool, nil },
			Member: func(b backup) string { return b.Spec.Pool },
			Grower: growerFuncs{NewBucket: func(pool string, n int) (backup, error) {
				return &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: bucketNS, Name: fmt.Sprintf("%s-%d", pool, n)},
					Spec: testbackup.Spec{Pool: pool, Limit: 2}}, nil
			}}.grower(),
			Create: func(ctx context.Context, b backup) error {
				err := cl.Create(ctx, b)
				if err == nil {
					v, _ := creates.LoadOrStore(b.Name, new(int))
					*v.(*int)++
				}
				return err
			},
			Claims: func(b backup) *[]string { return &b.Status.Claims },
			Assign: func(e backup, _, name string) { e.Spec.Bucket = name },
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cl, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	const n = 9
	for i := range n {
		if err := cl.Create(ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: fmt.Sprintf("e%d", i)},
			Spec: testbackup.Spec{Pool: "aws-eu1"}}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for range 2 {
		p := newPool()
		wg.Go(func() {
			for i := range n {
				name := fmt.Sprintf("e%d", i)
				for deadline := time.Now().Add(time.Minute); ; {
					var e testbackup.Backup
					if err := cl.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: name}, &e); err != nil {
						errs <- err
						return
					}
					if e.Spec.Bucket != "" {
						break
					}
					_, err := p.Place(ctx, &e)
					if err == nil {
						break
					}
					if !errors.Is(err, pool.ErrPoolFull) && !apierrors.IsConflict(errors.Unwrap(err)) && !apierrors.IsConflict(err) {
						errs <- fmt.Errorf("place %s: %w", name, err)
						return
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("place %s: still %w", name, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	var bl testbackup.BackupList
	if err := cl.List(ctx, &bl, client.InNamespace(bucketNS)); err != nil {
		t.Fatal(err)
	}
	claimedBy := map[string]string{}
	var names []string
	for _, b := range bl.Items {
		names = append(names, b.Name)
		if len(b.Status.Claims) > b.Spec.Limit {
			t.Errorf("bucket %s holds %d entries %v, limit %d", b.Name, len(b.Status.Claims), b.Status.Claims, b.Spec.Limit)
		}
		for _, c := range b.Status.Claims {
			if prev, ok := claimedBy[c]; ok {
				t.Errorf("entry %s claimed by buckets %s and %s", c, prev, b.Name)
			}
			claimedBy[c] = b.Name
		}
	}
	slices.Sort(names)
	if want := []string{"aws-eu1-1", "aws-eu1-2", "aws-eu1-3", "aws-eu1-4", "aws-eu1-5"}; !slices.Equal(names, want) {
		t.Errorf("buckets %v, want %v", names, want)
	}
	creates.Range(func(k, v any) bool {
		if *v.(*int) != 1 {
			t.Errorf("bucket %s created %d times", k, *v.(*int))
		}
		return true
	})
	var el testbackup.BackupList
	if err := cl.List(ctx, &el, client.InNamespace(k.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range el.Items {
		if got := claimedBy[k.Namespace+"/"+e.Name]; got == "" || got != e.Spec.Bucket {
			t.Errorf("entry %s names bucket %q, claimed by %q", e.Name, e.Spec.Bucket, got)
		}
	}
}

// The pool in the reconcile path (what crt/backups.Sharing runs), on a real
// API server with file:// stores: five entries of one pool, two per
// bucket, are placed, the pool grows to three buckets, each provisioned
// (backupstore.CreateBucket) before its entries are admitted with their
// markers; an entry gone frees its place (Release).
func TestPoolReconcileGrowsAndAdmits(t *testing.T) {
	k, scheme, bucketNS := controlPlane(t)
	ctx := context.Background()
	cl, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries := inNamespace{backups.Objects[backup](cl, cl), k.Namespace}
	buckets := inNamespace{backups.Objects[backup](cl, cl), bucketNS}
	c, err := collect.New(collect.Config[backup]{Objects: entries, Finalizer: &collect.Finalizer[backup]{Name: "example.com/data"}, Secrets: backupstore.SecretsFrom(nil),
		Location: func(ctx context.Context, e backup) (collect.Location, error) {
			b, err := buckets.Get(ctx, bucketNS, e.Spec.Bucket)
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
		Bucket: func(e backup) (string, string) { return bucketNS, e.Spec.Bucket },
		Limit:  func(b backup) int { return b.Spec.Limit },
		Prefix: func(e backup) *string { return &e.Status.Prefix },
		Marker: func(e backup) []byte { return []byte(e.Name) }, MarkerKey: "marker",
	})
	if err != nil {
		t.Fatal(err)
	}
	provisioned := map[string]int{}
	p, err := pool.New(pool.Config[backup, backup]{
		Share: s, Create: func(ctx context.Context, b backup) error { return cl.Create(ctx, b) },
		Pool:   func(e backup) (string, error) { return e.Spec.Pool, nil },
		Member: func(b backup) string { return b.Spec.Pool },
		Grower: growerFuncs{NewBucket: func(pool string, n int) (backup, error) {
			name := fmt.Sprintf("%s-%d", pool, n)
			return &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: bucketNS, Name: name},
				Spec: testbackup.Spec{Pool: pool, Limit: 2, Prefix: "file://" + dir + "/" + name}}, nil
		}, Provision: func(ctx context.Context, b backup) error {
			provisioned[b.Name]++
			_, err := backupstore.CreateBucket(ctx, b.Spec.Prefix, nil)
			return err
		}}.grower(),
		Claims: func(b backup) *[]string { return &b.Status.Claims },
		Assign: func(e backup, _, name string) { e.Spec.Bucket = name },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := cl.Create(ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: fmt.Sprintf("shoot-%d", i)},
			Spec: testbackup.Spec{Pool: "aws-eu1"}}); err != nil {
			t.Fatal(err)
		}
	}
	// The controllers, played by hand: every entry, then every bucket.
	round := func() (admitted int) {
		var el, bl testbackup.BackupList
		if err := cl.List(ctx, &el, client.InNamespace(k.Namespace)); err != nil {
			t.Fatal(err)
		}
		for i := range el.Items {
			if _, err := p.ReconcileEntry(ctx, &el.Items[i]); err != nil && !apierrors.IsConflict(err) && !errors.Is(err, share.ErrBucketFull) {
				t.Logf("entry %s: %v", el.Items[i].Name, err)
			}
			if el.Items[i].Status.Prefix != "" {
				admitted++
			}
		}
		if err := cl.List(ctx, &bl, client.InNamespace(bucketNS)); err != nil {
			t.Fatal(err)
		}
		for i := range bl.Items {
			if _, err := p.ReconcileBucket(ctx, &bl.Items[i]); err != nil && !apierrors.IsConflict(err) {
				t.Logf("bucket %s: %v", bl.Items[i].Name, err)
			}
		}
		return admitted
	}
	for r := 0; round() < 5; r++ {
		if r == 30 {
			t.Fatal("not every entry admitted after 30 rounds")
		}
	}
	var bl testbackup.BackupList
	if err := cl.List(ctx, &bl, client.InNamespace(bucketNS)); err != nil {
		t.Fatal(err)
	}
	if len(bl.Items) != 3 {
		t.Errorf("%d buckets, want 3", len(bl.Items))
	}
	var el testbackup.BackupList
	if err := cl.List(ctx, &el, client.InNamespace(k.Namespace)); err != nil {
		t.Fatal(err)
	}
	perBucket := map[string]int{}
	for _, e := range el.Items {
		perBucket[e.Spec.Bucket]++
		marker := filepath.Join(dir, e.Spec.Bucket, e.Namespace+"."+e.Name, "marker")
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("entry %s in bucket %s: no marker: %v", e.Name, e.Spec.Bucket, err)
		}
	}
	for _, b := range bl.Items {
		if perBucket[b.Name] > 2 || provisioned[b.Name] == 0 {
			t.Errorf("bucket %s: %d entries, provisioned %d times", b.Name, perBucket[b.Name], provisioned[b.Name])
		}
	}
	// shoot-0 goes (no finalizer work: file data, no grace): its place is
	// freed once it is gone.
	e0 := &testbackup.Backup{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: "shoot-0"}, e0); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, e0); err != nil {
		t.Fatal(err)
	}
	for r := 0; ; r++ {
		round()
		var b testbackup.Backup
		if err := cl.Get(ctx, client.ObjectKey{Namespace: bucketNS, Name: e0.Spec.Bucket}, &b); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(b.Status.Claims, k.Namespace+"/shoot-0") {
			break
		}
		if r == 30 {
			t.Fatalf("shoot-0's place in %s not freed: claims %v", b.Name, b.Status.Claims)
		}
	}
}

// An entry whose pool Pool refuses (an unknown provider), and one whose
// pool NewBucket cannot grow, get Admitted=False, NoPool, with the
// refusal's message, on a real API server; no bucket is created. The
// first waits for a change of the entry, the second is placed again after
// GrowWait.
func TestPoolRefusalIsACondition(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	k := testenv.StartKubernetes(t)
	if _, err := testbackup.Install(k.Config); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := testbackup.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	s := placingShare(t, cl, k.Namespace, k.Namespace+"-buckets")
	created := 0
	p, err := pool.New(pool.Config[backup, backup]{
		Share: s, GrowWait: 7 * time.Second,
		Pool: func(e backup) (string, error) {
			if e.Spec.Pool == "gcp" {
				return "", fmt.Errorf("provider %q has no quota", e.Spec.Pool)
			}
			return e.Spec.Pool, nil
		},
		Member: func(b backup) string { return b.Spec.Pool },
		Grower: growerFuncs{NewBucket: func(pool string, n int) (backup, error) {
			return nil, fmt.Errorf("no bucket of pool %q to take the URL from", pool)
		}, Provision: func(context.Context, backup) error { return nil }}.grower(),
		Create: func(context.Context, backup) error { created++; return nil },
		Claims: func(b backup) *[]string { return &b.Status.Claims },
		Assign: func(e backup, _, name string) { e.Spec.Bucket = name },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pool, message string
		after         time.Duration
	}{
		{"gcp", `entry e-gcp has no pool: provider "gcp" has no quota`, 0},
		{"aws", `pool "aws" cannot grow: no bucket of pool "aws" to take the URL from`, 7 * time.Second},
	} {
		e := &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "e-" + tc.pool}, Spec: testbackup.Spec{Pool: tc.pool}}
		if err := cl.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		after, err := p.ReconcileEntry(ctx, e)
		if err != nil || after != tc.after {
			t.Errorf("%s: ReconcileEntry = %v, %v; want %v, nil", e.Name, after, err, tc.after)
		}
		var got testbackup.Backup
		if err := cl.Get(ctx, client.ObjectKeyFromObject(e), &got); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, share.ConditionAdmitted)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != share.ReasonNoPool || cond.Message != tc.message {
			t.Errorf("%s: condition %+v, want Admitted=False, NoPool, %q", e.Name, cond, tc.message)
		}
		if got.Spec.Bucket != "" || got.Status.Prefix != "" {
			t.Errorf("%s: bucket %q, prefix %q; want none", e.Name, got.Spec.Bucket, got.Status.Prefix)
		}
	}
	if created != 0 {
		t.Errorf("%d buckets created, want 0", created)
	}
}

// placingShare is a Share for placement only: entries in ns, buckets in
// bucketNS, no data (the collector's Location is empty).
func placingShare(t *testing.T, cl client.Client, ns, bucketNS string) *share.Share[backup, backup] {
	t.Helper()
	return placingShareOver(t, cl, ns, bucketNS, inNamespace{backups.Objects[backup](cl, cl), bucketNS})
}

// placingShareOver is placingShare with buckets read through buckets.
func placingShareOver(t *testing.T, cl client.Client, ns, bucketNS string, buckets collect.Objects[backup]) *share.Share[backup, backup] {
	t.Helper()
	entries := inNamespace{backups.Objects[backup](cl, cl), ns}
	c, err := collect.New(collect.Config[backup]{Objects: entries, Finalizer: &collect.Finalizer[backup]{Name: "f"}, Secrets: backupstore.SecretsFrom(nil),
		Location: func(context.Context, backup) (collect.Location, error) { return collect.Location{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	s, err := share.New(share.Config[backup, backup]{
		Entries: entries, Buckets: buckets, Collector: c, BucketFinalizer: "g",
		Bucket: func(b backup) (string, string) { return bucketNS, b.Spec.Bucket },
		Limit:  func(b backup) int { return b.Spec.Limit },
		Prefix: func(b backup) *string { return &b.Status.Prefix },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An object named like the pool's next bucket that is not a member of the
// pool (another pool's) is never taken for the pool's growth, on a real
// API server: Place skips its name and grows the pool by the next number,
// whether the object is in its list or found only by the creation
// (AlreadyExists: a cache that has not seen it), places the entry there
// once it exists, and leaves the object alone.
func TestPoolGrowsPastAnUnrelatedObject(t *testing.T) {
	k, scheme, bucketNS := controlPlane(t)
	ctx := context.Background()
	cl, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pool   string
		hidden bool
	}{{"listed", false}, {"hidden", true}} {
		t.Run(tc.pool, func(t *testing.T) {
			unrelated := &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: bucketNS, Name: tc.pool + "-1"}, Spec: testbackup.Spec{Pool: "another", Limit: 5}}
			if err := cl.Create(ctx, unrelated); err != nil {
				t.Fatal(err)
			}
			var buckets collect.Objects[backup] = inNamespace{backups.Objects[backup](cl, cl), bucketNS}
			if tc.hidden {
				buckets = hiding{buckets, unrelated.Name}
			}
			p, err := pool.New(pool.Config[backup, backup]{
				Share:  placingShareOver(t, cl, k.Namespace, bucketNS, buckets),
				Pool:   func(e backup) (string, error) { return e.Spec.Pool, nil },
				Member: func(b backup) string { return b.Spec.Pool },
				Grower: growerFuncs{NewBucket: func(pool string, n int) (backup, error) {
					return &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: bucketNS, Name: fmt.Sprintf("%s-%d", pool, n)},
						Spec: testbackup.Spec{Pool: pool, Limit: 1}}, nil
				}}.grower(),
				Create: func(ctx context.Context, b backup) error { return cl.Create(ctx, b) },
				Claims: func(b backup) *[]string { return &b.Status.Claims },
				Assign: func(e backup, _, name string) { e.Spec.Bucket = name },
			})
			if err != nil {
				t.Fatal(err)
			}
			e := &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "e-" + tc.pool}, Spec: testbackup.Spec{Pool: tc.pool}}
			if err := cl.Create(ctx, e); err != nil {
				t.Fatal(err)
			}
			if name, err := p.Place(ctx, e); !errors.Is(err, pool.ErrPoolFull) || name != "" {
				t.Fatalf("first Place: %q, %v; want the pool grown (ErrPoolFull)", name, err)
			}
			name, err := p.Place(ctx, e)
			if err != nil || name != tc.pool+"-2" {
				t.Errorf("Place once the pool grew: %q, %v; want %s-2, past the unrelated %s", name, err, tc.pool, unrelated.Name)
			}
			var got testbackup.Backup
			if err := cl.Get(ctx, client.ObjectKeyFromObject(unrelated), &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec != unrelated.Spec || len(got.Status.Claims) != 0 || got.Annotations[pool.AnnotationCreatedBy] != "" {
				t.Errorf("the unrelated object after the placement: spec %+v, claims %v, annotations %v; want it untouched", got.Spec, got.Status.Claims, got.Annotations)
			}
		})
	}
}

// hiding is a cache that has not seen one bucket object yet.
type hiding struct {
	collect.Objects[backup]
	name string
}

func (h hiding) List(ctx context.Context, ns string) ([]backup, error) {
	all, err := h.Objects.List(ctx, ns)
	return slices.DeleteFunc(all, func(b backup) bool { return b.Name == h.name }), err
}

// staleBuckets lists the buckets as they were at its first List, as a
// cache that has not seen a later change; Get reads the API server.
type staleBuckets struct {
	collect.Objects[backup]
	once sync.Once
	seen []backup
	err  error
}

func (s *staleBuckets) List(ctx context.Context, ns string) ([]backup, error) {
	s.once.Do(func() { s.seen, s.err = s.Objects.List(ctx, ns) })
	out := make([]backup, len(s.seen))
	for i, b := range s.seen {
		out[i] = b.DeepCopyObject().(backup)
	}
	return out, s.err
}

// A placer whose list of buckets is behind another replica's claim reads
// the bucket again before it claims a place there (its grower provisions
// stores); finding the entry's claim in that fresh read, it takes that
// place and claims none again, on a real API server. (backup-entry's
// TestPoolGrows, two replicas, once found an entry claimed twice: one
// entry taking two of the bucket's places.)
func TestPoolClaimsNoPlaceTwice(t *testing.T) {
	k, scheme, bucketNS := controlPlane(t)
	ctx := context.Background()
	cl, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	b := &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: bucketNS, Name: "aws-eu1-1"}, Spec: testbackup.Spec{Pool: "aws-eu1", Limit: 2}}
	e := &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "e0"}, Spec: testbackup.Spec{Pool: "aws-eu1"}}
	for _, o := range []*testbackup.Backup{b, e} {
		if err := cl.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	stale := &staleBuckets{Objects: inNamespace{backups.Objects[backup](cl, cl), bucketNS}}
	if seen, err := stale.List(ctx, ""); err != nil || len(seen) != 1 || len(seen[0].Status.Claims) != 0 {
		t.Fatalf("stale list = %v, %v; want the bucket without claims", seen, err)
	}
	// Another replica claims e0's place.
	claim := k.Namespace + "/e0"
	b.Status.Claims = []string{claim}
	if err := cl.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}

	p, err := pool.New(pool.Config[backup, backup]{
		Share:  placingShareOver(t, cl, k.Namespace, bucketNS, stale),
		Pool:   func(e backup) (string, error) { return e.Spec.Pool, nil },
		Member: func(b backup) string { return b.Spec.Pool },
		Grower: growerFuncs{
			NewBucket: func(string, int) (backup, error) { return nil, errors.New("the pool must not grow") },
			Provision: func(context.Context, backup) error { return nil },
		}.grower(),
		Create: func(context.Context, backup) error { return errors.New("the pool must not grow") },
		Claims: func(b backup) *[]string { return &b.Status.Claims },
		Assign: func(e backup, _, name string) { e.Spec.Bucket = name },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Place(ctx, e); err != nil || got != b.Name {
		t.Fatalf("Place = %q, %v; want %s", got, err, b.Name)
	}
	var fresh testbackup.Backup
	if err := cl.Get(ctx, client.ObjectKeyFromObject(b), &fresh); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fresh.Status.Claims, []string{claim}) {
		t.Errorf("bucket %s claims %v, want [%s] (one place for the entry)", b.Name, fresh.Status.Claims, claim)
	}
}
