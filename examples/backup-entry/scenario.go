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
	"gocloud.dev/blob/memblob"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// The scenario: one controller, a shared bucket in memory (mem://) with
// room for three entries, and a simulated clock. A small in-memory API
// server keeps the objects with Kubernetes' finalizer semantics (a deleted
// object with finalizers only gets a deletion timestamp) and
// resourceVersion conflicts; a tiny event loop plays the informers and the
// workqueue. It is the demo's stand-in only: the e2e tests run the same
// controller against a real API server and MinIO.
const (
	scenarioGrace = 3 * retention.Day
	errorRetry    = 30 * time.Second
)

var scenarioStart = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

type sim struct {
	out   io.Writer
	clk   *clocktesting.FakeClock
	share *share.Share[*api.BackupEntry, *api.BackupBucket]
	store *blob.Bucket
	// The API server's objects and its resourceVersion counter.
	entries map[string]*api.BackupEntry
	buckets map[string]*api.BackupBucket
	rv      int
	// The workqueue: key → when it is due.
	queue map[string]time.Time
}

func runScenario(out io.Writer) error {
	ctx := context.Background()
	s := &sim{
		out:     out,
		clk:     clocktesting.NewFakeClock(scenarioStart),
		store:   memblob.OpenBucket(nil),
		entries: map[string]*api.BackupEntry{},
		buckets: map[string]*api.BackupBucket{},
		queue:   map[string]time.Time{},
	}
	defer s.store.Close()
	// The bucket is mem://: no Secret is read.
	cfg := entryConfig(simEntries{s}, simBuckets{s}, backupstore.SecretsFrom(nil), simEvents{s}, s.clk, scenarioGrace, false)
	cfg.Open = func(context.Context, string, *backupstore.Credentials) (*blob.Bucket, func() error, error) {
		return s.store, func() error { return nil }, nil
	}
	collector, err := collect.New(cfg)
	if err != nil {
		return err
	}
	if s.share, err = newShareWith(collector, simEntries{s}, simBuckets{s}, simEvents{s}, s.clk); err != nil {
		return err
	}

	fmt.Fprintf(out, "Simulated timeline from %s UTC. Deletion grace period %s.\n\n", scenarioStart.Format(time.DateTime), retention.Format(scenarioGrace))
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
	for i := range 3 {
		e := s.entries[entryName(i)]
		for _, k := range []string{"v2/Full-00000000-00001000-1767322800", "v2/Incr-00001001-00001100-1767326400"} {
			if err := s.store.WriteAll(ctx, e.Status.Prefix+k, []byte(strings.Repeat("x", 1024)), nil); err != nil {
				return err
			}
		}
	}
	s.listStore(ctx)

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
	s.listStore(ctx)

	s.runUntil(ctx, 2*retention.Day)
	s.say("the administrator deletes BackupBucket shared-eu1")
	s.deleteBucket("shared-eu1")
	s.runUntil(ctx, 2*retention.Day+time.Minute)

	s.runUntil(ctx, 5*retention.Day)
	s.listStore(ctx)
	s.say("end: in the API")
	for _, name := range sortedKeys(s.buckets) {
		b := s.buckets[name]
		fmt.Fprintf(out, "        BackupBucket %s: %d entries, %d admitted, deleting=%t\n", name, b.Status.Entries, b.Status.Admitted, b.DeletionTimestamp != nil)
	}
	for _, name := range sortedKeys(s.entries) {
		e := s.entries[name]
		fmt.Fprintf(out, "        BackupEntry %s: prefix %q, finalizers %v\n", name, e.Status.Prefix, e.Finalizers)
	}
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

func (s *sim) listStore(ctx context.Context) {
	s.say("the bucket holds:")
	it := s.store.List(nil)
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintf(s.out, "        list: %v\n", err)
			return
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
		return s.share.ReconcileBucket(ctx, b.DeepCopy())
	}
	e, ok := s.entries[name]
	if !ok {
		return 0, nil
	}
	return s.share.ReconcileEntry(ctx, e.DeepCopy())
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
	waiting, _ := s.share.Waiting(context.Background(), b)
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
	s.entryChanged(next)
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
