package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/rbactest"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/replicatest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one test's control plane, shared S3 bucket on MinIO, and the
// BackupBucket and credentials Secret that point at it.
type env struct {
	t      *testing.T
	k      *testenv.Kubernetes
	client dynamic.Interface
	store  *blob.Bucket
	scheme string
	// storeBucket is the bucket's (container's) name in the store.
	storeBucket string
	bucket      string // BackupBucket name
	secret      string // in k.Namespace
	// prefix makes the cluster-scoped names of this test unique.
	prefix string
}

func newEnv(t *testing.T, store *testenv.BlobStore, maxEntries int) *env {
	t.Helper()
	k := testenv.StartKubernetes(t)
	e := &env{t: t, k: k, client: installCRDs(t, k.Config), store: store.Open(t), scheme: store.Scheme, storeBucket: store.Bucket,
		bucket: "shared-" + k.Namespace, secret: "backup-" + store.Scheme, prefix: "shoot--" + k.Namespace}
	e.setSecret(true)
	e.create(api.BucketResource, &api.BackupBucket{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.Group + "/" + api.Version, Kind: "BackupBucket"},
		ObjectMeta: metav1.ObjectMeta{Name: e.bucket},
		Spec: api.BackupBucketSpec{URL: store.URL, MaxEntries: maxEntries,
			SecretRef: &api.SecretReference{Namespace: k.Namespace, Name: e.secret}},
	})
	return e
}

// setSecret writes the credentials Secret, with Gardener's keys; with valid
// false, the secret key is wrong.
func (e *env) setSecret(valid bool) {
	e.t.Helper()
	var data map[string][]byte
	switch e.scheme {
	case "s3":
		key := testenv.S3SecretAccessKey
		if !valid {
			key = "not-the-key"
		}
		data = map[string][]byte{
			backupstore.SecretKeyAccessKeyID:     []byte(testenv.S3AccessKeyID),
			backupstore.SecretKeySecretAccessKey: []byte(key),
		}
	case "azblob":
		key := testenv.AzureAccountKey
		if !valid {
			key = "bm90LXRoZS1rZXk=" // base64 of "not-the-key"
		}
		data = map[string][]byte{
			backupstore.SecretKeyStorageAccount: []byte(testenv.AzureAccount),
			backupstore.SecretKeyStorageKey:     []byte(key),
		}
	case "gs":
		// A placeholder key: the bucket URLs say anonymous=true.
		key := `{"type":"service_account","project_id":"groundskeeper"}`
		if !valid {
			key = "not a key"
		}
		data = map[string][]byte{backupstore.SecretKeyServiceAccountJSON: []byte(key)}
	default:
		e.t.Fatalf("no credentials for %s", e.scheme)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.k.Namespace, Name: e.secret}, Data: data}
	ctx := context.Background()
	_, err := e.k.Client.CoreV1().Secrets(e.k.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = e.k.Client.CoreV1().Secrets(e.k.Namespace).Create(ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) create(r schema.GroupVersionResource, obj runtime.Object) {
	e.t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.client.Resource(r).Create(context.Background(), &unstructured.Unstructured{Object: m}, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createEntry(name string, annotations map[string]string) {
	e.t.Helper()
	e.create(api.EntryResource, &api.BackupEntry{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.Group + "/" + api.Version, Kind: "BackupEntry"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       api.BackupEntrySpec{BucketName: e.bucket, ShootUID: "uid-" + name},
	})
}

// entry returns the entry, nil if it is gone.
func (e *env) entry(name string) *api.BackupEntry {
	e.t.Helper()
	u, err := e.client.Resource(api.EntryResource).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	be, err := decode[api.BackupEntry](u)
	if err != nil {
		e.t.Fatal(err)
	}
	return be
}

func (e *env) bucketObject() *api.BackupBucket {
	e.t.Helper()
	u, err := e.client.Resource(api.BucketResource).Get(context.Background(), e.bucket, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	b, err := decode[api.BackupBucket](u)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) delete(r schema.GroupVersionResource, name string) {
	e.t.Helper()
	if err := e.client.Resource(r).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// waitEntry polls until done holds for the entry (nil once it is gone), for
// at most 2 minutes.
func (e *env) waitEntry(name, what string, done func(*api.BackupEntry) bool) *api.BackupEntry {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		be := e.entry(name)
		if done(be) {
			return be
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("BackupEntry %s: timed out waiting until %s; now %+v", name, what, be)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func condition(be *api.BackupEntry, typ string) *metav1.Condition {
	if be == nil {
		return nil
	}
	return meta.FindStatusCondition(be.Status.Conditions, typ)
}

func hasReason(be *api.BackupEntry, typ string, status metav1.ConditionStatus, reason string) bool {
	c := condition(be, typ)
	return c != nil && c.Status == status && c.Reason == reason
}

func gone(be *api.BackupEntry) bool { return be == nil }

// write puts backups under key prefix p.
func (e *env) write(p string, names ...string) {
	e.t.Helper()
	for _, n := range names {
		if err := e.store.WriteAll(context.Background(), p+n, []byte("snapshot of "+p+n), nil); err != nil {
			e.t.Fatal(err)
		}
	}
}

// lifecycleRules reads the S3 bucket's lifecycle rules.
func (e *env) lifecycleRules() []s3types.LifecycleRule {
	e.t.Helper()
	var c *s3.Client
	if !e.store.As(&c) {
		e.t.Fatal("not an S3 bucket")
	}
	out, err := c.GetBucketLifecycleConfiguration(context.Background(), &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(e.storeBucket)})
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchLifecycleConfiguration") {
			return nil
		}
		e.t.Fatal(err)
	}
	return out.Rules
}

// keys lists every key in the store.
func (e *env) keys() []string {
	e.t.Helper()
	var out []string
	it := e.store.List(nil)
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, o.Key)
	}
}

func (e *env) keysUnder(p string) []string {
	return slices.DeleteFunc(e.keys(), func(k string) bool { return !strings.HasPrefix(k, p) })
}

// waitEvent waits for an event with reason about the named object.
func (e *env) waitEvent(name, typ, reason string) corev1.Event {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// Events about cluster-scoped objects go to the default namespace.
		list, err := e.k.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, ev := range list.Items {
			if ev.Type == typ && ev.Reason == reason {
				return ev
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s event %s about %s; events: %+v", typ, reason, name, list.Items)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startManager runs a replica of the controller, a manager with leader
// election on (the Lease backup-entry in namespace), until the test ends
// or the returned function stops it, as its own process would. Several run
// in one process: controller names are not checked for uniqueness, and
// metrics and probes are off.
func startManager(t *testing.T, cfg *rest.Config, namespace string, o controllerOptions) (manager.Manager, func()) {
	t.Helper()
	return startReplica(t, cfg, namespace, o, true)
}

// startReplica is startManager, with leader election on or off: replicas
// without it all reconcile at once.
func startReplica(t *testing.T, cfg *rest.Config, namespace string, o controllerOptions, leaderElect bool) (manager.Manager, func()) {
	t.Helper()
	flags := kubecmd.Flags{Namespace: namespace, LeaderElect: leaderElect}
	mgr, err := flags.NewManager(rest.CopyConfig(cfg), "backup-entry", scheme, replicatest.Options(replicatest.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := setupControllers(mgr, o); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return mgr, stop
}

// decode converts what the dynamic client returns.
func decode[T any](u *unstructured.Unstructured) (*T, error) {
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return &out, nil
}

// Three clusters' entries share one bucket on MinIO, holding at most three;
// two of them are siblings whose names share a string prefix (…--b and
// …--bc), and an object at the bucket's root shares it too. A fourth entry
// is refused until a forced deletion frees a place. An entry deleted with a
// 15 s grace period keeps its data for 15 s, then loses exactly its prefix and
// its finalizer. A store failure (the Secret's key made wrong) keeps the
// finalizer and the data, until the Secret is fixed. The bucket stays while
// an entry names it.
func TestSharedBucketOnMinIO(t *testing.T) {
	// Long enough that the forced deletion's bound and the leader's stop
	// "within the grace period" hold on a loaded machine.
	const grace = 15 * time.Second
	e := newEnv(t, testenv.S3(t), 3)
	// The controller runs as deployed: two replicas, one leader-elected,
	// and every request they make is checked against deploy/rbac.yaml at
	// the end.
	var requests rbactest.Recorder
	o := controllerOptions{grace: grace}
	replicaA, stopA := startManager(t, requests.Wrap(e.k.Config), e.k.Namespace, o)
	replicaB, stopB := startManager(t, requests.Wrap(e.k.Config), e.k.Namespace, o)
	b, bc, f, x := e.prefix+"--b", e.prefix+"--bc", e.prefix+"--f", e.prefix+"--x"

	for _, name := range []string{b, bc, f} {
		e.createEntry(name, nil)
		be := e.waitEntry(name, "admitted", func(be *api.BackupEntry) bool {
			return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
		})
		if be.Status.Prefix != name+"/" || !slices.Contains(be.Finalizers, api.Finalizer) {
			t.Fatalf("admitted %s: prefix %q, finalizers %v", name, be.Status.Prefix, be.Finalizers)
		}
		e.write(be.Status.Prefix, "v2/Full-00000000-00001000", "v2/Incr-00001001-00001100")
	}
	stray := e.prefix + "--b-notes.txt" // shares the string prefix of …--b/ but is no entry
	e.write("", stray)
	e.waitEvent(b, corev1.EventTypeNormal, "Admitted")

	// The fourth entry: the bucket holds three.
	e.createEntry(x, nil)
	refused := e.waitEntry(x, "refused", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionFalse, "BucketFull")
	})
	if refused.Status.Prefix != "" || len(e.keysUnder(x)) != 0 {
		t.Errorf("refused entry has prefix %q, keys %v", refused.Status.Prefix, e.keysUnder(x))
	}
	e.waitEvent(x, corev1.EventTypeWarning, "BucketFull")

	// Forced: deleted at once, grace period or not.
	e.setForce(f, true)
	start := time.Now()
	e.delete(api.EntryResource, f)
	e.waitEntry(f, "gone", gone)
	if took := time.Since(start); took >= grace {
		t.Errorf("forced deletion took %s, not less than the %s grace period", took, grace)
	}
	if k := e.keysUnder(f + "/"); len(k) != 0 {
		t.Errorf("forced entry's keys left: %v", k)
	}
	// Its place goes to the refused entry.
	admitted := e.waitEntry(x, "admitted once a place is free", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
	})
	if got := e.keysUnder(x + "/"); !slices.Equal(got, []string{admitted.Status.Prefix + markerKey}) {
		t.Errorf("admitted entry %s: keys %v, want its marker", x, got)
	}

	// Grace period: the data stays for grace after the deletion timestamp.
	e.delete(api.EntryResource, b)
	waiting := e.waitEntry(b, "waiting for the grace period", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionPrefixDeleted, metav1.ConditionFalse, "GracePeriod")
	})
	if want := waiting.DeletionTimestamp.Add(grace); waiting.Status.DeleteAfter == nil || !waiting.Status.DeleteAfter.Time.Equal(want) {
		t.Errorf("status.deleteAfter = %v, want %s", waiting.Status.DeleteAfter, want)
	}
	if k := e.keysUnder(b + "/"); len(k) != 3 {
		t.Errorf("within the grace period, %s/ holds %v; want the marker and two backups", b, k)
	}
	// The leader stops within the grace period (releasing the Lease): the
	// other replica takes over and deletes the prefix when it is due.
	leader, other := "A", replicaB
	select {
	case <-replicaA.Elected():
		stopA()
	case <-replicaB.Elected():
		stopB()
		leader, other = "B", replicaA
	}
	t.Logf("replica %s led and stopped", leader)
	// Meanwhile a lifecycle rule of the store's expires the prefix even if
	// the controller is gone: from the first midnight after deleteAfter.
	backstop := "groundskeeper/expire/" + b + "/"
	if msg := condition(waiting, api.ConditionPrefixDeleted).Message; !strings.Contains(msg, backstop) {
		t.Errorf("grace period condition %q does not name the backstop rule", msg)
	}
	if rules := e.lifecycleRules(); !slices.ContainsFunc(rules, func(r s3types.LifecycleRule) bool {
		return aws.ToString(r.ID) == backstop && r.Expiration != nil && r.Expiration.Date != nil &&
			!r.Expiration.Date.Before(waiting.Status.DeleteAfter.Time) && r.Expiration.Date.Sub(waiting.Status.DeleteAfter.Time) <= 24*time.Hour
	}) {
		t.Errorf("no backstop rule %s expiring at the midnight after %v: %+v", backstop, waiting.Status.DeleteAfter, rules)
	}
	e.waitEntry(b, "gone", gone)
	select {
	case <-other.Elected():
		t.Log("the other replica took over")
	default:
		t.Error("the entry is gone, but the other replica does not lead")
	}
	if rules := e.lifecycleRules(); slices.ContainsFunc(rules, func(r s3types.LifecycleRule) bool { return aws.ToString(r.ID) == backstop }) {
		t.Errorf("backstop rule %s left after the prefix was deleted", backstop)
	}
	if since := time.Since(waiting.DeletionTimestamp.Time); since < grace {
		t.Errorf("entry gone %s after its deletion timestamp, before the %s grace period", since, grace)
	}
	if k := e.keysUnder(b + "/"); len(k) != 0 {
		t.Errorf("deleted entry's keys left: %v", k)
	}
	if k := e.keysUnder(bc + "/"); len(k) != 3 {
		t.Errorf("sibling %s/ holds %v; want its marker and two backups", bc, k)
	}
	if ok, err := e.store.Exists(context.Background(), stray); err != nil || !ok {
		t.Errorf("%s at the root: exists=%t, %v", stray, ok, err)
	}

	// A store failure keeps the entry, its finalizer and its data.
	e.setSecret(false)
	e.setForce(bc, true)
	e.delete(api.EntryResource, bc)
	failed := e.waitEntry(bc, "failing", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionPrefixDeleted, metav1.ConditionFalse, "StoreError")
	})
	ev := e.waitEvent(bc, corev1.EventTypeWarning, "StoreError")
	t.Logf("store failure: %s", ev.Message)
	if strings.Contains(ev.Message, "not-the-key") || strings.Contains(condition(failed, api.ConditionPrefixDeleted).Message, "not-the-key") {
		t.Errorf("the secret key appears in the event or condition")
	}
	time.Sleep(time.Second) // retries go on failing
	if be := e.entry(bc); be == nil || !slices.Contains(be.Finalizers, api.Finalizer) {
		t.Fatalf("after a store failure the entry is %+v; want it kept with its finalizer", be)
	}
	if k := e.keysUnder(bc + "/"); len(k) != 3 {
		t.Errorf("after a store failure %s/ holds %v", bc, k)
	}
	e.setSecret(true)
	e.waitEntry(bc, "gone once the Secret is fixed", gone)
	if k := e.keysUnder(bc + "/"); len(k) != 0 {
		t.Errorf("keys left under %s/: %v", bc, k)
	}

	// The bucket stays while an entry names it.
	e.delete(api.BucketResource, e.bucket)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		bb := e.bucketObject()
		if bb == nil {
			t.Fatal("BackupBucket deleted while a BackupEntry names it")
		}
		if c := meta.FindStatusCondition(bb.Status.Conditions, api.ConditionInUse); c != nil && c.Reason == "DeletionBlocked" {
			if bb.Status.Entries != 1 || bb.Status.Admitted != 1 {
				t.Errorf("bucket status %+v, want 1 entry, 1 admitted", bb.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucket deletion not blocked: %+v", bb.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.waitEvent(e.bucket, corev1.EventTypeWarning, "BucketInUse")
	e.setForce(x, true)
	e.delete(api.EntryResource, x)
	e.waitEntry(x, "gone", gone)
	for deadline := time.Now().Add(2 * time.Minute); e.bucketObject() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("BackupBucket not gone after its last entry")
		}
	}
	// Only the object that was never an entry's is left.
	if got := e.keys(); !slices.Equal(got, []string{stray}) {
		t.Errorf("store holds %v, want only %s", got, stray)
	}

	rules := rbactest.Rules(t, "deploy/rbac.yaml", map[string]string{"backup-entry": e.k.Namespace, "default": "default"})
	reqs := requests.Requests()
	rbactest.Check(t, rules, reqs, map[string]string{
		"patch events.events.k8s.io":                            "the event recorder patches an event that repeats (a series)",
		"create backupbuckets.backup.examples.groundskeeper.io": "a pool grows (TestPoolGrows); this test's bucket is in no pool",
		"delete backupbuckets.backup.examples.groundskeeper.io": "a pool deletes a bucket it created, left empty (TestPoolGrows)",
		"get deployments.apps":                                  "a migration's writer (TestMigrationOnMinIO); this test migrates nothing",
		"update deployments.apps":                               "a migration's writer (TestMigrationOnMinIO)",
		"list pods":                                             "a migration's writer's pods (TestMigrationOnMinIO)",
	})
}

// The same on Azure Blob (Azurite), with a storage account and key in the
// Secret: siblings …--a and …--ab in a container of two, the third entry
// refused; the forced deletion of …--a deletes exactly its prefix and lets
// the third in.
func TestSharedBucketOnAzurite(t *testing.T) {
	e := newEnv(t, testenv.Azure(t), 2)
	startManager(t, e.k.Config, e.k.Namespace, controllerOptions{grace: time.Hour})
	a, ab, c := e.prefix+"--a", e.prefix+"--ab", e.prefix+"--c"
	for _, name := range []string{a, ab} {
		e.createEntry(name, nil)
		be := e.waitEntry(name, "admitted", func(be *api.BackupEntry) bool {
			return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
		})
		e.write(be.Status.Prefix, "v2/Full-00000000-00001000", "v2/Incr-00001001-00001100")
	}
	e.createEntry(c, nil)
	e.waitEntry(c, "refused", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionFalse, "BucketFull")
	})
	e.setForce(a, true)
	e.delete(api.EntryResource, a)
	e.waitEntry(a, "gone", gone)
	e.waitEntry(c, "admitted once a place is free", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
	})
	if k := e.keysUnder(a + "/"); len(k) != 0 {
		t.Errorf("keys left under %s/: %v", a, k)
	}
	if k := e.keysUnder(ab + "/"); len(k) != 3 {
		t.Errorf("sibling %s/ holds %v; want its marker and two backups", ab, k)
	}
	for _, name := range []string{ab, c} {
		e.setForce(name, true)
		e.delete(api.EntryResource, name)
		e.waitEntry(name, "gone", gone)
	}
	if k := e.keys(); len(k) != 0 {
		t.Errorf("container holds %v after every entry is gone", k)
	}
	e.delete(api.BucketResource, e.bucket)
	for deadline := time.Now().Add(2 * time.Minute); e.bucketObject() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("BackupBucket not gone")
		}
	}
}

// The command itself, flags and all, with --dry-run and leader election,
// against the test API server's kubeconfig: a deleted entry's prefix is
// reported, not deleted, and the finalizer stays. Then a controller without
// --dry-run finishes the job.
func TestDryRunWithKubeconfig(t *testing.T) {
	e := newEnv(t, testenv.S3(t), 0)
	name := e.prefix + "--dry"
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--kubeconfig", e.k.Kubeconfig, "--namespace", e.k.Namespace, "--leader-elect",
			"--dry-run", "--deletion-grace-period", "0s", "--zap-log-level", "1", "--health-probe-bind-address", "127.0.0.1:0"})
	}()
	e.createEntry(name, map[string]string{api.ForceDeletionAnnotation: "true"})
	be := e.waitEntry(name, "admitted", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
	})
	e.write(be.Status.Prefix, "v2/Full-00000000-00001000", "v2/Incr-00001001-00001100")
	e.write(e.prefix+"--dryer/", "v2/Full-00000000-00001000") // a sibling's
	before := e.keys()
	e.delete(api.EntryResource, name)
	dry := e.waitEntry(name, "reported", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionPrefixDeleted, metav1.ConditionFalse, "DryRun")
	})
	msg := condition(dry, api.ConditionPrefixDeleted).Message
	if !strings.Contains(msg, "would delete 3 objects") {
		t.Errorf("dry-run condition: %q, want 3 objects", msg)
	}
	e.waitEvent(name, corev1.EventTypeNormal, "DryRun")
	if _, err := e.k.Client.CoordinationV1().Leases(e.k.Namespace).Get(context.Background(), "backup-entry", metav1.GetOptions{}); err != nil {
		t.Errorf("leader election Lease: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	if after := e.keys(); !slices.Equal(after, before) {
		t.Errorf("dry run changed the store: %v, was %v", after, before)
	}
	if be := e.entry(name); be == nil || !slices.Contains(be.Finalizers, api.Finalizer) {
		t.Fatalf("dry run: entry %+v, want it kept with its finalizer", be)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("did not stop after SIGINT")
	}

	startManager(t, e.k.Config, e.k.Namespace, controllerOptions{})
	e.waitEntry(name, "gone", gone)
	if k := e.keysUnder(name + "/"); len(k) != 0 {
		t.Errorf("keys left under %s/: %v", name, k)
	}
	if k := e.keysUnder(e.prefix + "--dryer/"); len(k) != 1 {
		t.Errorf("sibling's keys: %v", k)
	}
	e.delete(api.BucketResource, e.bucket)
	for deadline := time.Now().Add(2 * time.Minute); e.bucketObject() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("BackupBucket not gone")
		}
	}
}

// staleOnce serves one stale copy of an entry from the "cache" (the
// client's reads), as an informer that lags behind the API server does.
type staleOnce struct {
	mu    sync.Mutex
	stale *api.BackupEntry
}

func (s *staleOnce) wrap(cl client.Client, live client.Reader) (client.Client, client.Reader) {
	return interceptor.NewClient(noWatch{cl}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if e, ok := obj.(*api.BackupEntry); ok && s.stale != nil && s.stale.Name == key.Name {
				*e = *s.stale
				s.stale = nil
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}), live
}

func (s *staleOnce) served() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stale == nil
}

func (e *env) setForce(name string, force bool) {
	e.t.Helper()
	v := `"true"`
	if !force {
		v = "null"
	}
	if _, err := e.client.Resource(api.EntryResource).Patch(context.Background(), name, "application/merge-patch+json",
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, api.ForceDeletionAnnotation, v), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// An entry was deleted with the force annotation, which was then removed.
// A controller whose cache still holds the forced version must not delete
// the prefix: it decides again on the API server's copy, and waits for the
// grace period.
func TestStaleCacheDoesNotForceDeletion(t *testing.T) {
	e := newEnv(t, testenv.S3(t), 0)
	name := e.prefix + "--stale"
	_, stop := startManager(t, e.k.Config, e.k.Namespace, controllerOptions{grace: time.Hour})
	e.createEntry(name, map[string]string{api.ForceDeletionAnnotation: "true"})
	be := e.waitEntry(name, "admitted", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
	})
	e.write(be.Status.Prefix, "v2/Full-00000000-00001000", "v2/Incr-00001001-00001100")
	stop()

	e.delete(api.EntryResource, name)
	forced := e.entry(name) // deleted and forced: what the cache will serve
	e.setForce(name, false)
	wrap := &staleOnce{stale: forced}
	startManager(t, e.k.Config, e.k.Namespace, controllerOptions{grace: time.Hour, wrap: wrap.wrap})
	e.waitEntry(name, "waiting for the grace period", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionPrefixDeleted, metav1.ConditionFalse, "GracePeriod")
	})
	if !wrap.served() {
		t.Fatal("the stale entry was never read")
	}
	if k := e.keysUnder(name + "/"); len(k) != 3 {
		t.Errorf("%s/ holds %v; want the marker and two backups", name, k)
	}

	// Forced again, for real this time.
	e.setForce(name, true)
	e.waitEntry(name, "gone", gone)
	if k := e.keysUnder(name + "/"); len(k) != 0 {
		t.Errorf("keys left under %s/: %v", name, k)
	}
	e.delete(api.BucketResource, e.bucket)
	for deadline := time.Now().Add(2 * time.Minute); e.bucketObject() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("BackupBucket not gone")
		}
	}
}

// staleBucket is a cache that lags for one bucket: the controller's cached
// Gets of it answer with the copy it was given until caughtUp is called.
type staleBucket struct {
	mu    sync.Mutex
	stale *api.BackupBucket
	reads int
}

func (s *staleBucket) wrap(cl client.Client, live client.Reader) (client.Client, client.Reader) {
	return interceptor.NewClient(noWatch{cl}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if b, ok := obj.(*api.BackupBucket); ok && s.stale != nil && s.stale.Name == key.Name {
				*b = *s.stale.DeepCopy()
				s.reads++
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}), live
}

func (s *staleBucket) caughtUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = nil
}

// The admission decides on the bucket as the API server has it: a bucket
// deleted (held by a finalizer) while the controller's cache still serves
// it as it was before admits no entry (BucketDeleting), and no marker is
// written under the entry's prefix. The test fails if the admission reads
// the bucket from the cache.
func TestAdmissionReadsTheBucketFresh(t *testing.T) {
	e := newEnv(t, testenv.S3(t), 0)
	name := e.prefix + "--late"
	const hold = "test.groundskeeper.io/hold"
	setFinalizers := func(finalizers ...string) {
		t.Helper()
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.client.Resource(api.BucketResource).Patch(context.Background(), e.bucket, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setFinalizers(hold)
	cached := e.bucketObject() // what the cache will serve: not being deleted
	e.delete(api.BucketResource, e.bucket)
	if b := e.bucketObject(); b == nil || b.DeletionTimestamp == nil {
		t.Fatalf("BackupBucket %s after its deletion: %+v; want it held, being deleted", e.bucket, b)
	}
	stale := &staleBucket{stale: cached}
	startManager(t, e.k.Config, e.k.Namespace, controllerOptions{grace: time.Hour, wrap: stale.wrap})

	e.createEntry(name, nil)
	be := e.waitEntry(name, "decided", func(be *api.BackupEntry) bool { return condition(be, api.ConditionAdmitted) != nil })
	if c := condition(be, api.ConditionAdmitted); c.Status != metav1.ConditionFalse || c.Reason != share.ReasonBucketDeleting || be.Status.Prefix != "" {
		t.Errorf("entry %s named a bucket being deleted that the cache shows as it was: Admitted=%s %s (%s), prefix %q; want False, %s",
			name, c.Status, c.Reason, c.Message, be.Status.Prefix, share.ReasonBucketDeleting)
	}
	if k := e.keysUnder(name + "/"); len(k) != 0 {
		t.Errorf("keys under %s/ of a bucket being deleted: %v", name, k)
	}
	stale.mu.Lock()
	reads := stale.reads
	stale.mu.Unlock()
	if reads == 0 {
		t.Error("the stale bucket was never read from the cache: the test did not make the cache lag")
	}

	// The cache catches up; the entry goes (forced, in case it was
	// admitted), then the bucket.
	stale.caughtUp()
	e.setForce(name, true)
	e.delete(api.EntryResource, name)
	e.waitEntry(name, "gone", gone)
	setFinalizers()
	for deadline := time.Now().Add(2 * time.Minute); e.bucketObject() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("BackupBucket not gone")
		}
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRDs creates the generated CRDs in deploy/ (once per control
// plane) and waits until both resources are served.
func installCRDs(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range []schema.GroupVersionResource{api.BucketResource, api.EntryResource, api.ShootResource} {
		f, err := os.Open(filepath.Join("deploy", api.Group+"_"+r.Resource+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var crd unstructured.Unstructured
		err = yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&crd.Object)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, r := range []schema.GroupVersionResource{api.BucketResource, api.EntryResource, api.ShootResource} {
		for {
			_, err := client.Resource(r).List(ctx, metav1.ListOptions{})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not served: %v", r.Resource, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return client
}
