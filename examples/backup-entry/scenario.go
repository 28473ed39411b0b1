package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// The scenario: one controller, shared buckets in memory (mem://) and a
// simulated clock. The first act is one bucket with room for three
// entries; the second a pool (--quota aws=2) that grows, entries owned by
// Shoots, and a migration from a legacy bucket. A small in-memory API
// server keeps the objects with Kubernetes' finalizer semantics (a
// deleted object with finalizers only gets a deletion timestamp),
// resourceVersion conflicts and the garbage collector's owner references;
// a tiny event loop plays the informers and the workqueue, and the
// ReplicaSet controller of the migration's writer. It is the demo's
// stand-in only: the e2e tests run the same controller against a real API
// server, MinIO and Azurite.
const (
	scenarioGrace = 3 * retention.Day
	errorRetry    = 30 * time.Second
)

var (
	scenarioStart = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	scenarioQuota = pool.Limits{"aws": 2}
	// The migration's writer: a Deployment of the fake API server, and
	// its one pod.
	writerKey = types.NamespacedName{Namespace: "shoot--prod--omega", Name: "etcd-main"}
)

type sim struct {
	out  io.Writer
	clk  *clocktesting.FakeClock
	ctrl share.Reconciler[*api.BackupEntry, *api.BackupBucket]
	// The buckets of the stores, by URL.
	stores map[string]*blob.Bucket
	// The API server's objects and its resourceVersion counter.
	entries map[string]*api.BackupEntry
	buckets map[string]*api.BackupBucket
	shoots  map[string]*api.Shoot
	rv      int
	// The writer Deployment and its pods live in a fake client.
	writers client.Client
	// The workqueue: key → when it is due.
	queue map[string]time.Time
}

func runScenario(out io.Writer) error {
	ctx := context.Background()
	s := &sim{
		out:     out,
		clk:     clocktesting.NewFakeClock(scenarioStart),
		stores:  map[string]*blob.Bucket{},
		entries: map[string]*api.BackupEntry{},
		buckets: map[string]*api.BackupBucket{},
		shoots:  map[string]*api.Shoot{},
		queue:   map[string]time.Time{},
	}
	defer func() {
		for _, b := range s.stores {
			b.Close()
		}
	}()
	one := int32(1)
	labels := map[string]string{"app": "etcd-main"}
	s.writers = fake.NewClientBuilder().WithObjects(&appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: writerKey.Namespace, Name: writerKey.Name},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}},
	}, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: writerKey.Namespace, Name: "etcd-main-0", Labels: labels}}).Build()
	var err error
	s.ctrl, err = newController(deps{
		entries: simEntries{s}, buckets: simBuckets{s}, events: simEvents{s}, clk: s.clk,
		secrets: backupstore.SecretsFrom(nil), // mem:// buckets: no Secret is read
		createBucket: func(_ context.Context, b *api.BackupBucket) error {
			if _, ok := s.buckets[b.Name]; ok {
				return apierrors.NewAlreadyExists(bucketsGR, b.Name)
			}
			s.say("  API: BackupBucket %s (%s) created by the controller: the pool %s is full", b.Name, b.Spec.URL, b.Spec.Pool())
			s.createBucket(b)
			return nil
		},
		liveEntries: func(ctx context.Context) ([]*api.BackupEntry, error) { return simEntries{s}.List(ctx, "") },
		liveBuckets: func(ctx context.Context) ([]*api.BackupBucket, error) { return simBuckets{s}.List(ctx, "") },
		open: func(ctx context.Context, url string, _ *backupstore.Credentials) (*blob.Bucket, func() error, error) {
			b, err := s.store(ctx, url)
			return b, func() error { return nil }, err
		},
		writers: backups.DeploymentWriter{Client: s.writers, Reader: s.writers,
			PausedAnnotation: api.PausedReplicasAnnotation, LocationAnnotation: api.BackupLocationAnnotation},
	}, controllerOptions{grace: scenarioGrace, quota: scenarioQuota, installation: "scenario"})
	if err != nil {
		return err
	}
	if err := s.firstAct(ctx); err != nil {
		return err
	}
	if err := s.secondAct(ctx); err != nil {
		return err
	}
	s.say("end: in the API")
	for _, name := range sortedKeys(s.buckets) {
		b := s.buckets[name]
		fmt.Fprintf(out, "        BackupBucket %s: %d entries, %d admitted, claims %v, deleting=%t\n", name, b.Status.Entries, b.Status.Admitted, b.Status.Claims, b.DeletionTimestamp != nil)
	}
	for _, name := range sortedKeys(s.entries) {
		e := s.entries[name]
		fmt.Fprintf(out, "        BackupEntry %s: bucket %s, prefix %q, finalizers %v\n", name, e.Spec.BucketName, e.Status.Prefix, e.Finalizers)
	}
	return nil
}

// store is the in-memory bucket of url, opened once.
func (s *sim) store(ctx context.Context, url string) (*blob.Bucket, error) {
	if b, ok := s.stores[url]; ok {
		return b, nil
	}
	b, err := backupstore.OpenBucket(ctx, "mem://", nil) // its prefix known: DeletePrefix takes ""
	if err != nil {
		return nil, err
	}
	s.stores[url] = b
	return b, nil
}

// firstAct: one shared bucket with room for three entries, entries
// created and deleted by hand.
func (s *sim) firstAct(ctx context.Context) error {
	fmt.Fprintf(s.out, "Simulated timeline from %s UTC. Deletion grace period %s.\n\n", scenarioStart.Format(time.DateTime), retention.Format(scenarioGrace))
	clusters := []struct{ project, name, uid string }{
		{"dev", "alpha", "1a2b3c4d"}, {"dev", "beta", "5e6f7a8b"}, {"prod", "gamma", "9c0d1e2f"}, {"dev", "delta", "3a4b5c6d"},
	}
	entryName := func(i int) string {
		c := clusters[i]
		return fmt.Sprintf("shoot--%s--%s--%s", c.project, c.name, c.uid[:5])
	}

	s.say("the administrator creates BackupBucket shared-eu1 (mem://, spec.maxEntries 3)")
	s.createBucket(&api.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: "shared-eu1"},
		Spec: api.BackupBucketSpec{URL: "mem://", MaxEntries: 3}})
	for i := range 3 {
		s.say("Gardener creates BackupEntry %s for cluster %s/%s", entryName(i), clusters[i].project, clusters[i].name)
		s.createEntry(&api.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: entryName(i)},
			Spec: api.BackupEntrySpec{BucketName: "shared-eu1", ShootUID: clusters[i].uid}})
	}
	s.runUntil(ctx, time.Minute)

	s.runUntil(ctx, time.Hour)
	s.say("each cluster's etcd backup sidecar writes under its entry's prefix")
	store, err := s.store(ctx, "mem://")
	if err != nil {
		return err
	}
	for i := range 3 {
		e := s.entries[entryName(i)]
		for _, k := range []string{"v2/Full-00000000-00001000-1767322800", "v2/Incr-00001001-00001100-1767326400"} {
			if err := store.WriteAll(ctx, e.Status.Prefix+k, []byte(strings.Repeat("x", 1024)), nil); err != nil {
				return err
			}
		}
	}
	s.listStore(ctx, "mem://")

	s.runUntil(ctx, 2*time.Hour)
	s.say("Gardener creates BackupEntry %s: the bucket already holds 3 entries", entryName(3))
	s.createEntry(&api.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: entryName(3)},
		Spec: api.BackupEntrySpec{BucketName: "shared-eu1", ShootUID: clusters[3].uid}})
	s.runUntil(ctx, 2*time.Hour+time.Minute)

	s.runUntil(ctx, retention.Day)
	s.say("cluster dev/alpha is deleted; so is its BackupEntry")
	s.deleteEntry(entryName(0))
	s.runUntil(ctx, retention.Day+time.Minute)

	s.runUntil(ctx, retention.Day+time.Hour)
	s.say("cluster prod/gamma is deleted, its BackupEntry annotated %s=true", api.ForceDeletionAnnotation)
	s.entries[entryName(2)].Annotations = map[string]string{api.ForceDeletionAnnotation: "true"}
	s.deleteEntry(entryName(2))
	s.runUntil(ctx, retention.Day+time.Hour+time.Minute)
	s.listStore(ctx, "mem://")

	s.runUntil(ctx, 2*retention.Day)
	s.say("the administrator deletes BackupBucket shared-eu1")
	s.deleteBucket("shared-eu1")
	s.runUntil(ctx, 2*retention.Day+time.Minute)

	s.runUntil(ctx, 5*retention.Day)
	s.listStore(ctx, "mem://")
	return nil
}

// secondAct: a pool of buckets with room for two entries each (--quota
// aws=2), five Shoots whose entries name no bucket, one of them migrating
// from its legacy bucket; a Shoot deleted, and its entry with it.
func (s *sim) secondAct(ctx context.Context) error {
	const day5 = 5 * retention.Day
	s.say("the controller runs with --quota=%s; the administrator creates BackupBucket aws-eu-west-1 (mem://aws-eu-west-1, provider aws, region eu-west-1), the pool's first", scenarioQuota)
	s.createBucket(&api.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: "aws-eu-west-1"},
		Spec: api.BackupBucketSpec{URL: "mem://aws-eu-west-1", Provider: "aws", Region: "eu-west-1"}})
	legacy, err := s.store(ctx, "mem://legacy-omega")
	if err != nil {
		return err
	}
	for _, k := range []string{"v2/Full-00000000-00003000-1767236400", "v2/Incr-00003001-00003050-1767240000", "v2/Incr-00003051-00003100-1767243600"} {
		if err := legacy.WriteAll(ctx, k, []byte(strings.Repeat("o", 512)), nil); err != nil {
			return err
		}
	}
	shoots := []struct{ project, name, uid string }{
		{"dev", "kappa", "6b7c8d9e"}, {"dev", "lambda", "0f1a2b3c"}, {"prod", "mu", "4d5e6f7a"}, {"prod", "nu", "8b9c0d1e"}, {"prod", "omega", "2f3a4b5c"},
	}
	for i, sh := range shoots {
		shoot := &api.Shoot{ObjectMeta: metav1.ObjectMeta{Name: sh.project + "--" + sh.name, UID: types.UID(sh.uid)}, Spec: api.ShootSpec{Provider: "aws", Region: "eu-west-1"}}
		s.shoots[shoot.Name] = shoot
		e := &api.BackupEntry{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("shoot--%s--%s--%s", sh.project, sh.name, sh.uid[:5]),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: api.GroupVersion.String(), Kind: "Shoot", Name: shoot.Name, UID: shoot.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}}},
			Spec: api.BackupEntrySpec{Provider: "aws", Region: "eu-west-1", ShootUID: sh.uid}}
		if i < len(shoots)-1 {
			s.say("Gardener creates Shoot %s and its BackupEntry %s (provider aws, region eu-west-1, no bucket; owner Shoot %s)", shoot.Name, e.Name, shoot.Name)
		} else {
			e.Spec.MigrateFrom = &api.LegacyBucket{URL: "mem://legacy-omega", Writer: api.WriterReference{Namespace: writerKey.Namespace, Name: writerKey.Name}}
			s.say("Gardener creates Shoot %s and its BackupEntry %s, to migrate from its legacy bucket mem://legacy-omega (3 objects), written by Deployment %s", shoot.Name, e.Name, writerKey)
		}
		s.createEntry(e)
	}
	s.runUntil(ctx, day5+time.Hour)
	s.say("the pool:")
	for _, name := range sortedKeys(s.buckets) {
		if b := s.buckets[name]; b.Spec.Pool() != "" {
			fmt.Fprintf(s.out, "        BackupBucket %s (%s): claims %v\n", name, b.Spec.URL, b.Status.Claims)
		}
	}
	omega := "shoot--prod--omega--2f3a4"
	st := s.entries[omega].Status.Migration
	fmt.Fprintf(s.out, "        BackupEntry %s: status.migration step %s, %d copied, downtime %s; the legacy objects go at %s\n",
		omega, st.Step, st.Copied, st.Downtime(s.clk.Now()), elapsed(st.SwitchedAt.Add(scenarioGrace).Sub(scenarioStart)))
	s.listStore(ctx, s.buckets["aws-eu-west-1-2"].Spec.URL)

	s.runUntil(ctx, day5+2*time.Hour)
	s.say("Gardener deletes Shoot dev--kappa")
	s.deleteShoot("dev--kappa")
	s.runUntil(ctx, day5+2*time.Hour+time.Minute)

	s.runUntil(ctx, day5+4*retention.Day)
	s.listStore(ctx, "mem://legacy-omega")
	return nil
}

// say prints a line of the timeline at the simulated time.
func (s *sim) say(format string, args ...any) {
	d := s.clk.Now().Sub(scenarioStart)
	fmt.Fprintf(s.out, "%s  %s\n", elapsed(d), fmt.Sprintf(format, args...))
}

func elapsed(d time.Duration) string {
	days := d / retention.Day
	d -= days * retention.Day
	return fmt.Sprintf("+%dd%02dh%02dm", days, d/time.Hour, (d%time.Hour)/time.Minute)
}

func (s *sim) listStore(ctx context.Context, url string) {
	name := "the bucket"
	if url != "mem://" {
		name = url
	}
	s.say("%s holds:", name)
	b, err := s.store(ctx, url)
	if err != nil {
		fmt.Fprintf(s.out, "        open: %v\n", err)
		return
	}
	it := b.List(nil)
	for n := 0; ; n++ {
		o, err := it.Next(ctx)
		if err == io.EOF && n == 0 {
			fmt.Fprintln(s.out, "        nothing")
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintf(s.out, "        list: %v\n", err)
			return
		}
		if strings.HasSuffix(o.Key, "/migration-manifest.json") {
			// Its size varies: it holds the legacy objects' wall-clock
			// modification times.
			fmt.Fprintf(s.out, "        %s (the copy's manifest)\n", o.Key)
			continue
		}
		fmt.Fprintf(s.out, "        %s (%d bytes)\n", o.Key, o.Size)
	}
}

// runUntil plays the workqueue until the simulated clock reaches
// scenarioStart+until, stepping the clock to each requeue that falls due.
func (s *sim) runUntil(ctx context.Context, until time.Duration) {
	end := scenarioStart.Add(until)
	for {
		key, due := s.next()
		if key == "" || due.After(end) {
			break
		}
		if due.After(s.clk.Now()) {
			s.clk.SetTime(due)
		}
		delete(s.queue, key)
		s.playWriter(ctx)
		after, err := s.reconcile(ctx, key)
		switch {
		case err != nil:
			s.say("  reconcile %s failed: %v; retry in %s", key, err, errorRetry)
			s.add(key, errorRetry)
		case after > 0:
			s.add(key, after)
		}
	}
	if end.After(s.clk.Now()) {
		s.clk.SetTime(end)
	}
}

// playWriter plays the ReplicaSet controller and the pod of the
// migration's writer Deployment: scaled to 0, the pod writes a last
// backup to the legacy bucket and stops; scaled back up, a pod starts and
// writes where its template says.
func (s *sim) playWriter(ctx context.Context) {
	var d appsv1.Deployment
	var pods corev1.PodList
	if s.writers.Get(ctx, writerKey, &d) != nil || s.writers.List(ctx, &pods, client.InNamespace(writerKey.Namespace)) != nil {
		return
	}
	switch running := len(pods.Items) > 0; {
	case *d.Spec.Replicas == 0 && running:
		legacy, _ := s.store(ctx, "mem://legacy-omega")
		_ = legacy.WriteAll(ctx, "v2/Incr-00003101-00003120-1767675600", []byte(strings.Repeat("o", 512)), nil)
		_ = s.writers.Delete(ctx, &pods.Items[0])
		s.say("  the writer, scaled to 0, writes a last backup to the legacy bucket; its pod %s stops", pods.Items[0].Name)
	case *d.Spec.Replicas > 0 && !running && d.Spec.Template.Annotations[api.BackupLocationAnnotation] != "":
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: writerKey.Namespace, Name: "etcd-main-1", Labels: d.Spec.Selector.MatchLabels}}
		_ = s.writers.Create(ctx, pod)
		s.say("  the writer's pod %s starts, writing to %s", pod.Name, d.Spec.Template.Annotations[api.BackupLocationAnnotation])
	}
}

func entryKey(name string) string  { return "entry/" + name }
func bucketKey(name string) string { return "bucket/" + name }

// reconcile runs what the manager's controllers run for key (entryKey,
// bucketKey) on the object read from the simulated API server.
func (s *sim) reconcile(ctx context.Context, key string) (time.Duration, error) {
	kind, name, _ := strings.Cut(key, "/")
	if kind == "bucket" {
		b, ok := s.buckets[name]
		if !ok {
			return 0, nil
		}
		return s.ctrl.ReconcileBucket(ctx, b.DeepCopy())
	}
	e, ok := s.entries[name]
	if !ok {
		return 0, nil
	}
	return s.ctrl.ReconcileEntry(ctx, e.DeepCopy())
}

// next is the queued key due first (ties by name, for a stable order).
func (s *sim) next() (string, time.Time) {
	var key string
	var due time.Time
	for k, t := range s.queue {
		if key == "" || t.Before(due) || (t.Equal(due) && k < key) {
			key, due = k, t
		}
	}
	return key, due
}

// add queues key after d; a key already queued keeps the earlier time, as
// in a workqueue.
func (s *sim) add(key string, d time.Duration) {
	at := s.clk.Now().Add(d)
	if t, ok := s.queue[key]; !ok || at.Before(t) {
		s.queue[key] = at
	}
}

// The API server.

var (
	entriesGR = api.EntryResource.GroupResource()
	bucketsGR = api.BucketResource.GroupResource()
)

func (s *sim) bump(m *metav1.ObjectMeta) {
	s.rv++
	m.ResourceVersion = fmt.Sprint(s.rv)
}

// entryChanged queues what the manager's watches would: the entry, its
// bucket, and once the entry is gone, the entries waiting for a place in
// its bucket.
func (s *sim) entryChanged(e *api.BackupEntry) {
	s.add(entryKey(e.Name), 0)
	s.add(bucketKey(e.Spec.BucketName), 0)
	if b, ok := s.buckets[e.Spec.BucketName]; ok && s.entries[e.Name] == nil {
		s.queueWaiting(b)
	}
}

// bucketChanged queues what the manager's watches would: the bucket, and
// the entries waiting for a place in it if it has room.
func (s *sim) bucketChanged(b *api.BackupBucket) {
	s.add(bucketKey(b.Name), 0)
	s.queueWaiting(b)
}

func (s *sim) queueWaiting(b *api.BackupBucket) {
	waiting, _ := s.ctrl.Waiting(context.Background(), b)
	for _, e := range waiting {
		s.add(entryKey(e.Name), 0)
	}
}

func (s *sim) createBucket(b *api.BackupBucket) {
	b.UID = types.UID("uid-" + b.Name)
	b.CreationTimestamp = metav1.NewTime(s.clk.Now())
	s.bump(&b.ObjectMeta)
	s.buckets[b.Name] = b
	s.bucketChanged(b)
}

func (s *sim) createEntry(e *api.BackupEntry) {
	e.UID = types.UID("uid-" + e.Name)
	e.CreationTimestamp = metav1.NewTime(s.clk.Now())
	s.bump(&e.ObjectMeta)
	s.entries[e.Name] = e
	s.entryChanged(e)
}

func (s *sim) deleteEntry(name string) {
	e := s.entries[name]
	if len(e.Finalizers) == 0 {
		delete(s.entries, name)
		s.say("  API: BackupEntry %s removed", name)
	} else {
		now := metav1.NewTime(s.clk.Now())
		e.DeletionTimestamp = &now
		s.bump(&e.ObjectMeta)
	}
	s.entryChanged(e)
}

// deleteShoot deletes a Shoot, and plays the garbage collector: the
// entries it owns are deleted.
func (s *sim) deleteShoot(name string) {
	shoot := s.shoots[name]
	delete(s.shoots, name)
	for _, e := range s.entries {
		for _, ref := range e.OwnerReferences {
			if ref.UID == shoot.UID {
				s.say("  garbage collector: BackupEntry %s deleted, its owner Shoot %s is gone", e.Name, name)
				s.deleteEntry(e.Name)
			}
		}
	}
}

func (s *sim) deleteBucket(name string) {
	b := s.buckets[name]
	now := metav1.NewTime(s.clk.Now())
	b.DeletionTimestamp = &now
	s.bump(&b.ObjectMeta)
	s.bucketChanged(b)
}

func (s *sim) Entry(_ context.Context, name string) (*api.BackupEntry, error) {
	e, ok := s.entries[name]
	if !ok {
		return nil, apierrors.NewNotFound(entriesGR, name)
	}
	return e.DeepCopy(), nil
}

func (s *sim) GetEntry(_ context.Context, name string) (*api.BackupEntry, error) {
	return s.Entry(context.Background(), name)
}

func (s *sim) Entries(context.Context) ([]*api.BackupEntry, error) {
	var out []*api.BackupEntry
	for _, name := range sortedKeys(s.entries) {
		out = append(out, s.entries[name].DeepCopy())
	}
	return out, nil
}

func (s *sim) Bucket(_ context.Context, name string) (*api.BackupBucket, error) {
	b, ok := s.buckets[name]
	if !ok {
		return nil, apierrors.NewNotFound(bucketsGR, name)
	}
	return b.DeepCopy(), nil
}

func (s *sim) UpdateEntry(_ context.Context, e *api.BackupEntry) (*api.BackupEntry, error) {
	cur, ok := s.entries[e.Name]
	if !ok {
		return nil, apierrors.NewNotFound(entriesGR, e.Name)
	}
	if cur.ResourceVersion != e.ResourceVersion {
		return nil, apierrors.NewConflict(entriesGR, e.Name, fmt.Errorf("resourceVersion %s, stored %s", e.ResourceVersion, cur.ResourceVersion))
	}
	next := e.DeepCopy()
	next.Status = cur.Status // the status is written through its subresource only
	s.bump(&next.ObjectMeta)
	if next.DeletionTimestamp != nil && len(next.Finalizers) == 0 {
		delete(s.entries, e.Name)
		s.say("  API: BackupEntry %s removed (no finalizer left)", e.Name)
	} else {
		s.entries[e.Name] = next
	}
	s.entryChanged(next)
	return next.DeepCopy(), nil
}

func (s *sim) UpdateEntryStatus(_ context.Context, e *api.BackupEntry) (*api.BackupEntry, error) {
	cur, ok := s.entries[e.Name]
	if !ok {
		return nil, apierrors.NewNotFound(entriesGR, e.Name)
	}
	if cur.ResourceVersion != e.ResourceVersion {
		return nil, apierrors.NewConflict(entriesGR, e.Name, fmt.Errorf("resourceVersion %s, stored %s", e.ResourceVersion, cur.ResourceVersion))
	}
	next := cur.DeepCopy()
	next.Status = *e.Status.DeepCopy()
	s.bump(&next.ObjectMeta)
	s.entries[e.Name] = next
	// Only the entry's bucket: as crt/backups.Sharing, a change of the
	// status alone does not reconcile the entry.
	s.add(bucketKey(next.Spec.BucketName), 0)
	return next.DeepCopy(), nil
}

func (s *sim) UpdateBucket(_ context.Context, b *api.BackupBucket) (*api.BackupBucket, error) {
	cur, ok := s.buckets[b.Name]
	if !ok {
		return nil, apierrors.NewNotFound(bucketsGR, b.Name)
	}
	if cur.ResourceVersion != b.ResourceVersion {
		return nil, apierrors.NewConflict(bucketsGR, b.Name, fmt.Errorf("resourceVersion %s, stored %s", b.ResourceVersion, cur.ResourceVersion))
	}
	next := b.DeepCopy()
	next.Status = cur.Status
	s.bump(&next.ObjectMeta)
	if next.DeletionTimestamp != nil && len(next.Finalizers) == 0 {
		delete(s.buckets, b.Name)
		s.say("  API: BackupBucket %s removed (no finalizer left)", b.Name)
	} else {
		s.buckets[b.Name] = next
	}
	s.bucketChanged(next)
	return next.DeepCopy(), nil
}

func (s *sim) UpdateBucketStatus(_ context.Context, b *api.BackupBucket) (*api.BackupBucket, error) {
	cur, ok := s.buckets[b.Name]
	if !ok {
		return nil, apierrors.NewNotFound(bucketsGR, b.Name)
	}
	if cur.ResourceVersion != b.ResourceVersion {
		return nil, apierrors.NewConflict(bucketsGR, b.Name, fmt.Errorf("resourceVersion %s, stored %s", b.ResourceVersion, cur.ResourceVersion))
	}
	next := cur.DeepCopy()
	next.Status = *b.Status.DeepCopy()
	s.bump(&next.ObjectMeta)
	s.buckets[b.Name] = next
	s.bucketChanged(next)
	return next.DeepCopy(), nil
}

// simEntries and simBuckets are the simulated API server's objects as
// the controller reads and writes them; a write updates its argument, as
// a controller-runtime client's does.
type (
	simEntries struct{ s *sim }
	simBuckets struct{ s *sim }
)

func (o simEntries) List(ctx context.Context, _ string) ([]*api.BackupEntry, error) {
	return o.s.Entries(ctx)
}

func (o simEntries) Get(ctx context.Context, _, name string) (*api.BackupEntry, error) {
	return o.s.Entry(ctx, name)
}

func (o simEntries) Update(ctx context.Context, e *api.BackupEntry) error {
	return into(e)(o.s.UpdateEntry(ctx, e))
}

func (o simEntries) UpdateStatus(ctx context.Context, e *api.BackupEntry) error {
	return into(e)(o.s.UpdateEntryStatus(ctx, e))
}

func (simEntries) Delete(context.Context, string, string, types.UID, string) error {
	return errors.New("entries are deleted by Gardener, not by the controller")
}

func (o simBuckets) List(context.Context, string) ([]*api.BackupBucket, error) {
	var out []*api.BackupBucket
	for _, name := range sortedKeys(o.s.buckets) {
		out = append(out, o.s.buckets[name].DeepCopy())
	}
	return out, nil
}

func (o simBuckets) Get(ctx context.Context, _, name string) (*api.BackupBucket, error) {
	return o.s.Bucket(ctx, name)
}

func (o simBuckets) Update(ctx context.Context, b *api.BackupBucket) error {
	return into(b)(o.s.UpdateBucket(ctx, b))
}

func (o simBuckets) UpdateStatus(ctx context.Context, b *api.BackupBucket) error {
	return into(b)(o.s.UpdateBucketStatus(ctx, b))
}

func (simBuckets) Delete(context.Context, string, string, types.UID, string) error {
	return errors.New("buckets are deleted by the administrator, not by the controller")
}

// into copies a write's result into the object written.
func into[T any](dst *T) func(*T, error) error {
	return func(src *T, err error) error {
		if err == nil {
			*dst = *src
		}
		return err
	}
}

// simEvents prints the controller's events on the timeline.
type simEvents struct{ s *sim }

func (r simEvents) Event(obj runtime.Object, typ, reason, msg string) {
	kind, name := "BackupEntry", ""
	switch o := obj.(type) {
	case *api.BackupEntry:
		name = o.Name
	case *api.BackupBucket:
		kind, name = "BackupBucket", o.Name
	}
	r.s.say("  event %s %s %s %s: %s", typ, reason, kind, name, msg)
}

func (r simEvents) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	r.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func (r simEvents) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	r.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
