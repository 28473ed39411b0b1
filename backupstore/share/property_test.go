package share_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/internal/propertytest"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// The ownership property of shared buckets and backup collection: whatever
// entries and backups are created, admitted, written to and deleted, in
// whatever order, with names that collide across namespaces, buckets named
// by several spellings of one URL, and data of another installation already
// in the store, nothing is deleted that a live entry or backup, or another
// installation, owns.
//
// The objects are kept in memory as the API server keeps them
// (testbackup.Mem: resourceVersion, UID and deletion preconditions,
// finalizers), the buckets are in-memory buckets found by their identity,
// as a store finds them, so that a run of a thousand steps takes
// milliseconds.
//
// PROPERTY_SEED replays one seed; PROPERTY_DURATION (a Go duration) runs
// fresh seeds for that long (make chaos); by default a fixed set of seeds
// runs (make test).

// stores is the object store: one in-memory bucket per bucket identity,
// whatever URL names it.
type stores map[backupstore.BucketID]*blob.Bucket

func (s stores) open(_ context.Context, rawURL string, _ *backupstore.Credentials) (*blob.Bucket, func() error, error) {
	u, err := backupstore.ParseURL(rawURL)
	if err != nil {
		return nil, nil, err
	}
	b, ok := s[u.ID]
	if !ok {
		b = memblob.OpenBucket(nil)
		s[u.ID] = b
	}
	if u.Prefix != "" {
		return blob.PrefixedBucket(b, u.Prefix), func() error { return nil }, nil
	}
	return b, func() error { return nil }, nil
}

// ledger says whose each object in the store is: an entry's or a
// backup's UID, or "foreign" (another installation's, always live).
type ledger map[backupstore.BucketID]map[string]string

func (l ledger) put(id backupstore.BucketID, key, owner string) {
	if l[id] == nil {
		l[id] = map[string]string{}
	}
	l[id][key] = owner
}

// check fails t for every object of a live owner that is not in the store.
func (l ledger) check(t *testing.T, ctx context.Context, s stores, live map[string]bool, history []string) {
	t.Helper()
	for id, keys := range l {
		for key, owner := range keys {
			if owner != "foreign" && !live[owner] {
				continue
			}
			if ok, err := s[id].Exists(ctx, key); err != nil || !ok {
				t.Fatalf("%s of live owner %s was deleted from %s (exists %v, %v); steps:\n%s", key, owner, id, ok, err, strings.Join(history, "\n"))
			}
		}
	}
}

// shareWorld is entries of two namespaces, with colliding names, admitted
// to three bucket objects, two of which name one store bucket by two
// spellings.
type shareWorld struct {
	ctx     context.Context
	rnd     *rand.Rand
	entries *testbackup.Mem
	buckets *testbackup.Mem
	stores  stores
	ledger  ledger
	// s are two replicas of the controller; each reconciles the entries
	// as its cache last saw them (seen), stale or gone since.
	s       [2]*share.Share[backup, backup]
	seen    [2][]backup
	history []string
	n       int
}

var bucketURLs = map[string]string{
	"b1": "mem://shared",
	"b2": "mem://shared/?region=eu-west-1",
	"b3": "mem://other",
}

func newShareWorld(t *testing.T, seed uint64) *shareWorld {
	w := &shareWorld{ctx: context.Background(), rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		entries: &testbackup.Mem{}, buckets: &testbackup.Mem{}, stores: stores{}, ledger: ledger{}}
	for name, url := range bucketURLs {
		if _, err := w.buckets.Create(w.ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: testbackup.Spec{Bucket: url, Limit: 3}}); err != nil {
			t.Fatal(err)
		}
	}
	for r := range w.s {
		w.s[r] = w.newReplica(t)
	}
	return w
}

// newReplica is one replica of the controller: its collector and Share.
func (w *shareWorld) newReplica(t *testing.T) *share.Share[backup, backup] {
	c, err := collect.New(collect.Config[backup]{
		Objects: w.entries, Secrets: backupstore.SecretsFrom(nil), Finalizer: &collect.Finalizer[backup]{Name: "example.com/data"}, Open: w.stores.open,
		Location: func(ctx context.Context, e backup) (collect.Location, error) {
			b, err := w.buckets.Get(ctx, "", e.Spec.Bucket)
			if err != nil {
				return collect.Location{}, err
			}
			prefix := e.Status.Prefix
			if prefix == "" {
				if prefix, err = share.PrefixOf(e); err != nil {
					return collect.Location{}, err
				}
			}
			return collect.Location{URL: b.Spec.Bucket, Prefix: prefix, Owner: string(e.UID), Marker: share.DefaultMarkerKey,
				NoDataUnlessOwner: e.Status.Prefix == ""}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := share.New(share.Config[backup, backup]{
		Entries: w.entries, Buckets: w.buckets, Collector: c,
		Bucket:          func(e backup) (string, string) { return "", e.Spec.Bucket },
		Limit:           func(b backup) int { return b.Spec.Limit },
		Prefix:          func(e backup) *string { return &e.Status.Prefix },
		BucketFinalizer: "example.com/entries",
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (w *shareWorld) log(format string, args ...any) {
	w.history = append(w.history, fmt.Sprintf(format, args...))
}

func (w *shareWorld) pick(list []backup) backup {
	if len(list) == 0 {
		return nil
	}
	return list[w.rnd.IntN(len(list))]
}

func (w *shareWorld) id(bucketObject string) backupstore.BucketID {
	u, _ := backupstore.ParseURL(bucketURLs[bucketObject])
	return u.ID
}

func (w *shareWorld) step(t *testing.T) {
	all, _ := w.entries.List(w.ctx, "")
	switch op := w.rnd.IntN(10); {
	case op < 2: // a new entry
		ns := []string{"team-a", "team-b"}[w.rnd.IntN(2)]
		name := []string{"db", "db2"}[w.rnd.IntN(2)]
		bucket := []string{"b1", "b2", "b3"}[w.rnd.IntN(3)]
		e, err := w.entries.Create(w.ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: testbackup.Spec{Bucket: bucket}})
		if err == nil {
			w.log("create %s/%s in %s: %s", ns, name, bucket, e.UID)
		}
	case op < 5: // a reconcile, by either replica, of the entry as its cache saw it
		r := w.rnd.IntN(len(w.s))
		if w.rnd.IntN(3) == 0 {
			w.seen[r] = all
			w.log("replica %d's cache catches up", r)
		}
		if e := w.pick(w.seen[r]); e != nil {
			_, err := w.s[r].ReconcileEntry(w.ctx, e)
			after, _ := w.entries.Get(w.ctx, e.Namespace, e.Name)
			w.log("replica %d: reconcile %s/%s (%s, resourceVersion %s): %v; prefix %q", r, e.Namespace, e.Name, e.UID, e.ResourceVersion, err, prefixOf(after))
		}
	case op < 7: // a backup of an admitted entry
		var admitted []backup
		for _, e := range all {
			if e.Status.Prefix != "" && e.DeletionTimestamp == nil {
				admitted = append(admitted, e)
			}
		}
		if e := w.pick(admitted); e != nil {
			w.n++
			key := fmt.Sprintf("%sbackup-%d", e.Status.Prefix, w.n)
			w.write(t, e.Spec.Bucket, key, string(e.UID))
			w.log("backup %s/%s (%s): %s", e.Namespace, e.Name, e.UID, key)
		}
	case op < 8: // data of another installation where no entry of ours is
		bucket := []string{"b1", "b3"}[w.rnd.IntN(2)]
		prefix := []string{"db/", "team-a.db/", "team-b.db2/"}[w.rnd.IntN(3)]
		b := w.bucket(bucket)
		if ok, _ := backupstore.Empty(w.ctx, b, prefix); !ok {
			return
		}
		w.n++
		w.write(t, bucket, fmt.Sprintf("%sforeign-%d", prefix, w.n), "foreign")
		if w.rnd.IntN(2) == 0 {
			if err := backupstore.WriteMarker(w.ctx, b, prefix+share.DefaultMarkerKey, "foreign-uid", nil); err != nil {
				t.Fatal(err)
			}
			w.ledger.put(w.id(bucket), prefix+share.DefaultMarkerKey, "foreign")
		}
		w.log("foreign data in %s under %s", bucket, prefix)
	case op < 9 && w.rnd.IntN(3) == 0: // a spec edit: an entry not admitted names another bucket
		// (once admitted, the bucket is immutable: see the package doc)
		if e := w.pick(all); e != nil && e.DeletionTimestamp == nil && e.Status.Prefix == "" {
			e.Spec.Bucket = []string{"b1", "b2", "b3"}[w.rnd.IntN(3)]
			err := w.entries.Update(w.ctx, e)
			w.log("edit %s/%s (%s): spec.bucket %s: %v", e.Namespace, e.Name, e.UID, e.Spec.Bucket, err)
		}
	case op < 9:
	default: // a deletion
		if e := w.pick(all); e != nil {
			err := w.entries.Delete(w.ctx, e.Namespace, e.Name, "", "")
			w.log("delete %s/%s (%s): %v", e.Namespace, e.Name, e.UID, err)
		}
	}
}

func prefixOf(e backup) string {
	if e == nil {
		return "(gone)"
	}
	return e.Status.Prefix
}

func (w *shareWorld) bucket(object string) *blob.Bucket {
	b, _, _ := w.stores.open(w.ctx, bucketURLs[object], nil)
	return b
}

func (w *shareWorld) write(t *testing.T, object, key, owner string) {
	if err := w.bucket(object).WriteAll(w.ctx, key, []byte(owner), nil); err != nil {
		t.Fatal(err)
	}
	w.ledger.put(w.id(object), key, owner)
}

// live are the UIDs of the entries that exist and are not being deleted.
func (w *shareWorld) live() map[string]bool {
	all, _ := w.entries.List(w.ctx, "")
	live := map[string]bool{}
	for _, e := range all {
		if e.DeletionTimestamp == nil {
			live[string(e.UID)] = true
		}
	}
	return live
}

func TestPropertySharedBucketsDeleteOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	propertytest.Seeds(t, func(t *testing.T, seed uint64) {
		w := newShareWorld(t, seed)
		w.log("seed %d", seed)
		for range 200 {
			w.step(t)
			w.ledger.check(t, w.ctx, w.stores, w.live(), w.history)
		}
		w.settle()
		w.ledger.check(t, w.ctx, w.stores, w.live(), w.history)
		w.checkAdmitted(t)
	})
}

// settle reconciles every entry until a round changes nothing.
func (w *shareWorld) settle() {
	for range 5 {
		all, _ := w.entries.List(w.ctx, "")
		for _, e := range all {
			_, err := w.s[0].ReconcileEntry(w.ctx, e)
			w.log("settle %s/%s (%s): %v", e.Namespace, e.Name, e.UID, err)
		}
	}
}

// checkAdmitted fails for a live entry admitted with a prefix other than
// "<namespace>.<name>/", and for one refused for any reason but its bucket
// being full or its prefix holding another's objects.
func (w *shareWorld) checkAdmitted(t *testing.T) {
	t.Helper()
	all, _ := w.entries.List(w.ctx, "")
	for _, e := range all {
		want := e.Namespace + "." + e.Name + "/"
		if e.DeletionTimestamp != nil {
			t.Fatalf("entry %s/%s (%s) still being deleted after the controllers settled: %+v; steps:\n%s", e.Namespace, e.Name, e.UID, e.Status.Conditions, strings.Join(w.history, "\n"))
		}
		if e.Status.Prefix != "" {
			if e.Status.Prefix != want {
				t.Fatalf("entry %s/%s (%s) admitted with prefix %q, want %q; steps:\n%s", e.Namespace, e.Name, e.UID, e.Status.Prefix, want, strings.Join(w.history, "\n"))
			}
			continue
		}
		var reason string
		for _, c := range e.Status.Conditions {
			if c.Type == share.ConditionAdmitted {
				reason = c.Reason
			}
		}
		switch reason {
		case share.ReasonBucketFull:
		case share.ReasonPrefixTaken:
			if w.othersUnder(w.id(e.Spec.Bucket), want, string(e.UID)) {
				continue
			}
			fallthrough
		default:
			t.Fatalf("entry %s/%s (%s) not admitted (reason %q), and its prefix %s in %s holds nothing of another's; steps:\n%s", e.Namespace, e.Name, e.UID, reason, want, e.Spec.Bucket, strings.Join(w.history, "\n"))
		}
	}
}

// othersUnder reports whether the store holds, under prefix, an object
// that is not uid's: a marker naming another owner (an admission whose
// status update was lost leaves one), or an object the ledger gives to
// another.
func (w *shareWorld) othersUnder(id backupstore.BucketID, prefix, uid string) bool {
	it := w.stores[id].List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(w.ctx)
		if err != nil {
			return false
		}
		if o.Key == prefix+share.DefaultMarkerKey {
			if owner, _, _ := backupstore.MarkerOwner(w.ctx, w.stores[id], o.Key); owner != uid {
				return true
			}
			continue
		}
		if w.ledger[id][o.Key] != uid {
			return true
		}
	}
}

// Backups of one namespace with a TTL, whose prefixes in one bucket, named
// by several spellings of its URL, may nest, and some of whose locations
// cannot be read.
func TestPropertyCollectNeverDeletesANestedBackup(t *testing.T) {
	t.Parallel()
	spellings := []string{"mem://b", "mem://b/", "mem://b?region=eu-west-1", "mem://c"}
	prefixes := []string{"x/", "x/y/", "x/y/z/", "xy/", "z/"}
	propertytest.Seeds(t, func(t *testing.T, seed uint64) {
		ctx := context.Background()
		rnd := rand.New(rand.NewPCG(seed, 7))
		objs, st, led := &testbackup.Mem{}, stores{}, ledger{}
		now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
		history := []string{fmt.Sprintf("seed %d", seed)}
		c, err := collect.New(collect.Config[backup]{
			Objects: objs, Secrets: backupstore.SecretsFrom(nil), Open: st.open,
			Location: func(_ context.Context, b backup) (collect.Location, error) {
				if b.Spec.Secret == "unreadable" {
					return collect.Location{}, fmt.Errorf("spec.secret %q: the location cannot be read", b.Spec.Secret)
				}
				return collect.Location{URL: b.Spec.Bucket, Prefix: b.Spec.Prefix}, nil
			},
			Keep: collect.BackupPolicy[backup](func(b backup) (retention.Policy, error) {
				d, err := retention.ParseDuration(b.Spec.TTL)
				return retention.TTL{After: d}, err
			}),
			Time:  func(b backup) time.Time { return b.CreationTimestamp.Time },
			Clock: clocktesting.NewFakeClock(now.Add(2 * time.Hour)),
		})
		if err != nil {
			t.Fatal(err)
		}
		live := func() map[string]bool {
			all, _ := objs.List(ctx, "")
			live := map[string]bool{}
			for _, b := range all {
				live[string(b.UID)] = true
			}
			return live
		}
		for i := range 40 {
			url, prefix := spellings[rnd.IntN(len(spellings))], prefixes[rnd.IntN(len(prefixes))]
			ttl := []string{"1h", "30d"}[rnd.IntN(2)]
			// Some backups' locations cannot be read (a bucket object
			// gone, a field that does not parse): their data is where
			// their spec says all the same.
			secret := ""
			if rnd.IntN(8) == 0 {
				secret = "unreadable"
			}
			b, err := objs.Create(ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("b%d", i), CreationTimestamp: metav1.NewTime(now)},
				Spec: testbackup.Spec{Bucket: url, Prefix: prefix, TTL: ttl, Secret: secret}})
			if err != nil {
				t.Fatal(err)
			}
			bucket, _, _ := st.open(ctx, url, nil)
			key := fmt.Sprintf("%sdata-%d", prefix, i)
			if err := bucket.WriteAll(ctx, key, nil, nil); err != nil {
				t.Fatal(err)
			}
			u, _ := backupstore.ParseURL(url)
			led.put(u.ID, key, string(b.UID))
			history = append(history, fmt.Sprintf("%s %s %s ttl %s: %s", b.Name, url, prefix, ttl, b.UID))
		}
		for i := range 3 {
			if _, err := c.Pass(ctx, "ns"); err != nil && !apierrors.IsConflict(err) {
				t.Fatal(err)
			}
			history = append(history, fmt.Sprintf("pass %d", i))
			led.check(t, ctx, st, live(), history)
		}
	})
}
