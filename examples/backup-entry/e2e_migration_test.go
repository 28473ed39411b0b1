package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/rbactest"
	"github.com/groundskeeper-io/groundskeeper/internal/soak"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// sums reads every object under prefix: key without prefix -> sha256.
func sums(t *testing.T, b *blob.Bucket, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := b.ReadAll(context.Background(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(o.Key, prefix)] = fmt.Sprintf("%x", sha256.Sum256(data))
	}
}

// writer plays a backup writer Deployment on a control plane without a
// kubelet or ReplicaSet controller: while the Deployment has replicas and
// no new location, its pod writes to the legacy bucket; scaled to 0, it
// writes a last backup and its pod goes, a second later; scaled up with
// the new location, a pod comes back.
type writer struct {
	t       *testing.T
	e       *poolEnv
	key     types.NamespacedName
	legacy  *blob.Bucket
	mu      sync.Mutex
	written int
	atPause map[string]string // the legacy bucket when the pod went
	resumed string            // the location the new pod writes to
}

func (w *writer) run(ctx context.Context) {
	apps, core := w.e.k.Client.AppsV1().Deployments(w.key.Namespace), w.e.k.Client.CoreV1().Pods(w.key.Namespace)
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": w.key.Name}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}
	}
	if _, err := core.Create(ctx, pod(w.key.Name+"-0"), metav1.CreateOptions{}); err != nil {
		w.t.Error(err)
		return
	}
	var scaledDown time.Time
	for i := 0; ctx.Err() == nil; i++ {
		time.Sleep(20 * time.Millisecond)
		d, err := apps.Get(ctx, w.key.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		pods, err := core.List(ctx, metav1.ListOptions{LabelSelector: "app=" + w.key.Name})
		if err != nil {
			continue
		}
		location := d.Spec.Template.Annotations[api.BackupLocationAnnotation]
		switch running := len(pods.Items) > 0; {
		case *d.Spec.Replicas > 0 && running && location == "":
			if err := w.legacy.WriteAll(ctx, fmt.Sprintf("v2/Incr-live-%05d", i), fmt.Appendf(nil, "live %d", i), nil); err == nil {
				w.mu.Lock()
				w.written++
				w.mu.Unlock()
			}
		case *d.Spec.Replicas == 0 && running && scaledDown.IsZero():
			scaledDown = time.Now() // the pod takes a second to stop
		case *d.Spec.Replicas == 0 && running && time.Since(scaledDown) > time.Second:
			if err := w.legacy.WriteAll(ctx, "v2/Incr-final", []byte("the last one"), nil); err != nil {
				w.t.Error(err)
			}
			w.mu.Lock()
			w.atPause = sums(w.t, w.legacy, "")
			w.mu.Unlock()
			if err := core.Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				w.t.Error(err)
			}
		case *d.Spec.Replicas > 0 && !running && location != "":
			if _, err := core.Create(ctx, pod(w.key.Name+"-1"), metav1.CreateOptions{}); err != nil {
				w.t.Error(err)
			}
			w.mu.Lock()
			w.resumed = location
			w.mu.Unlock()
			return
		}
	}
}

// legacyObjects is how many objects the legacy bucket holds before the
// migration, besides the writer's: 500, and 2,000 under make soak.
var legacyObjects = soak.Size(500, 2000)

// fill writes n objects of different sizes to b, 16 at a time.
func fill(t *testing.T, b *blob.Bucket, n int) {
	t.Helper()
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			return b.WriteAll(ctx, fmt.Sprintf("v2/Full-%05d", i), fmt.Appendf(nil, "backup %d %s", i, strings.Repeat("x", i%1000)), nil)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A legacy bucket of legacyObjects objects, and a writer that keeps adding to it
// until it is paused, migrate into an entry's prefix in the pool on
// MinIO: afterwards the prefix holds every legacy object byte for byte
// (count and checksums), an object outside the prefix is untouched, the
// legacy objects are deleted only after the grace period, the writer is
// back at 1 replica with the new location, the downtime is in the status
// and an event; a migrated entry that names another legacy bucket is not
// migrated again (Migrated=True, AlreadyMigrated) and nothing changes.
// The controller is stopped while the writer pauses, and another one
// finishes the migration. An entry whose legacy bucket is the pool's own,
// spelled with another region, is refused (Migrated=False,
// SourceIsShared) and nothing of the pool's bucket changes.
func TestMigrationOnMinIO(t *testing.T) {
	const grace = 8 * time.Second
	ctx := context.Background()
	e := newPoolEnv(t, testenv.S3(t), "aws")
	legacyStore := testenv.S3(t)
	legacy := legacyStore.Open(t)
	fill(t, legacy, legacyObjects)
	if err := e.store.WriteAll(ctx, "shoot--other/keep", []byte("not the migration's"), nil); err != nil {
		t.Fatal(err)
	}
	outside := sums(t, e.store, "shoot--other/")
	one := int32(1)
	key := types.NamespacedName{Namespace: e.k.Namespace, Name: "etcd-main"}
	labels := map[string]string{"app": key.Name}
	if _, err := e.k.Client.AppsV1().Deployments(key.Namespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := &writer{t: t, e: e, key: key, legacy: legacy}
	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	go w.run(wctx)
	time.Sleep(300 * time.Millisecond) // the writer writes before the controller starts

	var requests rbactest.Recorder // every request checked against deploy/rbac.yaml at the end
	// 3: the bucket also holds shoot--other/, data of no entry, which the
	// store counts (share.Quota counts prefixes, not resources).
	o := controllerOptions{grace: grace, quota: pool.Limits{e.provider: 3}, wrap: scoped(e.tag)}
	_, stop := startManager(t, requests.Wrap(e.k.Config), e.k.Namespace, o)
	name := e.createShoot("migrating", &api.LegacyBucket{URL: legacyStore.URL,
		SecretRef: &api.SecretReference{Namespace: e.k.Namespace, Name: e.secret},
		Writer:    api.WriterReference{Namespace: key.Namespace, Name: key.Name}})
	// A second entry names the pool's own bucket as its legacy bucket,
	// spelled with another region: it is never migrated (the pool's
	// bucket would be copied into itself and deleted with every entry's
	// data), and nothing of it is copied, paused or deleted.
	sharedURL := strings.Replace(e.url, "region="+testenv.S3Region, "region=eu-west-1", 1)
	if sharedURL == e.url {
		t.Fatalf("the pool's URL %s names no region to spell another way", e.url)
	}
	fromShared := e.createShoot("from-shared", &api.LegacyBucket{URL: sharedURL,
		SecretRef: &api.SecretReference{Namespace: e.k.Namespace, Name: e.secret},
		Writer:    api.WriterReference{Namespace: key.Namespace, Name: "nobody"}})
	waitStep := func(step migrate.Step) *api.BackupEntry {
		t.Helper()
		return e.waitEntry(name, "migration step "+string(step), func(be *api.BackupEntry) bool {
			return be != nil && be.Status.Migration != nil && be.Status.Migration.Step == step
		})
	}
	// The controller stops while the writer's pod takes its second to go;
	// another resumes at the recorded step.
	waitStep(migrate.StepPauseWriter)
	stop()
	startManager(t, requests.Wrap(e.k.Config), e.k.Namespace, o)
	e.cleanup()
	waitStep(migrate.StepDeleteLegacy)
	if o, err := legacy.List(nil).Next(ctx); err != nil { // a listing: reading them all may outlast the grace period
		t.Errorf("legacy bucket emptied at the switch, before its grace period: %v", err)
	} else {
		t.Logf("at the switch, the legacy bucket still holds %s", o.Key)
	}
	be := waitStep(migrate.StepDone)
	done := time.Now()
	st := be.Status.Migration
	if since := done.Sub(st.SwitchedAt.Time); since < grace-time.Second { // metav1.Time has whole seconds
		t.Errorf("legacy deleted %s after the switch, grace %s", since, grace)
	}
	w.mu.Lock()
	atPause, written, resumed := w.atPause, w.written, w.resumed
	w.mu.Unlock()
	if written == 0 || len(atPause) != legacyObjects+written+1 {
		t.Errorf("the writer wrote %d objects, the legacy bucket held %d at the pause; want %d+%d+1", written, len(atPause), legacyObjects, written)
	}
	moved := sums(t, e.store, be.Status.Prefix)
	delete(moved, markerKey)
	delete(moved, "migration-manifest.json")
	if !maps.Equal(moved, atPause) {
		t.Errorf("the prefix holds %d objects, the legacy bucket held %d at the pause; differing: %v", len(moved), len(atPause), diffKeys(moved, atPause))
	}
	if st.Copied != len(atPause) || st.PausedAt == nil || st.ResumedAt == nil || st.Downtime(done) <= 0 {
		t.Errorf("status.migration %+v", st)
	}
	// The legacy bucket was the cluster's own: it is gone, not only
	// emptied.
	if ok, err := legacy.IsAccessible(ctx); err != nil || ok {
		t.Errorf("the legacy bucket after the migration: accessible %v, %v; want deleted", ok, err)
	}
	if got := sums(t, e.store, "shoot--other/"); !maps.Equal(got, outside) {
		t.Errorf("outside the prefix: %v, want %v", got, outside)
	}
	refused := e.waitEntry(fromShared, "condition Migrated=False, SourceIsShared", func(be *api.BackupEntry) bool {
		c := meta.FindStatusCondition(be.Status.Conditions, migrate.ConditionMigrated)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == migrate.ReasonSourceIsShared
	})
	c := meta.FindStatusCondition(refused.Status.Conditions, migrate.ConditionMigrated)
	if !strings.Contains(c.Message, e.bucket) || refused.Status.Migration != nil {
		t.Errorf("the entry whose source is the pool's bucket: condition %q, status.migration %+v; want the BackupBucket %s named and no step", c.Message, refused.Status.Migration, e.bucket)
	}
	if got := sums(t, e.store, refused.Status.Prefix); len(got) != 1 {
		t.Errorf("the prefix of the entry whose source is the pool's bucket holds %v; want its marker alone", got)
	}
	e.waitEvent(fromShared, corev1.EventTypeWarning, migrate.ReasonSourceIsShared)
	t.Logf("a source that is the pool's bucket: %s", c.Message)
	d, err := e.k.Client.AppsV1().Deployments(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	location := be.Spec.BucketName + "/" + be.Status.Prefix
	if *d.Spec.Replicas != 1 || d.Annotations[api.PausedReplicasAnnotation] != "" || d.Spec.Template.Annotations[api.BackupLocationAnnotation] != location {
		t.Errorf("writer Deployment: replicas %d, annotations %v, template %v; want 1 replica at %s", *d.Spec.Replicas, d.Annotations, d.Spec.Template.Annotations, location)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for resumed == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		w.mu.Lock()
		resumed = w.resumed
		w.mu.Unlock()
	}
	if resumed != location {
		t.Errorf("the writer resumed at %q, want %q", resumed, location)
	}
	ev := e.waitEvent(name, corev1.EventTypeNormal, migrate.ReasonMigrated)
	if !strings.Contains(ev.Message, "downtime") {
		t.Errorf("Migrated event %q says no downtime", ev.Message)
	}
	t.Logf("%d legacy objects (%d by the writer) migrated; downtime %s; %s", len(atPause), written, st.Downtime(done), ev.Message)

	// Migrated already: spec.migrateFrom taken away and another legacy
	// bucket named, the entry is not migrated again: the condition says
	// so, and nothing changes (the prefix, the new legacy bucket, the
	// writer).
	other := testenv.S3(t)
	otherBucket := other.Open(t)
	if err := otherBucket.WriteAll(ctx, "v2/Full-elsewhere", []byte("another cluster's"), nil); err != nil {
		t.Fatal(err)
	}
	prefixBefore := sums(t, e.store, be.Status.Prefix)
	for _, from := range []*api.LegacyBucket{nil, {URL: other.URL, SecretRef: &api.SecretReference{Namespace: e.k.Namespace, Name: e.secret},
		Writer: api.WriterReference{Namespace: key.Namespace, Name: key.Name}}} {
		// The controller writes the status meanwhile: read, change, retry.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			entry := e.entry(name)
			entry.Spec.MigrateFrom = from
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(entry)
			if err != nil {
				return err
			}
			_, err = e.client.Resource(api.EntryResource).Update(ctx, &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatalf("spec.migrateFrom to %+v: %v", from, err)
		}
	}
	again := e.waitEntry(name, "condition Migrated=True, AlreadyMigrated", func(be *api.BackupEntry) bool {
		c := meta.FindStatusCondition(be.Status.Conditions, migrate.ConditionMigrated)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == migrate.ReasonAlreadyMigrated
	})
	t.Logf("another source named after the migration: %s", meta.FindStatusCondition(again.Status.Conditions, migrate.ConditionMigrated).Message)
	e.waitEvent(name, corev1.EventTypeWarning, migrate.ReasonAlreadyMigrated)
	time.Sleep(time.Second) // what a second reconcile would do
	again = e.entry(name)
	if m := again.Status.Migration; m.Step != migrate.StepDone || !m.ResumedAt.Equal(st.ResumedAt) || m.Copied != st.Copied {
		t.Errorf("a migrated entry migrated again: %+v, was %+v", m, st)
	}
	if got := sums(t, e.store, be.Status.Prefix); !maps.Equal(got, prefixBefore) {
		t.Errorf("the prefix changed after another source was named: %d objects, were %d; differing %v", len(got), len(prefixBefore), diffKeys(got, prefixBefore))
	}
	if got := sums(t, otherBucket, ""); len(got) != 1 {
		t.Errorf("the other legacy bucket holds %d objects, want its 1", len(got))
	}
	if d2, err := e.k.Client.AppsV1().Deployments(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}); err != nil ||
		*d2.Spec.Replicas != 1 || d2.Spec.Template.Annotations[api.BackupLocationAnnotation] != location {
		t.Errorf("the writer after another source was named: %v, %v; want 1 replica at %s", d2, err, location)
	}
	rules := rbactest.Rules(t, "deploy/rbac.yaml", map[string]string{"backup-entry": e.k.Namespace, "default": "default"})
	rbactest.Check(t, rules, requests.Requests(), map[string]string{
		"patch events.events.k8s.io":                            "the event recorder patches an event that repeats (a series)",
		"create backupbuckets.backup.examples.groundskeeper.io": "two entries in a pool of 3: the pool does not grow (TestPoolGrows)",
		"delete backupbuckets.backup.examples.groundskeeper.io": "no bucket the pool created empties (TestPoolGrows)",
		"get backupentries.backup.examples.groundskeeper.io":    "the fresh read before an entry's prefix is deleted (TestSharedBucketOnMinIO): no entry is deleted here",
	})
}

func diffKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	if len(out) > 10 {
		out = append(out[:10], "…")
	}
	return out
}
