package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// shortSeed is the seed of the short run; CHAOS_SEED replays another.
const shortSeed = 14

// TestChaos runs the backup-entry workload on a control plane, a
// fake-gcs-server, a MinIO and an Azurite of its own while their
// components restart (Azurite only with SIGTERM), the replicas'
// connections fail and replicas are killed, then checks the invariants
// (chaos_check_test.go). A pool on the MinIO grows and shrinks, entries
// migrate from legacy prefixes there (or name shared buckets as their
// source), and a second installation of the controller, on the
// package's control plane with one replica and no faults of its own,
// gives its entries and its pool the same names and the same
// --installation, and writes into the same MinIO (chaos_pool_test.go).
// Without CHAOS_DURATION it is the short run, 60 s of faults from a fixed
// seed, which make test runs (go test -short skips it); make chaos sets
// CHAOS_DURATION (and a random seed unless CHAOS_SEED is set).
func TestChaos(t *testing.T) {
	seed, duration := chaos.Plan(t, shortSeed)

	k := testenv.StartIsolatedKubernetes(t)
	installCRDs(t, k.Config)
	runID := runTag(k.Namespace)
	gcs := testenv.StartIsolatedGCS(t, testenv.BucketOptions{})
	s3 := testenv.StartIsolatedS3(t, testenv.BucketOptions{})
	az := testenv.StartIsolatedAzure(t)
	gcsProxy := faultproxy.Start(t, strings.TrimPrefix(gcs.Endpoint, "http://"))
	minio := faultproxy.Start(t, strings.TrimPrefix(s3.Endpoint, "http://"))
	azURL, err := url.Parse(az.Endpoint) // http://host:port/account
	if err != nil {
		t.Fatal(err)
	}
	azurite := faultproxy.Start(t, azURL.Host)
	replicaProxies, replicaConfig := chaos.ReplicaProxies(t, k, 2)
	world := beWorld{
		direct: k.Config, ns: k.Namespace, runID: runID,
		stores:        beStores(t, gcs.Bucket, gcs.Endpoint, "http://"+gcsProxy.Addr(), &s3.BlobStore),
		replicaConfig: replicaConfig,
		pool:          newPool(runID, runID+"-pool", "s3-credentials", s3.Endpoint),
		legacy:        legacyStore(t, s3.Endpoint, runID+"-legacy"),
		installation:  "chaos-" + runID,
	}
	world.secrets = beSecrets("http://" + minio.Addr())
	world.stores = append(world.stores, azureStore(t, &az.BlobStore, azurite.Addr()))
	world.secrets = append(world.secrets, azureSecret())
	// The second installation: the package's control plane, the same
	// names, the same --installation, the same MinIO reached directly.
	k2 := testenv.StartKubernetes(t)
	installCRDs(t, k2.Config)
	second := beWorld{direct: k2.Config, ns: k2.Namespace, runID: runID,
		secrets:       beSecrets(s3.Endpoint)[:1],
		pool:          newPool(runID, runID+"-pool-2", "s3-credentials", s3.Endpoint),
		installation:  world.installation,
		replicaConfig: func(int) (*rest.Config, *faultproxy.Proxy) { return k2.Config, nil },
	}
	log, logPath, err := chaos.FileLogger(t, "backup-entry", seed)
	if err != nil {
		t.Fatal(err)
	}
	// client-go's own goroutines (event broadcasters) log through klog
	// after the test returns: the logger is set for the rest of the
	// process, never cleared, which would race with them.
	klog.SetLogger(log.WithName("klog"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The bound: a leader killed just before the faults stop keeps its
	// Lease for 15 s; then a pass of the entries, and retries after failed
	// deletions (controller-runtime's backoff, grown during the faults);
	// doubled for a loaded machine.
	g, err := newBEWorkload(ctx, world, beOptions{replicas: 2, grace: 5 * time.Second, bound: 60 * time.Second, log: log}, seed)
	if err != nil {
		t.Fatal(err)
	}
	g.peer, err = newBEWorkload(ctx, second, beOptions{replicas: 1, grace: 5 * time.Second, bound: 60 * time.Second,
		wrap: scoped(runID), log: log.WithName("installation-2"), label: "installation 2", slower: 3}, seed)
	if err != nil {
		t.Fatal(err)
	}
	// A client's connections: to the API server for each replica, and to
	// each store (shared: the endpoints are in the Secret and the URL).
	clients := []*faultproxy.Proxy{replicaProxies[0], replicaProxies[1], minio, gcsProxy, azurite}
	all := append(clients[:5:5], k.EtcdProxy)
	// Azurite is only ever stopped with SIGTERM: a kill can lose its last
	// writes (testenv).
	faults := append(chaos.ControlPlaneFaults(k),
		chaos.Restart("restart minio", s3.Server), chaos.Restart("restart fake-gcs-server", gcs.Server),
		chaos.RestartGracefully("restart azurite (SIGTERM)", az.Server), chaos.KillReplica(g.replicas))
	faults = append(faults, chaos.ConnectionFaults(clients, all)...)
	res := runBE(ctx, t, g, chaos.Config{
		Name: "backup-entry", Seed: seed, Duration: duration, Faults: faults,
		Schedule:      &chaos.ScheduleOptions{MinGap: 2 * time.Second, MaxGap: 6 * time.Second, MinHold: time.Second, MaxHold: 12 * time.Second},
		SettleTimeout: 90 * time.Second,
	})
	g.peer.cleanup(t)
	chaos.Report(t, res, logPath)
	for _, what := range []string{"observed: entries admitted", "observed: entries deleted", "observed: gcs keys deleted", "observed: s3 keys deleted", "observed: abs keys deleted",
		"observed: entries placed by the pool", "observed: pool buckets grown", "observed: pool keys deleted", "observed: migrations done", "observed: migrations refused (source shared)",
		"installation 2: observed: pool buckets grown", "installation 2: observed: pool keys deleted"} {
		if res.Ops[what] == 0 {
			t.Errorf("%s: 0; the run proves nothing\n%s", what, res.Table())
		}
	}
}

// runTag is a short name for the run whose namespace is ns, to start the
// names of its cluster-scoped objects: a pool's store buckets are named
// after them, within the 63 characters of a bucket name.
func runTag(ns string) string {
	h := fnv.New32a()
	h.Write([]byte(ns))
	return fmt.Sprintf("t%08x", h.Sum32())
}

// beStores are the workload's stores: a GCS bucket on the fake-gcs-server
// at gcsEndpoint, which the controller reaches at gcsVia, and the S3 bucket
// s3, which it reaches at the endpoint in the Secret.
func beStores(t *testing.T, gcsBucket, gcsEndpoint, gcsVia string, s3 *testenv.BlobStore) []*beStore {
	t.Helper()
	gcs, err := openGCS(context.Background(), gcsEndpoint, gcsBucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gcs.Close() })
	return []*beStore{
		{kind: "gcs", direct: gcs, secret: "gcs-credentials",
			url: func(prefix string) string { return gcsURL(gcsVia, gcsBucket, prefix) }},
		{kind: "s3", direct: s3.Open(t), secret: "s3-credentials", bucket: s3.Bucket,
			url: func(prefix string) string { return fmt.Sprintf("s3://%s?prefix=%s", s3.Bucket, prefix) }},
	}
}

// azureStore is a container on Azurite, which the controller reaches at
// via (host:port).
func azureStore(t *testing.T, az *testenv.BlobStore, via string) *beStore {
	return &beStore{kind: "abs", direct: az.Open(t), secret: "abs-credentials",
		url: func(prefix string) string {
			u := fmt.Sprintf("azblob://%s?localemu=true&domain=%s&protocol=http", az.Bucket, via)
			if prefix != "" {
				u += "&prefix=" + prefix
			}
			return u
		}}
}

// azureSecret is the credentials Secret of azureStore: Azurite's
// well-known account and key.
func azureSecret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "abs-credentials"}, StringData: map[string]string{
		backupstore.SecretKeyStorageAccount: testenv.AzureAccount,
		backupstore.SecretKeyStorageKey:     testenv.AzureAccountKey,
	}}
}

// beSecrets are the credentials Secrets of beStores: the S3 one names the
// endpoint the controller reaches MinIO at; the GCS key is a placeholder,
// which the controller requires and the anonymous emulator client ignores.
func beSecrets(s3Endpoint string) []*corev1.Secret {
	return []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "s3-credentials"}, StringData: map[string]string{
			backupstore.SecretKeyAccessKeyID:     testenv.S3AccessKeyID,
			backupstore.SecretKeySecretAccessKey: testenv.S3SecretAccessKey,
			backupstore.SecretKeyRegion:          testenv.S3Region,
			backupstore.SecretKeyEndpoint:        s3Endpoint,
			backupstore.SecretKeyS3PathStyle:     "true",
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gcs-credentials"}, StringData: map[string]string{
			backupstore.SecretKeyServiceAccountJSON: `{"type":"service_account","project_id":"groundskeeper","client_email":"backup-entry@groundskeeper.iam.gserviceaccount.com"}`,
		}},
	}
}

// runBE runs the workload g under cfg's faults with its replicas, which
// keep running while the system settles and stop when the run is over.
// With a peer (a second installation), the peer's generator runs beside
// g's and its replica from before the run until after it, never killed;
// the run settles when both have, and each checker judges its own
// installation (the peer's violations name it).
func runBE(ctx context.Context, t *testing.T, g *beWorkload, cfg chaos.Config) *chaos.Result {
	cfg.Replicas, cfg.Workload, cfg.Settled, cfg.Check = g.replicas, g.generate, g.settled, g.check
	cfg.Observed, cfg.Logf = g.observed, t.Logf
	if p := g.peer; p != nil {
		pctx, stop := context.WithCancel(ctx)
		wait := p.replicas.Start(pctx, &chaos.Ops{})
		defer func() {
			stop()
			wait()
		}()
		cfg.Workload = func(ctx context.Context, ops *chaos.Ops) error {
			var eg errgroup.Group
			eg.Go(func() error { return g.generate(ctx, ops) })
			eg.Go(func() error {
				if err := p.generate(ctx, ops); err != nil {
					return fmt.Errorf("%s: %w", p.o.label, err)
				}
				return nil
			})
			return eg.Wait()
		}
		cfg.Settled = func(ctx context.Context) error {
			if err := g.settled(ctx); err != nil {
				return err
			}
			if err := p.settled(ctx); err != nil {
				return fmt.Errorf("%s: %w", p.o.label, err)
			}
			return nil
		}
		cfg.Check = func(ctx context.Context) []chaos.Violation {
			out := g.check(ctx)
			for _, v := range p.check(ctx) {
				v.Detail = p.o.label + ": " + v.Detail
				out = append(out, v)
			}
			return out
		}
		cfg.Observed = func(ops map[string]int) {
			g.observed(ops)
			p.observed(ops)
		}
	}
	return chaos.Run(ctx, cfg)
}

// notFound is the API server's answer for an entry or bucket a scoped
// controller must not see.
func notFound(resource, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: api.Group, Resource: resource}, name)
}

// clientWrap wraps the controller's client (cached reads, writes) and API
// reader (fresh reads): controllerOptions.wrap.
type clientWrap = func(client.Client, client.Reader) (client.Client, client.Reader)

// intercept wraps both with the same funcs (interceptor.Funcs: a nil func
// passes the call on).
func intercept(f interceptor.Funcs) clientWrap {
	return func(cl client.Client, live client.Reader) (client.Client, client.Reader) {
		return interceptor.NewClient(noWatch{cl}, f), interceptor.NewClient(noWatch{readerClient{cl, live}}, f)
	}
}

// chain applies wraps in order: the first is closest to the API server.
func chain(wraps ...clientWrap) clientWrap {
	return func(cl client.Client, live client.Reader) (client.Client, client.Reader) {
		for _, w := range wraps {
			if w != nil {
				cl, live = w(cl, live)
			}
		}
		return cl, live
	}
}

// noWatch is a client without watches, which the controller never uses.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("no watch")
}

// readerClient reads through r; its writes go to the client.
type readerClient struct {
	client.Client
	r client.Reader
}

func (c readerClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.r.Get(ctx, key, obj, opts...)
}

func (c readerClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.r.List(ctx, list, opts...)
}

// scoped limits a controller to the entries and buckets whose names start
// with prefix: on the shared control plane, each planted-bug run's
// controller leaves the other runs' objects alone. A read of no name is
// passed on: the API server's answer to it is the controller's.
func scoped(prefix string) clientWrap {
	return intercept(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			switch obj.(type) {
			case *api.BackupEntry:
				if key.Name != "" && !strings.HasPrefix(key.Name, prefix) {
					return notFound("backupentries", key.Name)
				}
			case *api.BackupBucket:
				if key.Name != "" && !strings.HasPrefix(key.Name, prefix) {
					return notFound("backupbuckets", key.Name)
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			switch l := list.(type) {
			case *api.BackupEntryList:
				l.Items = slices.DeleteFunc(l.Items, func(e api.BackupEntry) bool { return !strings.HasPrefix(e.Name, prefix) })
			case *api.BackupBucketList:
				l.Items = slices.DeleteFunc(l.Items, func(b api.BackupBucket) bool { return !strings.HasPrefix(b.Name, prefix) })
			}
			return nil
		},
	})
}

// Planted bugs: each wraps the controller's API access (a test-only
// wrapper, never a switch of the controller) and breaks one promise.

// entryReads wraps the controller's reads and writes of entries: read
// changes each entry read (cached and fresh), write undoes it on each
// entry written (the API server refuses some changes, and a planted bug
// must not write its lie).
func entryReads(read, write func(*api.BackupEntry)) clientWrap {
	return intercept(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if e, ok := obj.(*api.BackupEntry); ok {
				read(e)
			}
			return nil
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if e, ok := obj.(*api.BackupEntry); ok {
				write(e)
			}
			return c.Update(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if e, ok := obj.(*api.BackupEntry); ok {
				write(e)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
}

// shiftedDeletion reads every deletionTimestamp shifted by by: an hour
// early deletes prefixes before their grace period is over, an hour late
// never deletes them within the bound. Writes carry the real timestamp
// (the API server refuses to change it).
func shiftedDeletion(by time.Duration) clientWrap {
	var real sync.Map // entry name -> *metav1.Time
	return entryReads(func(e *api.BackupEntry) {
		if e.DeletionTimestamp != nil {
			real.Store(e.Name, e.DeletionTimestamp.DeepCopy())
			e.DeletionTimestamp = &metav1.Time{Time: e.DeletionTimestamp.Add(by)}
		}
	}, func(e *api.BackupEntry) {
		if v, ok := real.Load(e.Name); ok && e.DeletionTimestamp != nil {
			e.DeletionTimestamp = v.(*metav1.Time)
		}
	})
}

// finalizerFirst removes a deleted entry's finalizer when the controller
// reads it fresh before deleting the prefix, and answers with the copy it
// read: the prefix is deleted 2 s after the entry is gone.
func finalizerFirst(cl client.Client, live client.Reader) (client.Client, client.Reader) {
	return cl, interceptor.NewClient(noWatch{readerClient{cl, live}}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			e, ok := obj.(*api.BackupEntry)
			if !ok || e.DeletionTimestamp == nil || !slices.Contains(e.Finalizers, api.Finalizer) {
				return nil
			}
			read := e.DeepCopy()
			e.Finalizers = slices.DeleteFunc(e.Finalizers, func(f string) bool { return f == api.Finalizer })
			if err := cl.Update(ctx, e); err != nil {
				return err
			}
			if err := chaos.Sleep(ctx, 2*time.Second); err != nil {
				return err
			}
			*e = *read
			return nil
		},
	})
}

// roomier reads every limited bucket's spec.maxEntries two higher, and
// writes it back as it was.
func roomier() clientWrap {
	var real sync.Map // bucket name -> int
	return intercept(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if b, ok := obj.(*api.BackupBucket); ok && b.Spec.MaxEntries != 0 {
				real.Store(b.Name, b.Spec.MaxEntries)
				b.Spec.MaxEntries += 2
			}
			return nil
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if b, ok := obj.(*api.BackupBucket); ok {
				if v, ok := real.Load(b.Name); ok {
					b.Spec.MaxEntries = v.(int)
				}
			}
			return c.Update(ctx, obj, opts...)
		},
	})
}

// forcedLive reads every admitted entry that is not deleted as deleted
// now and forced, and writes it back as it was.
func forcedLive() clientWrap {
	var faked sync.Map // entry name -> bool: it had the force annotation
	return entryReads(func(e *api.BackupEntry) {
		if e.DeletionTimestamp != nil || e.Status.Prefix == "" || !slices.Contains(e.Finalizers, api.Finalizer) {
			faked.Delete(e.Name)
			return
		}
		_, had := e.Annotations[api.ForceDeletionAnnotation]
		faked.Store(e.Name, had)
		e.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		if e.Annotations == nil {
			e.Annotations = map[string]string{}
		}
		e.Annotations[api.ForceDeletionAnnotation] = "true"
	}, func(e *api.BackupEntry) {
		if had, ok := faked.Load(e.Name); ok {
			e.DeletionTimestamp = nil
			if !had.(bool) {
				delete(e.Annotations, api.ForceDeletionAnnotation)
			}
		}
	})
}

// lookalikeDeletingStore is an endpoint in front of an S3 or GCS server
// that, after each delete it passes on, deletes one more key: the first
// "-notes.txt" look-alike beside an entry's prefix that is left. A planted
// bug of the store layer.
func lookalikeDeletingStore(t *testing.T, endpoint string, bucket *blob.Bucket) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rp.ServeHTTP(w, r)
		if r.Method != http.MethodDelete && !(r.Method == http.MethodPost && r.URL.Query().Has("delete")) {
			return
		}
		iter := bucket.List(nil)
		for {
			o, err := iter.Next(r.Context())
			if errors.Is(err, io.EOF) || err != nil {
				return
			}
			if strings.HasSuffix(o.Key, "-notes.txt") {
				_ = bucket.Delete(r.Context(), o.Key)
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// cleanup removes the run's entries and buckets from a shared control
// plane, finalizers and all, once its controller is stopped. (The writer
// Deployments of migrations go with the test's namespace.)
func (g *beWorkload) cleanup(t *testing.T) {
	ctx := context.Background()
	var entries api.BackupEntryList
	var buckets api.BackupBucketList
	if err := g.cl.List(ctx, &entries); err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	if err := g.cl.List(ctx, &buckets); err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	unfinalize := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
	var objs []client.Object
	for i := range entries.Items {
		objs = append(objs, &entries.Items[i])
	}
	for i := range buckets.Items {
		objs = append(objs, &buckets.Items[i])
	}
	for _, o := range objs {
		// The generator's entries and buckets (<runID>--…) and its pool's
		// (<runID>-aws-…).
		if !strings.HasPrefix(o.GetName(), g.w.runID) {
			continue
		}
		if err := client.IgnoreNotFound(g.cl.Patch(ctx, o, unfinalize)); err != nil {
			t.Errorf("cleanup %s: %v", o.GetName(), err)
		}
		if err := client.IgnoreNotFound(g.cl.Delete(ctx, o)); err != nil {
			t.Errorf("cleanup %s: %v", o.GetName(), err)
		}
	}
}

// Each invariant catches a planted bug: the workload runs without faults
// on the shared control plane with one replica, broken by a test-only
// wrapper, and the checker must report the invariant. The runs are
// parallel; each one's controller sees only its own objects (scoped). The
// owner-marker case runs a pool there, whose entries stay, and a second
// installation on a control plane of its own, with the same pool and
// --installation, whose store hides the pools' owner markers and whose
// entries go soon after they are placed (its buckets, of one entry each,
// empty often).
func TestChaosCheckerCatchesPlantedBugs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrap   clientWrap
		store  bool
		owners bool
		legacy bool
		want   []string
	}{
		{name: "deletion timestamps read an hour early", want: []string{invEarly},
			wrap: shiftedDeletion(-time.Hour)},
		{name: "store deletes a look-alike with each delete", store: true, want: []string{invOutside, invKept}},
		{name: "finalizer removed 2 s before the prefix is deleted", want: []string{invFinalizer},
			wrap: finalizerFirst},
		{name: "maxEntries read two higher", want: []string{invQuota},
			wrap: roomier()},
		{name: "deletion timestamps read an hour late", want: []string{invLiveness},
			wrap: shiftedDeletion(time.Hour)},
		{name: "live entries taken for forced deletions", want: []string{invKept, invEarly},
			wrap: forcedLive()},
		{name: "migrations read their sources without their prefixes", legacy: true, want: []string{invMigration, invOutside},
			wrap: wholeLegacyBucket()},
		{name: "store hides the pools' owner markers from a second installation", owners: true, want: []string{invOwner}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := testenv.StartKubernetes(t)
			installCRDs(t, k.Config)
			runID := runTag(k.Namespace)
			s3, gcs := testenv.S3(t), testenv.GCS(t)
			world := beWorld{direct: k.Config, ns: k.Namespace, runID: runID,
				stores:        beStores(t, gcs.Bucket, gcs.Endpoint, gcs.Endpoint, s3),
				secrets:       beSecrets(s3.Endpoint),
				replicaConfig: func(int) (*rest.Config, *faultproxy.Proxy) { return k.Config, nil }}
			if tc.legacy {
				world.legacy = legacyStore(t, s3.Endpoint, runID+"-legacy")
			}
			var second *beWorld
			if tc.owners {
				// Pools alone, on the shared MinIO: the second
				// installation's store is behind the planted bug.
				world.stores, world.secrets = nil, beSecrets(s3.Endpoint)[:1]
				world.installation = "chaos-" + runID
				world.pool = newPool(runID, runID+"-pool", "s3-credentials", s3.Endpoint)
				k2 := testenv.StartIsolatedKubernetes(t)
				installCRDs(t, k2.Config)
				second = &beWorld{direct: k2.Config, ns: k2.Namespace, runID: runID,
					secrets:       beSecrets(ownerMarkerHidingStore(t, s3.Endpoint))[:1],
					pool:          newPool(runID, runID+"-pool-2", "s3-credentials", s3.Endpoint),
					installation:  world.installation,
					replicaConfig: func(int) (*rest.Config, *faultproxy.Proxy) { return k2.Config, nil }}
				second.pool.quota = 1
			}
			if tc.store {
				via := lookalikeDeletingStore(t, gcs.Endpoint, world.stores[0].direct)
				world.stores[0].url = func(prefix string) string { return gcsURL(via, gcs.Bucket, prefix) }
				world.secrets = beSecrets(lookalikeDeletingStore(t, s3.Endpoint, world.stores[1].direct))
			}
			log, logPath, err := chaos.FileLogger(t, "backup-entry", shortSeed)
			if err != nil {
				t.Fatal(err)
			}
			wrap := chain(scoped(runID), tc.wrap)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o := beOptions{replicas: 1, grace: 3 * time.Second, bound: 10 * time.Second, wrap: wrap, log: log}
			if tc.legacy {
				o.migrateOneIn = 2
			}
			if tc.owners {
				o.deletes = deleteNone
			}
			g, err := newBEWorkload(ctx, world, o, shortSeed)
			if err != nil {
				t.Fatal(err)
			}
			if second != nil {
				o.wrap, o.log, o.label, o.entries, o.deletes = nil, log.WithName("installation-2"), "installation 2", "f", deleteSoon
				if g.peer, err = newBEWorkload(ctx, *second, o, shortSeed); err != nil {
					t.Fatal(err)
				}
			}
			res := runBE(ctx, t, g, chaos.Config{Name: "backup-entry planted: " + tc.name, Seed: shortSeed,
				Duration: 15 * time.Second, SettleTimeout: 15 * time.Second})
			g.cleanup(t)
			t.Logf("replica log: %s\n%s", logPath, res.Table())
			found := map[string]int{}
			for _, v := range res.Violations {
				found[v.Invariant]++
			}
			for _, inv := range tc.want {
				if found[inv] == 0 {
					t.Errorf("the checker did not report %q for the planted bug %q; it reported %v", inv, tc.name, found)
				}
			}
		})
	}
}
