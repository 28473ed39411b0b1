package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// poolEnv is a test's control plane, a Secret, and the pool's first
// BackupBucket on a store's fresh bucket. The names of the test's
// cluster-scoped objects (entries, buckets, Shoots) start with its tag,
// and its controllers see only those (scoped): the control plane is the
// package's.
type poolEnv struct {
	*env
	tag              string
	provider, region string
	url              string // the first bucket's
	shoots           []string
}

func newPoolEnv(t *testing.T, store *testenv.BlobStore, provider string) *poolEnv {
	t.Helper()
	k := testenv.StartKubernetes(t)
	h := fnv.New32a()
	h.Write([]byte(k.Namespace))
	tag := fmt.Sprintf("t%08x", h.Sum32())
	poolURL := store.URL
	if store.Scheme == "gs" {
		// The controller reaches the emulator through endpoint= without
		// a token (a service account key would want one from Google);
		// a pool's bucket is created in a project at a location.
		poolURL += "?endpoint=" + url.QueryEscape(store.Endpoint) + "&anonymous=true&project=groundskeeper&region=EUROPE-WEST1"
	}
	e := &poolEnv{env: &env{t: t, k: k, client: installCRDs(t, k.Config), store: store.Open(t), scheme: store.Scheme, storeBucket: store.Bucket,
		bucket: tag + "-pool", secret: "backup-" + store.Scheme, prefix: tag},
		tag: tag, provider: tag + "-" + provider, region: "eu1", url: poolURL}
	e.setSecret(true)
	e.create(api.BucketResource, &api.BackupBucket{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.GroupVersion.String(), Kind: "BackupBucket"},
		ObjectMeta: metav1.ObjectMeta{Name: e.bucket},
		Spec: api.BackupBucketSpec{URL: poolURL, Provider: e.provider, Region: e.region,
			SecretRef: &api.SecretReference{Namespace: k.Namespace, Name: e.secret}},
	})
	return e
}

// createShoot creates a Shoot and, as Gardener does, its BackupEntry owned
// by it, in the pool; it returns the entry's name.
func (e *poolEnv) createShoot(name string, migrateFrom *api.LegacyBucket) string {
	e.t.Helper()
	name = e.tag + "-" + name
	e.shoots = append(e.shoots, name)
	e.create(api.ShootResource, &api.Shoot{TypeMeta: metav1.TypeMeta{APIVersion: api.GroupVersion.String(), Kind: "Shoot"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: api.ShootSpec{Provider: e.provider, Region: e.region}})
	u, err := e.client.Resource(api.ShootResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	entry := name + "--" + string(u.GetUID())[:5]
	e.create(api.EntryResource, &api.BackupEntry{
		TypeMeta: metav1.TypeMeta{APIVersion: api.GroupVersion.String(), Kind: "BackupEntry"},
		ObjectMeta: metav1.ObjectMeta{Name: entry, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: api.GroupVersion.String(), Kind: "Shoot", Name: name, UID: u.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}}},
		Spec: api.BackupEntrySpec{Provider: e.provider, Region: e.region, ShootUID: string(u.GetUID()), MigrateFrom: migrateFrom},
	})
	return entry
}

// buckets lists the BackupBuckets of the pool.
func (e *poolEnv) buckets() []api.BackupBucket {
	e.t.Helper()
	l, err := e.client.Resource(api.BucketResource).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []api.BackupBucket
	for i := range l.Items {
		b, err := decode[api.BackupBucket](&l.Items[i])
		if err != nil {
			e.t.Fatal(err)
		}
		if b.Spec.Pool() == e.provider+"/"+e.region {
			out = append(out, *b)
		}
	}
	slices.SortFunc(out, func(a, b api.BackupBucket) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// open opens a bucket of the pool with the Secret's credentials.
func (e *poolEnv) open(url string) *blob.Bucket {
	e.t.Helper()
	s, err := e.k.Client.CoreV1().Secrets(e.k.Namespace).Get(context.Background(), e.secret, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	creds, err := backupstore.CredentialsFromSecretData(e.scheme, e.k.Namespace, e.secret, s.Data)
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := backupstore.OpenBucket(context.Background(), url, creds)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { b.Close() })
	return b
}

// countCreates counts the BackupBuckets each replica creates, by name.
type countCreates struct {
	mu      sync.Mutex
	created map[string]int
}

// cleanup, once the test is done and before its controllers stop, deletes
// its Shoots (their entries forced) and buckets, and waits until they are
// gone: the control plane is the package's.
func (e *poolEnv) cleanup() {
	e.t.Cleanup(func() {
		ctx := context.Background()
		e.setSecret(true)
		l, err := e.client.Resource(api.EntryResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, u := range l.Items {
			if !strings.HasPrefix(u.GetName(), e.tag) {
				continue
			}
			// A merge patch: an update could lose to the controller's
			// status writes (a conflict), and the entry would then keep
			// its grace period past the wait below.
			if _, err := e.client.Resource(api.EntryResource).Patch(ctx, u.GetName(), types.MergePatchType,
				fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"}}}`, api.ForceDeletionAnnotation), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
				e.t.Errorf("cleanup: force the deletion of %s: %v", u.GetName(), err)
			}
		}
		for _, s := range e.shoots {
			_ = e.client.Resource(api.ShootResource).Delete(ctx, s, metav1.DeleteOptions{})
		}
		for _, b := range e.buckets() {
			_ = e.client.Resource(api.BucketResource).Delete(ctx, b.Name, metav1.DeleteOptions{})
		}
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			left := 0
			for _, r := range []schema.GroupVersionResource{api.EntryResource, api.BucketResource} {
				l, err := e.client.Resource(r).List(ctx, metav1.ListOptions{})
				if err != nil {
					e.t.Fatal(err)
				}
				for _, u := range l.Items {
					if strings.HasPrefix(u.GetName(), e.tag) {
						left++
					}
				}
			}
			if left == 0 {
				return
			}
			if time.Now().After(deadline) {
				e.t.Errorf("cleanup: %d entries and buckets of the test left", left)
				return
			}
		}
	})
}

func (c *countCreates) wrap(cl client.Client, live client.Reader) (client.Client, client.Reader) {
	return interceptor.NewClient(noWatch{cl}, interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := cl.Create(ctx, obj, opts...)
			if _, ok := obj.(*api.BackupBucket); ok && err == nil {
				c.mu.Lock()
				c.created[obj.GetName()]++
				c.mu.Unlock()
			}
			return err
		},
	}), live
}

// With a quota of 2, five Shoots' entries (created at once, naming no
// bucket) are placed in three buckets of their pool, the two the
// controller creates included (BackupBuckets and the store's buckets),
// each admitted with its marker in the bucket it names; no bucket holds
// more than 2, none is created twice. On MinIO, Azurite and
// fake-gcs-server with one replica, and on MinIO with two replicas that
// both reconcile (no leader election), each with its own cache. On MinIO
// and fake-gcs-server, a Shoot's deletion then deletes its entry (the
// garbage collector): the entry's prefix is kept for the grace period,
// then deleted, and its place in the pool freed; when the Shoots of a
// bucket the pool created are gone, the bucket goes after the grace
// period, its store's bucket first.
func TestPoolGrows(t *testing.T) {
	for _, tc := range []struct {
		name        string
		store       func(testing.TB) *testenv.BlobStore
		provider    string
		replicas    int
		deleteOwner bool
	}{
		{"MinIO", testenv.S3, "aws", 1, true},
		{"Azurite", testenv.Azure, "azure", 1, false},
		{"fake-gcs-server", testenv.GCS, "gcp", 1, true},
		{"MinIO/two replicas", testenv.S3, "aws", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testPoolGrows(t, newPoolEnv(t, tc.store(t), tc.provider), tc.replicas, tc.deleteOwner)
		})
	}
}

func testPoolGrows(t *testing.T, e *poolEnv, replicas int, deleteOwner bool) {
	const grace = 3 * time.Second
	creates := &countCreates{created: map[string]int{}}
	o := controllerOptions{grace: grace, quota: pool.Limits{e.provider: 2}, wrap: chain(scoped(e.tag), creates.wrap)}
	for range replicas {
		startReplica(t, e.k.Config, e.k.Namespace, o, false)
	}
	e.cleanup()
	var entries []string
	for i := range 5 {
		entries = append(entries, e.createShoot(fmt.Sprint(i), nil))
	}
	placed := map[string]string{} // entry -> bucket
	for _, name := range entries {
		be := e.waitEntry(name, "admitted", func(be *api.BackupEntry) bool {
			return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
		})
		placed[name] = be.Spec.BucketName
	}
	buckets := e.buckets()
	var names []string
	for _, b := range buckets {
		names = append(names, b.Name)
	}
	poolName := e.provider + "-" + e.region
	if want := []string{poolName + "-2", poolName + "-3", e.bucket}; !slices.Equal(names, want) {
		t.Fatalf("pool buckets %v, want %v", names, want)
	}
	if want := map[string]int{poolName + "-2": 1, poolName + "-3": 1}; !maps.Equal(creates.created, want) {
		t.Errorf("BackupBuckets created %v, want %v (each once, by the controller)", creates.created, want)
	}
	// The store names end in the hash of the installation: the UID of
	// kube-system, the default --installation.
	ks, err := e.k.Client.CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(ks.UID))
	perBucket := map[string]int{}
	for _, b := range buckets {
		if len(b.Status.Claims) > 2 {
			t.Errorf("BackupBucket %s: claims %v, over the quota of 2", b.Name, b.Status.Claims)
		}
		store := e.store
		if b.Name != e.bucket {
			store = e.open(b.Spec.URL) // created in the store by the controller
			if want, _ := backupstore.BucketURL(e.url, b.Name+"-"+hex.EncodeToString(sum[:4])); b.Spec.URL != want {
				t.Errorf("BackupBucket %s: spec.url %q, want %q", b.Name, b.Spec.URL, want)
			}
			if ok, err := store.Exists(context.Background(), pool.BucketOwnerKey); err != nil || !ok {
				t.Errorf("BackupBucket %s: no owner marker %s in its store's bucket: %v", b.Name, pool.BucketOwnerKey, err)
			}
		}
		for _, c := range b.Status.Claims {
			perBucket[b.Name]++
			if placed[c] != b.Name {
				t.Errorf("entry %s claimed by %s, names %s", c, b.Name, placed[c])
			}
			if ok, err := store.Exists(context.Background(), c+"/"+markerKey); err != nil || !ok {
				t.Errorf("entry %s: no marker in %s: %v", c, b.Name, err)
			}
		}
	}
	if len(placed) != 5 || perBucket[e.bucket] != 2 || perBucket[poolName+"-2"]+perBucket[poolName+"-3"] != 3 {
		t.Errorf("entries per bucket %v", perBucket)
	}
	t.Logf("placed: %v; created: %v", placed, creates.created)
	if !deleteOwner {
		return
	}

	// A Shoot goes: the garbage collector deletes its entry, whose
	// prefix stays for the grace period, then goes with the entry and
	// its place.
	victim := entries[0]
	shoot := e.shoots[0]
	store := e.store
	if placed[victim] != e.bucket {
		store = e.open(bucketURL(t, buckets, placed[victim]))
	}
	e.delete(api.ShootResource, shoot)
	be := e.waitEntry(victim, "deleted by the garbage collector", func(be *api.BackupEntry) bool {
		return be == nil || be.DeletionTimestamp != nil
	})
	if be == nil {
		t.Fatalf("entry %s gone at once, its grace period not kept", victim)
	}
	deleted := be.DeletionTimestamp.Time
	e.waitEntry(victim, "gone", gone)
	if since := time.Since(deleted); since < grace-time.Second { // the deletion timestamp has whole seconds
		t.Errorf("entry %s gone %s after its deletion timestamp, grace %s", victim, since, grace)
	}
	if ok, _ := store.Exists(context.Background(), victim+"/"+markerKey); ok {
		t.Errorf("entry %s gone, its marker kept", victim)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var claims []string
		for _, b := range e.buckets() {
			claims = append(claims, b.Status.Claims...)
		}
		if !slices.Contains(claims, victim) && len(claims) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claims %v after %s went", claims, victim)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The Shoots of the third bucket go: once it has been empty for the
	// grace period, the pool deletes it, the store's bucket and its data
	// first. The pool's first bucket by name (-2) and the administrator's
	// stay, whatever they hold.
	third := poolName + "-3"
	thirdURL := bucketURL(t, buckets, third)
	for i, name := range entries {
		if name != victim && placed[name] == third {
			e.delete(api.ShootResource, e.shoots[i])
		}
	}
	deadline = time.Now().Add(60 * time.Second)
	for slices.ContainsFunc(e.buckets(), func(b api.BackupBucket) bool { return b.Name == third }) {
		if time.Now().After(deadline) {
			t.Fatalf("BackupBucket %s still there 60 s after its entries went (grace %s)", third, grace)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ok, err := e.open(thirdURL).IsAccessible(context.Background()); err != nil || ok {
		t.Errorf("the store's bucket of %s: accessible %v, %v; want deleted", third, ok, err)
	}
	var left []string
	for _, b := range e.buckets() {
		left = append(left, b.Name)
	}
	if want := []string{poolName + "-2", e.bucket}; !slices.Equal(left, want) {
		t.Errorf("buckets left %v, want %v", left, want)
	}
}

func bucketURL(t *testing.T, buckets []api.BackupBucket, name string) string {
	for _, b := range buckets {
		if b.Name == name {
			return b.Spec.URL
		}
	}
	t.Fatalf("no BackupBucket %s", name)
	return ""
}

// A quota of 0, an unknown provider and a missing Secret are refused:
// the flag with an error naming the flag and value, the others with a
// condition on the entry naming them; nothing is created.
func TestPoolBadInput(t *testing.T) {
	var q pool.Limits
	err := run([]string{"--quota=aws=0"})
	if err == nil || !strings.Contains(err.Error(), `invalid value "aws=0" for flag -quota`) {
		t.Errorf("--quota=aws=0: %v", err)
	}
	if err := q.Set("aws=-3"); err == nil || !strings.Contains(err.Error(), `"aws=-3"`) {
		t.Errorf("aws=-3: %v", err)
	}
	if testing.Short() {
		t.Skip("the rest starts a control plane")
	}
	e := newPoolEnv(t, testenv.S3(t), "aws")
	creates := &countCreates{created: map[string]int{}}
	aws := e.provider
	startManager(t, e.k.Config, e.k.Namespace, controllerOptions{grace: time.Hour, quota: pool.Limits{aws: 1}, wrap: chain(scoped(e.tag), creates.wrap)})
	e.cleanup()
	e.provider = e.tag + "-gcp"
	unknown := e.createShoot("unknown", nil)
	be := e.waitEntry(unknown, "refused", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionFalse, share.ReasonNoPool)
	})
	if msg := condition(be, api.ConditionAdmitted).Message; !strings.Contains(msg, fmt.Sprintf(`spec.provider %q has no --quota (--quota="%s=1")`, e.provider, aws)) {
		t.Errorf("unknown provider: condition %q", msg)
	}
	// The Secret goes: the first entry fills the first bucket; the second
	// grows the pool, whose new bucket cannot be made in the store, and is
	// refused, naming the Secret.
	e.provider = aws
	first := e.createShoot("first", nil)
	e.waitEntry(first, "admitted", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
	})
	// Placed, its bucket is for good (CEL): neither changed nor removed.
	// Merge patches without a resourceVersion: a status write of the
	// controller's in between cannot turn the answer into a Conflict.
	for _, change := range []string{`{"spec":{"bucketName":"elsewhere"}}`, `{"spec":{"bucketName":null}}`} {
		_, err := e.client.Resource(api.EntryResource).Patch(context.Background(), first, types.MergePatchType, []byte(change), metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "bucketName is immutable once set") {
			t.Errorf("changing a placed entry's spec.bucketName: %v, want Invalid: bucketName is immutable once set", err)
		}
	}
	if err := e.k.Client.CoreV1().Secrets(e.k.Namespace).Delete(context.Background(), e.secret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := e.createShoot("second", nil)
	be = e.waitEntry(second, "refused", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionFalse, "StoreError")
	})
	if msg := condition(be, api.ConditionAdmitted).Message; !strings.Contains(msg, e.secret) {
		t.Errorf("missing Secret: condition %q does not name %s", msg, e.secret)
	}
	if be.Status.Prefix != "" {
		t.Errorf("entry %s admitted without its bucket's Secret", second)
	}
}
