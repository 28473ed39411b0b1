package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/rbactest"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/replicatest"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The garbage collector as a controller, on a real API server and
// controller manager, with the backup data in MinIO. The clock is fake and
// stepped by the test, since spec.ttl counts days; everything else is real.
//
// Backups: ns1-b1 (7d, expires), ns1-b10 (30d; its prefix shares the
// leading characters of ns1-b1's), ns1-missing (3d, its Secret does not
// exist), ns1-badcreds (3d, its Secret holds a wrong key), ns1-forever
// (0d). Claims of pods pod-0..4, with pvc-ttl 3d except data-2 (30d): pod-0
// stays, pods 1 to 4 are deleted, pod-3 is re-created mounting its claim
// again, and data-4 is outside --claim-selector.
//
// First a --dry-run controller, eight days later, must delete nothing; then
// the real one must delete exactly ns1-b1's data and resource and claim
// data-1, keep ns1-missing (Warning event, condition) and ns1-badcreds
// (Warning event, condition, data intact), and collect ns1-missing once its
// Secret exists.
func TestCollector(t *testing.T) {
	k := testenv.StartKubernetes(t)
	cl := installCRD(t, k.Config)
	store := testenv.S3(t)
	bucket := store.Open(t)
	ctx := context.Background()
	ns := k.Namespace
	clk := clocktesting.NewFakeClock(time.Now())

	createSecret(t, k, "minio", testenv.S3SecretAccessKey, store)
	createSecret(t, k, "wrong-creds", "not-the-secret-key", store)
	backups := map[string]struct{ ttl, secret string }{
		"ns1-b1":       {"7d", "minio"},
		"ns1-b10":      {"30d", "minio"},
		"ns1-missing":  {"3d", "absent"},
		"ns1-badcreds": {"3d", "wrong-creds"},
		"ns1-forever":  {"0d", "minio"},
	}
	allKeys := []string{"backups/" + ns + "/ns1-b1.log"} // beside ns1-b1/, not under it
	for name, b := range backups {
		for _, part := range []string{"part-0001.asb", "part-0002.asb", "metadata.json"} {
			allKeys = append(allKeys, "backups/"+ns+"/"+name+"/"+part)
		}
		createBackup(t, cl, ns, name, b.ttl, b.secret, store.Bucket)
	}
	for _, key := range allKeys {
		if err := bucket.WriteAll(ctx, key, []byte("data of "+key), nil); err != nil {
			t.Fatal(err)
		}
	}
	ann := lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}
	for i := range 5 {
		ttl := 3 * retention.Day
		if i == 2 {
			ttl = 30 * retention.Day
		}
		labels := map[string]string{"app": "aerospike"}
		if i == 4 {
			labels = nil // not one of the collector's claims (--claim-selector)
		}
		createClaim(t, k, fmt.Sprintf("data-%d", i), labels, ann.Track(fmt.Sprintf("pod-%d", i), ttl))
		createPod(t, k, i)
	}

	// A real controller sees pods 1 to 4 go away and marks the claims of
	// pods 1 to 3.
	opts := controllerOptions{namespace: ns, retryAfter: 5 * time.Minute, claimSelector: "app=aerospike"}
	requests := &rbactest.Recorder{}
	reports := make(chan report, 100)
	_, stop := startManager(t, k.Config, opts, clk, requests, reports)
	waitPass(t, reports, clk.Now())
	for i := 4; i >= 1; i-- {
		if err := k.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("pod-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "claims 1 to 3 marked unmounted", func() error {
		for i := 1; i <= 3; i++ {
			c, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("data-%d", i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if _, ok := c.Annotations[ann.LastUnmountedKey()]; !ok {
				return fmt.Errorf("claim %s has annotations %v", c.Name, c.Annotations)
			}
		}
		return nil
	})
	// pod-3 comes back without the operator's CheckReuse: its claim keeps
	// a stale last-unmounted-on, and the mount must protect it.
	createPod(t, k, 3)
	stop()

	// Eight days later, a dry run deletes nothing, and says what it would.
	opts.dryRun = true
	_, stop = startManager(t, k.Config, opts, clk, requests, reports)
	waitPass(t, reports, clk.Now())
	stepAfterRequeues(t, clk, 8*retention.Day)
	rep := waitPass(t, reports, clk.Now())
	stop()
	var would []string
	for _, o := range rep.Backups {
		if o.Deleted {
			would = append(would, o.Name)
		}
	}
	for _, d := range rep.Claimed.Deleted {
		would = append(would, d.Claim)
	}
	slices.Sort(would)
	if want := []string{"data-1", "ns1-b1"}; !slices.Equal(would, want) {
		t.Errorf("dry run would delete %v, want %v (report %+v)", would, want, rep)
	}
	assertKeys(t, bucket, ns, allKeys)
	assertBackups(t, cl, ns, "ns1-b1", "ns1-b10", "ns1-badcreds", "ns1-forever", "ns1-missing")
	assertClaims(t, k, "data-0", "data-1", "data-2", "data-3", "data-4")
	for _, name := range []string{"ns1-missing", "ns1-badcreds"} {
		if c := condition(t, cl, ns, name); c != nil {
			t.Errorf("dry run wrote a condition on %s: %+v", name, c)
		}
	}

	// The real controller, at the same instant, as two replicas: the one
	// that holds the Lease collects.
	// Each replica reports on its own channel, so that a wait below sees
	// the passes of the replica it means.
	opts.dryRun = false
	reportsA, reportsB := make(chan report, 100), make(chan report, 100)
	replicaA, stopA := startManager(t, k.Config, opts, clk, requests, reportsA)
	replicaB, stopB := startManager(t, k.Config, opts, clk, requests, reportsB)
	leader, stopLeader, other, otherReports := "A", stopA, replicaB, reportsB
	select {
	case <-replicaA.Elected():
		waitPass(t, reportsA, clk.Now())
	case <-replicaB.Elected():
		leader, stopLeader, other, otherReports = "B", stopB, replicaA, reportsA
		waitPass(t, reportsB, clk.Now())
	case <-time.After(time.Minute):
		t.Fatal("neither replica took the Lease")
	}
	var left []string
	for _, key := range allKeys {
		if !strings.Contains(key, "/ns1-b1/") {
			left = append(left, key)
		}
	}
	assertKeys(t, bucket, ns, left)
	eventually(t, "claim data-1 deleted", func() error {
		return claimsAre(k, "data-0", "data-2", "data-3", "data-4")
	})
	assertBackups(t, cl, ns, "ns1-b10", "ns1-badcreds", "ns1-forever", "ns1-missing")
	for name, reason := range map[string]string{"ns1-missing": api.ReasonSecretNotFound, "ns1-badcreds": api.ReasonDeletionFailed} {
		c := condition(t, cl, ns, name)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
			t.Errorf("backup %s: condition %s = %+v, want False with reason %s", name, api.ConditionDataDeleted, c, reason)
		} else {
			t.Logf("backup %s: %s=%s %s: %s", name, c.Type, c.Status, c.Reason, c.Message)
		}
		waitEvent(t, k, name, corev1.EventTypeWarning, reason)
	}
	waitEvent(t, k, "ns1-b1", corev1.EventTypeNormal, collect.ReasonCollected)
	waitEvent(t, k, "data-1", corev1.EventTypeNormal, lifecycle.ReasonClaimCollected)

	// The leader stops (it releases the Lease); the other replica takes
	// over and runs its first passes at the same instant. The missing
	// Secret appears; the next attempt, after --retry-interval, deletes the
	// backup's data and then the backup. (No claim pass is due then: the
	// claims' next decision is weeks away.)
	stopLeader()
	t.Logf("replica %s led and stopped", leader)
	select {
	case <-other.Elected():
	case <-time.After(time.Minute):
		t.Fatal("the other replica did not take the Lease over")
	}
	t.Log("the other replica leads")
	waitPass(t, otherReports, clk.Now())
	createSecret(t, k, "absent", testenv.S3SecretAccessKey, store)
	stepAfterRequeues(t, clk, opts.retryAfter)
	waitBackupPass(t, otherReports, clk.Now())
	var left2 []string
	for _, key := range left {
		if !strings.Contains(key, "/ns1-missing/") {
			left2 = append(left2, key)
		}
	}
	assertKeys(t, bucket, ns, left2)
	assertBackups(t, cl, ns, "ns1-b10", "ns1-badcreds", "ns1-forever")
	assertClaims(t, k, "data-0", "data-2", "data-3", "data-4")
	if c, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-4", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if v, ok := c.Annotations[ann.LastUnmountedKey()]; ok {
		t.Errorf("claim data-4, outside --claim-selector, was marked unmounted (%s)", v)
	}

	// deploy/rbac.yaml grants exactly what the controller asked for.
	rules := rbactest.Rules(t, "deploy/rbac.yaml", map[string]string{"aerospike": ns})
	reqs := requests.Requests()
	rbactest.Check(t, rules, reqs, map[string]string{
		"patch events.events.k8s.io": "the event recorder patches an event that repeats (a series)",
	})
}

// The command itself, flags and all, with leader election, against the test
// API server's kubeconfig and the real clock, stopped with SIGINT as a pod
// is with SIGTERM: a backup with a two-second TTL is collected.
func TestRunWithKubeconfig(t *testing.T) {
	k := testenv.StartKubernetes(t)
	cl := installCRD(t, k.Config)
	store := testenv.S3(t)
	bucket := store.Open(t)
	ctx := context.Background()
	createSecret(t, k, "minio", testenv.S3SecretAccessKey, store)
	keys := []string{"backups/" + k.Namespace + "/short/data.asb", "backups/" + k.Namespace + "/long/data.asb"}
	for _, key := range keys {
		if err := bucket.WriteAll(ctx, key, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	createBackup(t, cl, k.Namespace, "short", "2s", "minio", store.Bucket)
	createBackup(t, cl, k.Namespace, "long", "1h", "minio", store.Bucket)

	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--kubeconfig", k.Kubeconfig, "--namespace", k.Namespace, "--zap-log-level", "1", "--leader-elect",
			"--health-probe-bind-address", "127.0.0.1:0"})
	}()
	eventually(t, "backup short collected", func() error {
		err := cl.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: "short"}, &api.AerospikeNamespaceBackup{})
		if err == nil {
			return errors.New("still there")
		}
		return ignoreNotFound(err)
	})
	assertKeys(t, bucket, k.Namespace, keys[1:])
	assertBackups(t, cl, k.Namespace, "long")
	if _, err := k.Client.CoordinationV1().Leases(k.Namespace).Get(ctx, "aerospike-gc", metav1.GetOptions{}); err != nil {
		t.Errorf("leader election Lease: %v", err)
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
}

// The CRD refuses bad input, naming the field; the sample backup passes.
func TestCRDValidation(t *testing.T) {
	k := testenv.StartKubernetes(t)
	cl := installCRD(t, k.Config)
	ctx := context.Background()

	f, err := os.Open("deploy/backup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var sample *unstructured.Unstructured
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == api.Kind {
			sample = &u
		}
	}
	if sample == nil {
		t.Fatal("no backup in deploy/backup.yaml")
	}
	sample.SetNamespace(k.Namespace)
	if err := cl.Create(ctx, sample); err != nil {
		t.Errorf("sample backup: %v", err)
	}

	for _, tc := range []struct {
		name   string
		change func(*api.AerospikeNamespaceBackup)
		field  string
	}{
		{"ttl in upper case", func(b *api.AerospikeNamespaceBackup) { b.Spec.TTL = "30D" }, "spec.ttl"},
		{"ttl without a unit", func(b *api.AerospikeNamespaceBackup) { b.Spec.TTL = "30" }, "spec.ttl"},
		{"unknown storage type", func(b *api.AerospikeNamespaceBackup) { b.Spec.Storage.Type = "ftp" }, "spec.storage.type"},
		{"no secret", func(b *api.AerospikeNamespaceBackup) { b.Spec.Storage.Secret = "" }, "spec.storage.secret"},
		{"prefix with a trailing slash", func(b *api.AerospikeNamespaceBackup) { b.Spec.Storage.Prefix = "backups/" }, "spec.storage.prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &api.AerospikeNamespaceBackup{
				ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "bad"},
				Spec: api.AerospikeNamespaceBackupSpec{
					Target:  api.TargetNamespace{Cluster: "orders", Namespace: "orders"},
					Storage: api.BackupStorageSpec{Type: "s3", Bucket: "b", Secret: "s"},
					TTL:     "7d",
				},
			}
			tc.change(b)
			err := cl.Create(ctx, b)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("create: %v; want Invalid naming %s", err, tc.field)
			}
		})
	}
}

// Bad flags are refused with the flag and the value.
func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--retry-interval", "0s"},
	} {
		err := run(args)
		if err == nil || !strings.Contains(err.Error(), args[0]) || !strings.Contains(err.Error(), args[1]) {
			t.Errorf("run(%q) = %v, want an error naming %s and %s", args, err, args[0], args[1])
		}
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// startManager runs a replica of the controller, a manager with leader
// election on (the Lease aerospike-gc), with its requests recorded, until
// the test ends or stop is called; the reports of its passes go to
// reports. Several run in one process: controller names are not checked
// for uniqueness, and metrics and probes are off.
func startManager(t *testing.T, cfg *rest.Config, o controllerOptions, clk *clocktesting.FakeClock, requests *rbactest.Recorder, reports chan<- report) (manager.Manager, func()) {
	t.Helper()
	flags := kubecmd.Flags{Namespace: o.namespace, LeaderElect: true}
	mgr, err := flags.NewManager(requests.Wrap(rest.CopyConfig(cfg)), "aerospike-gc", scheme, replicatest.Options(replicatest.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := setupCollector(mgr, o, clk, func(r report) { reports <- r }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var stopped bool
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(stop)
	return mgr, stop
}

// stepAfterRequeues steps the fake clock by d once the passes that just
// reported have registered their requeues on it: a pass reports before its
// controller's queue adds the requeue, and a timer added after the step
// would wait d longer. It waits until the clock has timers (the queues'
// requeues among them) and their count has held for 300ms.
func stepAfterRequeues(t *testing.T, clk *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		n := clk.Waiters()
		if n != last {
			last, since = n, time.Now()
		}
		if n > 0 && time.Since(since) >= 300*time.Millisecond {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("stepping the clock by %s with %d timers waiting", d, last)
	clk.Step(d)
}

// waitPass waits for a backup pass and a claim pass that ran at or after
// now, and returns their reports in one.
func waitPass(t *testing.T, reports <-chan report, now time.Time) report {
	t.Helper()
	return waitPasses(t, reports, now, true)
}

// waitBackupPass waits for a backup pass that ran at or after now.
func waitBackupPass(t *testing.T, reports <-chan report, now time.Time) report {
	t.Helper()
	return waitPasses(t, reports, now, false)
}

func waitPasses(t *testing.T, reports <-chan report, now time.Time, wantClaims bool) report {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	var both report
	backups, claims := false, !wantClaims
	for !backups || !claims {
		select {
		case r := <-reports:
			if r.Now.Before(now) {
				continue
			}
			both.Now = r.Now
			if r.Claims {
				both.Claimed, claims = r.Claimed, true
			} else {
				both.Backups, backups = r.Backups, true
			}
		case <-timeout:
			t.Fatalf("no backup and claim passes at or after %s (backups %v, claims %v)", now.Format(time.RFC3339), backups, claims)
		}
	}
	return both
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// installCRD creates the generated CRD (once per control plane), waits
// until backups are served, and returns a client that reads and writes
// them typed, straight from the API server.
func installCRD(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("deploy/aerospike.examples.groundskeeper.io_aerospikenamespacebackups.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var crd unstructured.Unstructured
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&crd.Object); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.Create(ctx, &crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	eventually(t, "backups served", func() error {
		// A new client: the first one's REST mapping predates the CRD.
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		if err := c.List(ctx, &api.AerospikeNamespaceBackupList{}, client.InNamespace("default")); err != nil {
			return err
		}
		cl = c
		return nil
	})
	return cl
}

// createSecret creates an S3 credentials Secret with the keys backupstore
// reads (Gardener's), for the MinIO of store.
func createSecret(t *testing.T, k *testenv.Kubernetes, name, secretKey string, store *testenv.BlobStore) {
	t.Helper()
	_, err := k.Client.CoreV1().Secrets(k.Namespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		StringData: map[string]string{
			backupstore.SecretKeyAccessKeyID:     testenv.S3AccessKeyID,
			backupstore.SecretKeySecretAccessKey: secretKey,
			backupstore.SecretKeyRegion:          testenv.S3Region,
			backupstore.SecretKeyEndpoint:        store.Endpoint,
			backupstore.SecretKeyS3PathStyle:     "true",
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func createBackup(t *testing.T, cl client.Client, namespace, name, ttl, secret, bucket string) {
	t.Helper()
	createBackupWithPrefix(t, cl, namespace, name, ttl, secret, bucket, "")
}

func createBackupWithPrefix(t *testing.T, cl client.Client, namespace, name, ttl, secret, bucket, prefix string) {
	t.Helper()
	err := cl.Create(context.Background(), &api.AerospikeNamespaceBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: api.AerospikeNamespaceBackupSpec{
			Target:  api.TargetNamespace{Cluster: "orders", Namespace: "orders"},
			Storage: api.BackupStorageSpec{Type: "s3", Bucket: bucket, Secret: secret, Prefix: prefix},
			TTL:     ttl,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func getBackup(t *testing.T, cl client.Client, namespace, name string) *api.AerospikeNamespaceBackup {
	t.Helper()
	var b api.AerospikeNamespaceBackup
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

func createClaim(t *testing.T, k *testenv.Kubernetes, name string, labels, annotations map[string]string) {
	t.Helper()
	_, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Create(context.Background(), &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func createPod(t *testing.T, k *testenv.Kubernetes, i int) {
	t.Helper()
	_, err := k.Client.CoreV1().Pods(k.Namespace).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i)},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "aerospike", Image: "aerospike/aerospike-server",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/opt/aerospike/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("data-%d", i)}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func assertKeys(t *testing.T, b *blob.Bucket, namespace string, want []string) {
	t.Helper()
	var got []string
	iter := b.List(&blob.ListOptions{Prefix: "backups/" + namespace + "/"})
	for {
		o, err := iter.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, o.Key)
	}
	want = slices.Clone(want)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("objects in the bucket:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func assertBackups(t *testing.T, cl client.Client, namespace string, want ...string) {
	t.Helper()
	var list api.AerospikeNamespaceBackupList
	if err := cl.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range list.Items {
		got = append(got, b.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("backups %v, want %v", got, want)
	}
}

// claimsAre reports whether exactly these claims exist and none is being
// deleted.
func claimsAre(k *testenv.Kubernetes, want ...string) error {
	list, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	var got []string
	for _, c := range list.Items {
		name := c.Name
		if c.DeletionTimestamp != nil {
			name += " (terminating)"
		}
		got = append(got, name)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return fmt.Errorf("claims %v, want %v", got, want)
	}
	return nil
}

func assertClaims(t *testing.T, k *testenv.Kubernetes, want ...string) {
	t.Helper()
	if err := claimsAre(k, want...); err != nil {
		t.Error(err)
	}
}

func condition(t *testing.T, cl client.Client, namespace, name string) *metav1.Condition {
	t.Helper()
	b := getBackup(t, cl, namespace, name)
	return meta.FindStatusCondition(b.Status.Conditions, api.ConditionDataDeleted)
}

func waitEvent(t *testing.T, k *testenv.Kubernetes, object, eventtype, reason string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s event %s on %s", eventtype, reason, object), func() error {
		list, err := k.Client.CoreV1().Events(k.Namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name == object && e.Type == eventtype && e.Reason == reason {
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s %s %s", e.InvolvedObject.Name, e.Type, e.Reason))
		}
		return fmt.Errorf("events: %v", seen)
	})
}

// TestPodDeletedWhileNoReplicaRuns: a pod deleted while no replica of the
// collector ran (a leader election gap, an upgrade) sends no event to the
// replica that starts next, which still marks the claim unmounted; the claim
// of a pod that still runs stays unmarked. Found by the chaos workload.
func TestPodDeletedWhileNoReplicaRuns(t *testing.T) {
	k := testenv.StartKubernetes(t)
	installCRD(t, k.Config)
	ctx := context.Background()
	ann := lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}
	for i := range 2 {
		createClaim(t, k, fmt.Sprintf("data-%d", i), nil, ann.Track(fmt.Sprintf("pod-%d", i), retention.Day))
		createPod(t, k, i)
	}
	if err := k.Client.CoreV1().Pods(k.Namespace).Delete(ctx, "pod-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	clk := clocktesting.NewFakeClock(time.Now())
	opts := controllerOptions{namespace: k.Namespace, retryAfter: time.Minute}
	startManager(t, k.Config, opts, clk, &rbactest.Recorder{}, make(chan report, 100))
	eventually(t, "claim data-0 marked unmounted", func() error {
		c, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Get(ctx, "data-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := c.Annotations[ann.LastUnmountedKey()]; !ok {
			return fmt.Errorf("annotations %v", c.Annotations)
		}
		return nil
	})
	c, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Get(ctx, "data-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Annotations[ann.LastUnmountedKey()]; ok {
		t.Errorf("claim data-1, mounted by running pod-1, was marked unmounted at %s", v)
	}
}
