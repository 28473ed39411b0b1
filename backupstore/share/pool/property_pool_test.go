package pool_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/internal/propertytest"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
)

// Two installations (two clusters) whose pools have the same name grow
// into one store account: each creates, adopts and deletes store buckets
// as its entries come and go. Some seeds give both the same Installation
// (a copied configuration), so that their store buckets have the same
// names and only the owner markers keep them apart. Whatever happens,
// no object of a live entry of either installation is deleted, and every
// live entry that is refused a place is refused for a reason the test can
// see (its pool full while it grows, or a store bucket that is the other
// installation's).
func TestPropertyPoolsOfTwoInstallationsDeleteOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	propertytest.Seeds(t, func(t *testing.T, seed uint64) {
		w := newPoolWorld(t, seed)
		for range 150 {
			w.step()
			w.check()
		}
		w.settle()
		w.check()
		w.checkPlaced()
	})
}

// poolGrace is how long an empty bucket of a pool waits to be deleted.
const poolGrace = time.Hour

type installation struct {
	name             string
	entries, buckets *testbackup.Mem
	pool             *pool.Pool[backup, backup]
}

type poolWorld struct {
	t       *testing.T
	ctx     context.Context
	rnd     *rand.Rand
	clock   *clocktesting.FakeClock
	dir     string
	inst    []*installation
	ledger  map[string]map[string]string // store URL -> key -> owner ("<installation>/<UID>")
	history []string
	n       int
}

func newPoolWorld(t *testing.T, seed uint64) *poolWorld {
	w := &poolWorld{t: t, ctx: context.Background(), rnd: rand.New(rand.NewPCG(seed, 0x706f6f6c)),
		clock: clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)),
		dir:   t.TempDir(), ledger: map[string]map[string]string{}}
	ids := []string{"cluster-a", "cluster-b"}
	if w.rnd.IntN(2) == 0 {
		ids[1] = ids[0]
	}
	w.log("seed %d: installations %v", seed, ids)
	for i, id := range ids {
		w.inst = append(w.inst, w.newInstallation(fmt.Sprintf("%c", 'a'+i), id))
	}
	return w
}

// storeURL is the URL of the store bucket name in the shared account.
func (w *poolWorld) storeURL(name string) string {
	return "file://" + filepath.ToSlash(filepath.Join(w.dir, name))
}

// newInstallation is a cluster's objects and its pool "aws/eu", whose
// first bucket the administrator made (a store bucket of its own), with
// room for one entry per bucket so that the pool grows.
func (w *poolWorld) newInstallation(name, id string) *installation {
	t := w.t
	in := &installation{name: name,
		entries: &testbackup.Mem{UIDPrefix: name + "-e-"}, buckets: &testbackup.Mem{UIDPrefix: name + "-b-"}}
	now := func() metav1.Time { return metav1.NewTime(w.clock.Now()) }
	in.entries.Now, in.buckets.Now = now, now
	first := "first-" + name
	if _, err := backupstore.CreateBucket(w.ctx, w.storeURL(first), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := in.buckets.Create(w.ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Name: first},
		Spec: testbackup.Spec{Pool: "aws/eu", Limit: 1, Prefix: w.storeURL(first)}}); err != nil {
		t.Fatal(err)
	}
	c, err := collect.New(collect.Config[backup]{
		Objects: in.entries, Secrets: backupstore.SecretsFrom(nil), Finalizer: &collect.Finalizer[backup]{Name: "example.com/data"},
		Location: func(ctx context.Context, e backup) (collect.Location, error) {
			b, err := in.buckets.Get(ctx, "", e.Spec.Bucket)
			if err != nil {
				return collect.Location{}, err
			}
			prefix := e.Status.Prefix
			if prefix == "" {
				if prefix, err = share.PrefixOf(e); err != nil {
					return collect.Location{}, err
				}
			}
			return collect.Location{URL: b.Spec.Prefix, Prefix: prefix, BucketMayBeMissing: e.Status.Prefix == "",
				Owner: string(e.UID), Marker: share.DefaultMarkerKey, NoDataUnlessOwner: e.Status.Prefix == ""}, nil
		},
		Clock: w.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := share.New(share.Config[backup, backup]{
		Entries: in.entries, Buckets: in.buckets, Collector: c, BucketFinalizer: "example.com/entries",
		Bucket: func(e backup) (string, string) { return "", e.Spec.Bucket },
		Limit:  func(b backup) int { return b.Spec.Limit },
		Prefix: func(e backup) *string { return &e.Status.Prefix },
		Clock:  w.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	grow := pool.Grow[backup]{Buckets: in.buckets, Secrets: backupstore.SecretsFrom(nil), Installation: id,
		Member: func(b backup) string { return b.Spec.Pool },
		Store:  func(b backup) (string, string, string) { return b.Spec.Prefix, "", "" },
		New: func(first backup, name, url string) backup {
			return &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: testbackup.Spec{Pool: first.Spec.Pool, Limit: first.Spec.Limit, Prefix: url}}
		},
	}
	in.pool, err = pool.New(pool.Config[backup, backup]{
		Share: s,
		Create: func(ctx context.Context, b backup) error {
			_, err := in.buckets.Create(ctx, b)
			return err
		},
		Pool:             func(e backup) (string, error) { return e.Spec.Pool, nil },
		Member:           func(b backup) string { return b.Spec.Pool },
		Grower:           grow,
		Claims:           func(b backup) *[]string { return &b.Status.Claims },
		Assign:           func(e backup, _, name string) { e.Spec.Bucket = name },
		DeleteEmptyAfter: poolGrace,
		LiveEntries:      func(ctx context.Context) ([]backup, error) { return in.entries.List(ctx, "") },
	})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (w *poolWorld) log(format string, args ...any) {
	w.history = append(w.history, fmt.Sprintf(format, args...))
}

func (w *poolWorld) fail(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf(format+"; steps:\n%s", append(args, strings.Join(w.history, "\n"))...)
}

func (w *poolWorld) step() {
	in := w.inst[w.rnd.IntN(len(w.inst))]
	entries, _ := in.entries.List(w.ctx, "")
	pick := func(list []backup) backup {
		if len(list) == 0 {
			return nil
		}
		return list[w.rnd.IntN(len(list))]
	}
	switch op := w.rnd.IntN(20); {
	case op < 4: // a new entry, in one of two namespaces, of one of two names
		ns, name := []string{"team-a", "team-b"}[w.rnd.IntN(2)], []string{"db", "db2"}[w.rnd.IntN(2)]
		e, err := in.entries.Create(w.ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: testbackup.Spec{Pool: "aws/eu"}})
		if err == nil {
			w.log("%s: create %s/%s (%s)", in.name, ns, name, e.UID)
		}
	case op < 10: // the entry controller
		if e := pick(entries); e != nil {
			_, err := in.pool.ReconcileEntry(w.ctx, e)
			after, _ := in.entries.Get(w.ctx, e.Namespace, e.Name)
			w.log("%s: reconcile entry %s/%s (%s): %v; bucket %s prefix %q", in.name, e.Namespace, e.Name, e.UID, err, bucketOf(after), prefixOf(after))
		}
	case op < 13: // the bucket controller
		buckets, _ := in.buckets.List(w.ctx, "")
		if b := pick(buckets); b != nil {
			_, err := in.pool.ReconcileBucket(w.ctx, b)
			w.log("%s: reconcile bucket %s (%s): %v", in.name, b.Name, b.UID, err)
		}
	case op < 16: // a backup of an admitted entry
		var admitted []backup
		for _, e := range entries {
			if e.Status.Prefix != "" && e.DeletionTimestamp == nil {
				admitted = append(admitted, e)
			}
		}
		if e := pick(admitted); e != nil {
			b, err := in.buckets.Get(w.ctx, "", e.Spec.Bucket)
			if err != nil {
				return
			}
			w.n++
			key := fmt.Sprintf("%sbackup-%d", e.Status.Prefix, w.n)
			w.write(b.Spec.Prefix, key, in.name+"/"+string(e.UID))
			w.log("%s: backup %s/%s (%s): %s in %s", in.name, e.Namespace, e.Name, e.UID, key, b.Spec.Prefix)
		}
	case op < 18: // a deletion
		if e := pick(entries); e != nil {
			err := in.entries.Delete(w.ctx, e.Namespace, e.Name, "", "")
			w.log("%s: delete %s/%s (%s): %v", in.name, e.Namespace, e.Name, e.UID, err)
		}
	default: // time passes: empty buckets may go
		w.clock.Step(poolGrace / 2)
		w.log("%v later", poolGrace/2)
	}
}

func bucketOf(e backup) string {
	if e == nil {
		return "(gone)"
	}
	return e.Spec.Bucket
}

func (w *poolWorld) write(url, key, owner string) {
	b, err := backupstore.OpenBucket(w.ctx, url, nil)
	if err != nil {
		w.fail("open %s: %v", url, err)
	}
	defer b.Close()
	if err := b.WriteAll(w.ctx, key, []byte(owner), nil); err != nil {
		w.fail("write %s to %s: %v", key, url, err)
	}
	if w.ledger[url] == nil {
		w.ledger[url] = map[string]string{}
	}
	w.ledger[url][key] = owner
}

// live are the entries of every installation that exist and are not
// being deleted, as "<installation>/<UID>".
func (w *poolWorld) live() map[string]bool {
	live := map[string]bool{}
	for _, in := range w.inst {
		all, _ := in.entries.List(w.ctx, "")
		for _, e := range all {
			if e.DeletionTimestamp == nil {
				live[in.name+"/"+string(e.UID)] = true
			}
		}
	}
	return live
}

// check fails for every object of a live entry that is not in the store.
func (w *poolWorld) check() {
	w.t.Helper()
	live := w.live()
	for url, keys := range w.ledger {
		var b interface {
			Exists(context.Context, string) (bool, error)
		}
		for key, owner := range keys {
			if !live[owner] {
				continue
			}
			if b == nil {
				bucket, err := backupstore.OpenBucket(w.ctx, url, nil)
				if err != nil {
					w.fail("%s of live entry %s: its store bucket %s cannot be opened: %v (deleted?)", key, owner, url, err)
				}
				defer bucket.Close()
				b = bucket
			}
			if ok, err := b.Exists(w.ctx, key); err != nil || !ok {
				w.fail("%s of live entry %s was deleted from %s (exists %v, %v)", key, owner, url, ok, err)
			}
		}
	}
}

// settle plays both installations' controllers, with time passing, until
// a round changes nothing.
func (w *poolWorld) settle() {
	for range 20 {
		for _, in := range w.inst {
			buckets, _ := in.buckets.List(w.ctx, "")
			for _, b := range buckets {
				_, err := in.pool.ReconcileBucket(w.ctx, b)
				w.log("%s: settle bucket %s: %v", in.name, b.Name, err)
			}
			entries, _ := in.entries.List(w.ctx, "")
			for _, e := range entries {
				_, err := in.pool.ReconcileEntry(w.ctx, e)
				w.log("%s: settle entry %s/%s: %v", in.name, e.Namespace, e.Name, err)
			}
		}
		w.clock.Step(poolGrace)
	}
}

// checkPlaced fails for a live entry that the settled pools left without
// a place, unless its condition gives a reason this world can bring
// about; and for an entry placed with a prefix that is not its own.
func (w *poolWorld) checkPlaced() {
	w.t.Helper()
	for _, in := range w.inst {
		entries, _ := in.entries.List(w.ctx, "")
		for _, e := range entries {
			var why []string
			for _, c := range e.Status.Conditions {
				why = append(why, c.Type+"="+string(c.Status)+" "+c.Reason+": "+c.Message)
			}
			if e.DeletionTimestamp != nil {
				w.fail("%s: entry %s/%s (bucket %q, prefix %q, finalizers %v) still being deleted after the controllers settled: %v", in.name, e.Namespace, e.Name, e.Spec.Bucket, e.Status.Prefix, e.Finalizers, why)
			}
			if want := e.Namespace + "." + e.Name + "/"; e.Status.Prefix != "" && e.Status.Prefix != want {
				w.fail("%s: entry %s/%s admitted with prefix %q, want %q", in.name, e.Namespace, e.Name, e.Status.Prefix, want)
			}
			if e.Status.Prefix != "" {
				continue
			}
			w.fail("%s: live entry %s/%s has no place after the controllers settled (bucket %q): %v", in.name, e.Namespace, e.Name, e.Spec.Bucket, why)
		}
	}
}
