package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// The pool, the migrations and the second installation of the chaos
// workload.
//
// The pool: entries that name no bucket (spec.provider and spec.region)
// are placed by the controller in the BackupBuckets of their pool, which
// it grows with a BackupBucket and a store bucket of its own when all are
// full (--quota 2 each) and deletes, store bucket first, once one has been
// empty for the grace period. The generator learns where each entry went
// from its spec.bucketName, opens that bucket's store bucket without
// faults and lists it over time as it does its own buckets, so the same
// invariants judge the pool's data; and a store bucket may be deleted
// only when no entry that is not deleted has data in it (invOwner).
//
// The migrations: an entry with spec.migrateFrom naming a legacy prefix
// that the generator filled beforehand, in an S3 bucket that no
// BackupBucket names, is migrated into its prefix and the legacy prefix
// deleted; one whose source is a shared bucket (the whole bucket, spelled
// another way) or another entry's prefix (under another spelling of its
// bucket) must be refused, and nothing of it deleted (invMigration).
//
// The second installation: another control plane with one replica of the
// controller, no faults, the same --installation and the same names
// (entries, the pool), whose pool writes into the same MinIO: the two
// pools pick the same store bucket names, and only the owner markers keep
// them apart. Its generator runs beside the first's and its checker judges
// its own data.

// bePool is a pool of BackupBuckets on S3.
type bePool struct {
	// provider and region name the pool.
	provider, region string
	// quota is the controller's --quota for provider.
	quota int
	// first is the store bucket of the pool's first BackupBucket, made by
	// the generator (the administrator's); the controller makes it in the
	// store.
	first string
	// secret names the credentials Secret in the workload's namespace;
	// creds are the same with the store's own endpoint: the generator
	// opens the pool's store buckets without faults.
	secret string
	creds  *backupstore.Credentials
}

// newPool is the pool of a run named runID whose first store bucket is
// first, on the MinIO at endpoint (reached directly).
func newPool(runID, first, secret, endpoint string) *bePool {
	return &bePool{provider: runID + "-aws", region: "eu1", quota: 2, first: first, secret: secret,
		creds: &backupstore.Credentials{AccessKeyID: testenv.S3AccessKeyID, SecretAccessKey: testenv.S3SecretAccessKey,
			Region: testenv.S3Region, Endpoint: endpoint, S3PathStyle: true}}
}

// poolName is the pool's first BackupBucket.
func (g *beWorkload) poolFirstName() string { return g.w.runID + "--pool" }

// newPoolFirst creates the pool's first BackupBucket, as an administrator
// does: the controller creates its store bucket and places entries in it;
// it never deletes it.
func (g *beWorkload) newPoolFirst(ops *chaos.Ops) error {
	p := g.w.pool
	obj := &api.BackupBucket{
		ObjectMeta: metav1.ObjectMeta{Name: g.poolFirstName()},
		Spec: api.BackupBucketSpec{URL: "s3://" + p.first, Provider: p.provider, Region: p.region,
			SecretRef: &api.SecretReference{Namespace: g.w.ns, Name: p.secret}},
	}
	if _, err := g.create(obj); err != nil {
		return fmt.Errorf("create the pool's first bucket: %w", err)
	}
	g.add(ops, "create bucket (pool's first)")
	return nil
}

// newPoolEntry creates an entry in the pool, while it has fewer than four
// buckets' worth of live entries: the controller places it.
func (g *beWorkload) newPoolEntry(rng *rand.Rand, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	live := 0
	for _, e := range g.truth.order {
		if e.pool && e.deleteSent.IsZero() {
			live++
		}
	}
	if live >= 3*g.w.pool.quota {
		g.truth.mu.Unlock()
		return nil
	}
	e := &entryTruth{name: g.entryName(len(g.truth.order)), pool: true}
	g.truth.entries[e.name] = e
	g.truth.order = append(g.truth.order, e)
	g.truth.mu.Unlock()
	return g.createEntry(rng, e, api.BackupEntrySpec{Provider: g.w.pool.provider, Region: g.w.pool.region}, true, "create entry (pool)", ops)
}

// poolBucket returns the truth of the pool's BackupBucket name, read from
// the API server, with its store bucket open; nil if it is gone.
func (g *beWorkload) poolBucket(name string) (*bucketTruth, error) {
	var bb api.BackupBucket
	err := chaos.Retry(func(ctx context.Context) error {
		return client.IgnoreNotFound(g.cl.Get(ctx, client.ObjectKey{Name: name}, &bb))
	})
	if err != nil {
		return nil, fmt.Errorf("read bucket %s: %w", name, err)
	}
	if bb.UID == "" {
		return nil, nil
	}
	g.truth.mu.Lock()
	for _, b := range g.truth.buckets {
		if b.uid == bb.UID {
			g.truth.mu.Unlock()
			return b, nil
		}
	}
	g.truth.mu.Unlock()
	s, err := g.poolStore(bb.Spec.URL)
	if err != nil {
		return nil, err
	}
	b := &bucketTruth{name: name, uid: bb.UID, store: s, max: g.w.pool.quota, pool: true}
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	g.truth.buckets = append(g.truth.buckets, b)
	return b, nil
}

// poolStore returns the pool's store bucket that rawURL names, opened
// directly and listed over time from now on (once per bucket: a bucket
// the pool deleted and made again under its name is one).
func (g *beWorkload) poolStore(rawURL string) (*beStore, error) {
	u, err := backupstore.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	name := u.ID.Name
	g.storesMu.Lock()
	defer g.storesMu.Unlock()
	if s := g.poolStores[name]; s != nil {
		return s, nil
	}
	b, err := backupstore.OpenBucket(g.ctx, "s3://"+name, g.w.pool.creds)
	if err != nil {
		return nil, fmt.Errorf("open the pool's store bucket %s: %w", name, err)
	}
	s := &beStore{kind: "pool", direct: b, bucket: name, secret: g.w.pool.secret}
	g.listKeys(s, true)
	g.poolStores[name] = s
	return s, nil
}

// listKeys starts listing s over time; mayGo says that the controller may
// delete the bucket itself.
func (g *beWorkload) listKeys(s *beStore, mayGo bool) {
	s.keys = chaos.NewKeyHistory(s.direct, "")
	s.keys.BucketMayGo = mayGo
	s.since = time.Now()
	go s.keys.Run(g.ctx, 500*time.Millisecond)
}

// stores are the stores the generator lists: its own, the legacy one, and
// the pool's store buckets it saw entries placed in.
func (g *beWorkload) stores() []*beStore {
	out := append([]*beStore(nil), g.w.stores...)
	if g.w.legacy != nil {
		out = append(out, g.w.legacy)
	}
	g.storesMu.Lock()
	defer g.storesMu.Unlock()
	for _, name := range sortedKeys(g.poolStores) {
		out = append(out, g.poolStores[name])
	}
	return out
}

// The kinds of a migration's source.
const (
	// A legacy prefix the generator filled, in an S3 bucket of its own.
	migrateLegacy = "a legacy prefix"
	// The whole of a store bucket that BackupBuckets name, spelled
	// another way: refused.
	migrateShared = "a shared bucket"
	// Another entry's prefix, under another spelling of its bucket:
	// refused.
	migrateNeighbour = "another entry's prefix"
)

// migrationTruth is what the generator did for an entry's
// spec.migrateFrom, and what it read of the migration.
type migrationTruth struct {
	kind string
	// first marks the workload's first two migrations (from a legacy
	// prefix, then from a shared bucket), never deleted before the first is
	// done and the second refused, so that even a short run on a slow
	// machine sees one of each through (ci18 saw no refusal: the second
	// could be deleted first).
	first  bool
	source string // spec.migrateFrom.url
	// The legacy prefix (migrateLegacy): its keys, written before the
	// entry was created, and a look-alike beside it, never to be deleted.
	prefix    string
	keys      []string
	lookalike string
	// startedSeen and doneSeen are when the generator first read
	// status.migration set and at StepDone; refusedSeen says it read the
	// condition Migrated=False, SourceIsShared.
	startedSeen, doneSeen time.Time
	refusedSeen           bool
}

// target is where the migration copies legacy key k: under e's prefix.
func (m *migrationTruth) target(e *entryTruth, k string) string {
	return e.storePrefix() + strings.TrimPrefix(k, m.prefix)
}

// see records what be says of the migration. Call with g.truth.mu held;
// m may be nil.
func (m *migrationTruth) see(be *api.BackupEntry, now time.Time) {
	if m == nil {
		return
	}
	if st := be.Status.Migration; st != nil {
		if m.startedSeen.IsZero() {
			m.startedSeen = now
		}
		if st.Step == migrate.StepDone && m.doneSeen.IsZero() {
			m.doneSeen = now
		}
	}
	m.refusedSeen = m.refusedSeen || refusedShared(be)
}

// refusedShared says that be's migration is refused for a shared source.
func refusedShared(be *api.BackupEntry) bool {
	c := meta.FindStatusCondition(be.Status.Conditions, migrate.ConditionMigrated)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == migrate.ReasonSourceIsShared
}

// newMigration makes an entry's spec.migrateFrom: six in ten from a legacy
// prefix it fills (and a writer Deployment, which has no pods on a control
// plane without a ReplicaSet controller), the others from a store bucket
// that BackupBuckets name: the whole bucket, or a live entry's prefix in
// it, spelled with a region the BackupBucket's URL does not name.
func (g *beWorkload) newMigration(rng *rand.Rand, ops *chaos.Ops) (*migrationTruth, *api.LegacyBucket, error) {
	kind := migrateLegacy
	if n := rng.IntN(10); n >= 8 {
		kind = migrateNeighbour
	} else if n >= 6 {
		kind = migrateShared
	}
	from := &api.LegacyBucket{Writer: api.WriterReference{Namespace: g.w.ns, Name: "nobody"}}
	g.truth.mu.Lock()
	first := g.legacySeq < 2
	switch g.legacySeq {
	case 0:
		kind = migrateLegacy
	case 1:
		// The second from a shared bucket, refused: a run on a loaded
		// machine makes few migrations.
		kind = migrateShared
	}
	m := &migrationTruth{kind: kind, first: first}
	// Shared store buckets that BackupBuckets always name: the S3 store's
	// (two of the generator's buckets, replaced one at a time) and the
	// pool's first; and the live admitted entries there.
	var shared []string
	var neighbours []string
	for _, s := range g.w.stores {
		if s.bucket != "" {
			shared = append(shared, s.bucket)
		}
	}
	if g.w.pool != nil {
		shared = append(shared, g.w.pool.first)
	}
	for _, e := range g.truth.order {
		if e.bucket != nil && e.bucket.store.bucket != "" && (!e.bucket.pool || e.bucket.name == g.poolFirstName()) && !e.admittedSeen.IsZero() && e.deleteSent.IsZero() {
			neighbours = append(neighbours, fmt.Sprintf("s3://%s?region=eu-west-1&prefix=%s", e.bucket.store.bucket, e.storePrefix()))
		}
	}
	if kind == migrateNeighbour && len(neighbours) == 0 {
		kind, m.kind = migrateShared, migrateShared
	}
	if kind == migrateShared && len(shared) == 0 {
		kind, m.kind = migrateLegacy, migrateLegacy
	}
	n := g.legacySeq
	g.legacySeq++
	g.truth.mu.Unlock()
	switch kind {
	case migrateShared:
		m.source = fmt.Sprintf("s3://%s?region=eu-west-1", shared[rng.IntN(len(shared))])
	case migrateNeighbour:
		m.source = neighbours[rng.IntN(len(neighbours))]
	default:
		m.prefix = fmt.Sprintf("legacy-%d/", n)
		m.lookalike = fmt.Sprintf("legacy-%d-notes.txt", n)
		var keys []string
		for i := range 2 + rng.IntN(3) {
			keys = append(keys, fmt.Sprintf("%sv1/Full-%08d", m.prefix, i))
		}
		for _, k := range append([]string{m.lookalike}, keys...) {
			// The legacy bucket is gone only if a bug deleted it: the
			// checker reports what it held.
			written, err := g.writeKey(g.w.legacy, k, ops)
			if err != nil {
				return nil, nil, err
			}
			if written && k != m.lookalike {
				m.keys = append(m.keys, k)
			}
		}
		m.source = g.w.legacy.url(m.prefix)
		from.Writer.Name = fmt.Sprintf("writer-%d", n)
		one := int32(1)
		labels := map[string]string{"app": from.Writer.Name}
		if _, err := g.create(&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: g.w.ns, Name: from.Writer.Name},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}},
		}); err != nil {
			return nil, nil, fmt.Errorf("create writer %s: %w", from.Writer.Name, err)
		}
	}
	from.URL = m.source
	from.SecretRef = &api.SecretReference{Namespace: g.w.ns, Name: "s3-credentials"}
	return m, from, nil
}

// legacyStore is the S3 bucket of the migrations' legacy prefixes, made
// on the MinIO at endpoint (reached directly), which the controller
// reaches at the endpoint of the s3-credentials Secret.
func legacyStore(t *testing.T, endpoint, name string) *beStore {
	creds := newPool("", "", "", endpoint).creds
	ctx := context.Background()
	if _, err := backupstore.CreateBucket(ctx, "s3://"+name, creds); err != nil {
		t.Fatal(err)
	}
	b, err := backupstore.OpenBucket(ctx, "s3://"+name, creds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &beStore{kind: "legacy", direct: b, bucket: name, secret: "s3-credentials",
		url: func(prefix string) string { return fmt.Sprintf("s3://%s?prefix=%s", name, prefix) }}
}

// wholeLegacyBucket reads every entry's spec.migrateFrom without the
// prefix= of its URL, and writes it back as it was: a migration then
// copies, and deletes, the whole legacy bucket, the other entries' legacy
// prefixes and the look-alikes included. A planted bug.
func wholeLegacyBucket() clientWrap {
	var real sync.Map // entry name -> spec.migrateFrom.url
	return entryReads(func(e *api.BackupEntry) {
		f := e.Spec.MigrateFrom
		if f == nil {
			return
		}
		u, err := url.Parse(f.URL)
		if err != nil || !u.Query().Has("prefix") {
			return
		}
		real.Store(e.Name, f.URL)
		q := u.Query()
		q.Del("prefix")
		u.RawQuery = q.Encode()
		f.URL = u.String()
	}, func(e *api.BackupEntry) {
		if v, ok := real.Load(e.Name); ok && e.Spec.MigrateFrom != nil {
			e.Spec.MigrateFrom.URL = v.(string)
		}
	})
}

// ownerMarkerHidingStore is an endpoint in front of an S3 server that
// hides the pools' owner markers (pool.BucketOwnerKey) from its client:
// a read finds none, and a write is answered as done and never passed on.
// A planted bug of the store layer: two installations given one
// --installation are then told apart by nothing, and a pool takes the
// other's store bucket of its name for its own.
func ownerMarkerHidingStore(t *testing.T, endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/"+pool.BucketOwnerKey) {
			rp.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.Method {
		case http.MethodPut:
			w.Header().Set("ETag", `"d41d8cd98f00b204e9800998ecf8427e"`)
			w.WriteHeader(http.StatusOK)
		case http.MethodGet:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>%s</Key></Error>`, pool.BucketOwnerKey)
		case http.MethodHead:
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
