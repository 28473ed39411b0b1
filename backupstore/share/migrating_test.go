package share_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	// The test binary links gocloud's azblob and gs drivers (testenv):
	// backupstore wants its providers beside them.
	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
)

// migEntry is an entry with a prefix and a migration status.
type migEntry struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status struct {
		Prefix     string
		Migration  *share.MigrationStatus
		Conditions []metav1.Condition
	}
}

func (e *migEntry) DeepCopyObject() runtime.Object {
	c := *e
	c.ObjectMeta = *e.ObjectMeta.DeepCopy()
	c.Status.Migration = e.Status.Migration.DeepCopy()
	c.Status.Conditions = slices.Clone(e.Status.Conditions)
	return &c
}

// migStore keeps one entry with the API server's resourceVersion check on
// status writes, and counts them.
type migStore struct {
	e      *migEntry
	writes int
}

func (s *migStore) List(context.Context, string) ([]*migEntry, error) {
	return []*migEntry{s.e.DeepCopyObject().(*migEntry)}, nil
}
func (s *migStore) Get(context.Context, string, string) (*migEntry, error) {
	return s.e.DeepCopyObject().(*migEntry), nil
}
func (s *migStore) Update(context.Context, *migEntry) error { return errors.New("not used") }
func (s *migStore) UpdateStatus(_ context.Context, e *migEntry) error {
	if e.ResourceVersion != s.e.ResourceVersion {
		return apierrors.NewConflict(schema.GroupResource{Resource: "entries"}, e.Name, errors.New("stale"))
	}
	s.writes++
	e.ResourceVersion = strconv.Itoa(s.writes + 1)
	s.e = e.DeepCopyObject().(*migEntry)
	return nil
}
func (s *migStore) Delete(context.Context, string, string, types.UID, string) error {
	return errors.New("not used")
}

// placed is the Reconciler of an entry already placed and admitted, or
// not: Migrating's own work comes after it.
type placed struct {
	share.Reconciler[*migEntry, *migEntry]
}

func (placed) ReconcileEntry(context.Context, *migEntry) (time.Duration, error) { return 0, nil }

// migWorld is one entry migrating from a legacy bucket holding 3 objects
// into a shared one, both in memory, by a Migrating with a grace period of
// an hour on a fake clock.
type migWorld struct {
	ctx    context.Context
	clk    *clocktesting.FakeClock
	legacy *blob.Bucket
	shared *blob.Bucket
	store  *migStore
	m      *share.Migrating[*migEntry, *migEntry]
	events []string
	asked  int    // how often the entry's Source was asked
	source string // the entry's source: mem://legacy, or another
	// buckets are the buckets the collector opens, by URL.
	buckets map[string]*blob.Bucket
}

func newMigWorld(t *testing.T, r share.Reconciler[*migEntry, *migEntry], hooks func(*migWorld) share.MigrationHooks) *migWorld {
	t.Helper()
	w := &migWorld{ctx: context.Background(), clk: clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)), source: "mem://legacy"}
	ctx := w.ctx
	legacy, err := backupstore.OpenBucket(ctx, "mem://", nil) // its prefix known: DeletePrefix takes ""
	if err != nil {
		t.Fatal(err)
	}
	shared := memblob.OpenBucket(nil)
	t.Cleanup(func() { legacy.Close(); shared.Close() })
	w.legacy, w.shared = legacy, shared
	w.buckets = map[string]*blob.Bucket{"mem://legacy": legacy, "mem://shared": shared}
	for i := range 3 {
		if err := legacy.WriteAll(ctx, fmt.Sprintf("v2/Full-%d", i), []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	w.store = &migStore{e: &migEntry{ObjectMeta: metav1.ObjectMeta{Name: "shoot--a", ResourceVersion: "1"}}}
	// The collector opens the two buckets by URL.
	c, err := collect.New(collect.Config[*migEntry]{Objects: w.store, Finalizer: "f", Secrets: backupstore.SecretsFrom(nil),
		Location: func(context.Context, *migEntry) (collect.Location, error) {
			return collect.Location{URL: "mem://shared", Prefix: "shoot--a/"}, nil
		},
		Open: func(_ context.Context, url string, _ *backupstore.Credentials) (*blob.Bucket, func() error, error) {
			b := w.buckets[url]
			if b == nil {
				return nil, nil, fmt.Errorf("no bucket %s", url)
			}
			return b, func() error { return nil }, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	w.m, err = share.NewMigrating(share.MigratingConfig[*migEntry, *migEntry]{
		Reconciler: r, Entries: w.store, Collector: c, Clock: w.clk,
		Migration:  share.Migration{GracePeriod: time.Hour},
		Status:     func(e *migEntry) **share.MigrationStatus { return &e.Status.Migration },
		Prefix:     func(e *migEntry) string { return e.Status.Prefix },
		Conditions: func(e *migEntry) *[]metav1.Condition { return &e.Status.Conditions },
		Recorder: eventFunc(func(_ runtime.Object, typ, reason, msg string) {
			w.events = append(w.events, typ+" "+reason+": "+msg)
		}),
		Source: func(*migEntry) (collect.Location, bool) {
			w.asked++
			return collect.Location{URL: w.source}, true
		},
		Hooks: func(*migEntry) share.MigrationHooks { return hooks(w) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *migWorld) legacyObjects() int {
	n := 0
	for it := w.legacy.List(nil); ; n++ {
		if _, err := it.Next(w.ctx); err != nil {
			return n
		}
	}
}

func (w *migWorld) reconcile() (time.Duration, error) {
	return w.m.ReconcileEntry(w.ctx, w.store.e.DeepCopyObject().(*migEntry))
}

// Migrating runs one step per reconcile and records it before the next:
// nothing while the entry has no prefix; a failed pause is recorded
// (LastError, a Warning event once) and retried; the legacy bucket waits
// for its grace period without a status write; the downtime is reported;
// a migrated entry is never migrated again.
func TestMigratingRecordsEachStep(t *testing.T) {
	pauseFails := 1
	noop := func(context.Context) error { return nil }
	w := newMigWorld(t, placed{}, func(w *migWorld) share.MigrationHooks {
		return share.MigrationHooks{
			Pause: func(context.Context) error {
				if pauseFails > 0 {
					pauseFails--
					w.clk.Step(30 * time.Second) // the pod takes 30s to go
					return errors.New("1 pod left")
				}
				return nil
			},
			Switch: noop, Resume: noop,
			// DeleteLegacy nil: the legacy objects are deleted.
		}
	})
	ctx, clk, legacy, store, reconcile := w.ctx, w.clk, w.legacy, w.store, w.reconcile

	if after, err := reconcile(); err != nil || after != time.Second || store.writes != 0 {
		t.Fatalf("not admitted: %v, %v, %d writes, asked %d; want 1s, nil, none", after, err, store.writes, w.asked)
	}
	store.e.Status.Prefix = "shoot--a/"
	var steps []share.MigrationStep
	for range 20 {
		after, err := reconcile()
		st := store.e.Status.Migration
		if st == nil {
			t.Fatalf("no migration status after a step (err %v)", err)
		}
		steps = append(steps, st.Step)
		if st.Step == share.StepDone {
			break
		}
		if st.Step == share.StepDeleteLegacy && after > time.Millisecond {
			writes := store.writes
			if again, err := reconcile(); err != nil || again <= 0 || store.writes != writes {
				t.Fatalf("within the grace period: %v, %v, %d writes; want a wait and no write", again, err, store.writes-writes)
			}
			clk.Step(after)
		}
	}
	want := "Copy PauseWriter PauseWriter CopyRemaining Switch ResumeWriter DeleteLegacy DeleteLegacy Done"
	if got := fmt.Sprint(steps); got != "["+want+"]" {
		t.Errorf("steps %v, want [%s]", got, want)
	}
	st := store.e.Status.Migration
	left, err := legacy.List(nil).Next(ctx)
	deleted := err == io.EOF
	if !deleted || st.Copied != 3 || st.Downtime(clk.Now()) != 30*time.Second || st.LastError != "" {
		t.Errorf("legacy emptied %t (%v), status %+v, downtime %s; want emptied, 3 copied, 30s", deleted, left, st, st.Downtime(clk.Now()))
	}
	joined := strings.Join(w.events, "\n")
	for _, w := range []string{
		"Warning MigrationFailed: migration step PauseWriter: 1 pod left",
		"Normal MigrationStep: Copy done, next PauseWriter (3 objects copied, 0 not found)",
		"Normal MigrationStep: ResumeWriter done, next DeleteLegacy: the writer resumed after 30s of downtime",
		"Normal Migrated: migrated from mem://legacy/: 3 objects copied, 0 not found, downtime 30s",
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("no event %q in:\n%s", w, joined)
		}
	}
	// Migrated: a new reconcile changes nothing.
	writes := store.writes
	if after, err := reconcile(); err != nil || after != 0 || store.writes != writes {
		t.Errorf("a migrated entry: %v, %v, %d writes; want nothing done", after, err, store.writes-writes)
	}
}

// deleting is the Reconciler of an entry being deleted: it counts its
// calls and the entry's version it was given.
type deleting struct {
	share.Reconciler[*migEntry, *migEntry]
	calls    int
	versions []string
}

func (d *deleting) ReconcileEntry(_ context.Context, e *migEntry) (time.Duration, error) {
	d.calls++
	d.versions = append(d.versions, e.ResourceVersion)
	return time.Hour, nil // the deletion's grace period
}

// An entry deleted while its migration has the writer paused gets its
// writer back before the deletion goes on, and only once; a writer that
// cannot be resumed holds the deletion; nothing of the legacy bucket is
// deleted.
func TestDeletionDuringThePauseResumesTheWriter(t *testing.T) {
	r := &deleting{}
	resumes, resumeFails := 0, 1
	noop := func(context.Context) error { return nil }
	w := newMigWorld(t, r, func(*migWorld) share.MigrationHooks {
		return share.MigrationHooks{Pause: noop, Switch: noop, Resume: func(context.Context) error {
			if resumeFails > 0 {
				resumeFails--
				return errors.New("writer Deployment ns/etcd-backup: connection refused")
			}
			resumes++
			return nil
		}}
	})
	w.store.e.Status.Prefix = "shoot--a/"
	for w.store.e.Status.Migration == nil || w.store.e.Status.Migration.Step != share.StepCopyRemaining {
		if _, err := w.m.ReconcileEntry(w.ctx, w.store.e.DeepCopyObject().(*migEntry)); err != nil {
			t.Fatal(err)
		}
	}
	r.calls, r.versions = 0, nil
	w.clk.Step(10 * time.Second)
	now := metav1.NewTime(w.clk.Now())
	w.store.e.DeletionTimestamp = &now

	if _, err := w.reconcile(); err == nil || !strings.Contains(err.Error(), "connection refused") || r.calls != 0 {
		t.Fatalf("resume fails: err %v, the deletion went on %d times; want the error and no deletion", err, r.calls)
	}
	if after, err := w.reconcile(); err != nil || after != time.Hour || resumes != 1 || r.calls != 1 {
		t.Fatalf("resume works: %v, %v, %d resumes, %d deletion reconciles; want the deletion's 1h, nil, 1, 1", after, err, resumes, r.calls)
	}
	st := w.store.e.Status.Migration
	if st.ResumedAt == nil || st.Downtime(w.clk.Now()) != 10*time.Second || st.Step != share.StepCopyRemaining {
		t.Errorf("status after the deletion: %+v; want resumed after 10s at step CopyRemaining", st)
	}
	if r.versions[0] != w.store.e.ResourceVersion {
		t.Errorf("the deletion reconciled version %s, want %s, the one with the writer resumed", r.versions[0], w.store.e.ResourceVersion)
	}
	if _, err := w.reconcile(); err != nil || resumes != 1 || r.calls != 2 {
		t.Errorf("again: err %v, %d resumes; want no second resume", err, resumes)
	}
	if n := w.legacyObjects(); n != 3 {
		t.Errorf("the legacy bucket holds %d objects, want its 3", n)
	}
	joined := strings.Join(w.events, "\n")
	for _, want := range []string{
		"Warning MigrationFailed: the entry is being deleted during its migration's step CopyRemaining, and its writer could not be resumed: writer Deployment ns/etcd-backup: connection refused",
		"Normal MigrationAbandoned: migration abandoned at step CopyRemaining: the entry is being deleted; the writer resumed after 10s of downtime",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("no event %q in:\n%s", want, joined)
		}
	}
}

type eventFunc func(runtime.Object, string, string, string)

func (f eventFunc) Event(o runtime.Object, typ, reason, msg string) { f(o, typ, reason, msg) }
func (f eventFunc) Eventf(o runtime.Object, typ, reason, format string, args ...any) {
	f(o, typ, reason, fmt.Sprintf(format, args...))
}
func (f eventFunc) AnnotatedEventf(o runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	f(o, typ, reason, fmt.Sprintf(format, args...))
}

// A dry run keeps the legacy bucket once the grace period is over, and
// says what it would delete; without it, the same step deletes it.
func TestMigrationDryRunKeepsTheLegacyBucket(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	legacy, err := backupstore.OpenBucket(ctx, "mem://", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	shared := memblob.OpenBucket(nil)
	defer shared.Close()
	for i := range 3 {
		if err := legacy.WriteAll(ctx, fmt.Sprintf("v2/Full-%d", i), []byte("12345"), nil); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		n := 0
		it := legacy.List(nil)
		for {
			if _, err := it.Next(ctx); err != nil {
				return n
			}
			n++
		}
	}
	noop := func(context.Context) error { return nil }
	m := &share.Migration{
		Buckets: func(context.Context) (*blob.Bucket, *blob.Bucket, func(), error) {
			return legacy, shared, func() {}, nil
		},
		TargetPrefix: "shoot--a/", GracePeriod: time.Hour, Clock: clk, DryRun: true,
		Hooks: share.MigrationHooks{Pause: noop, Switch: noop, Resume: noop},
	}
	var st share.MigrationStatus
	for range 10 {
		if _, _, err := m.Next(ctx, &st); err != nil {
			t.Fatal(err)
		}
		if st.Step == share.StepDeleteLegacy {
			break
		}
	}
	clk.Step(time.Hour)
	done, after, err := m.Next(ctx, &st)
	want := "would delete 3 objects (15 bytes): every object of the legacy bucket"
	if done || after != time.Hour || err != nil || st.Step != share.StepDeleteLegacy || st.DryRun != want {
		t.Errorf("dry run: done %t, after %s, err %v, status %+v; want the step kept and %q", done, after, err, st, want)
	}
	if n := count(); n != 3 {
		t.Errorf("dry run: the legacy bucket holds %d objects, want 3", n)
	}
	m.DryRun = false
	if done, _, err := m.Next(ctx, &st); !done || err != nil || st.DryRun != "" || count() != 0 {
		t.Errorf("without a dry run: done %t, err %v, status %+v, %d legacy objects left", done, err, st, count())
	}
}

// contents is every key of b with its bytes.
func (w *migWorld) contents(t *testing.T, b *blob.Bucket) map[string]string {
	t.Helper()
	out := map[string]string{}
	for it := b.List(nil); ; {
		o, err := it.Next(w.ctx)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := b.ReadAll(w.ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[o.Key] = string(data)
	}
}

// migrated returns the entry's ConditionMigrated.
func (w *migWorld) migrated(t *testing.T) metav1.Condition {
	t.Helper()
	i := slices.IndexFunc(w.store.e.Status.Conditions, func(c metav1.Condition) bool { return c.Type == share.ConditionMigrated })
	if i < 0 {
		t.Fatalf("no condition %s in %+v", share.ConditionMigrated, w.store.e.Status.Conditions)
	}
	return w.store.e.Status.Conditions[i]
}

// The source is recorded at the first step, and the entry's spec naming
// another one changes nothing: mid-migration the migration waits
// (SourceChanged) until the spec names its source again; once migrated,
// the entry is not migrated again (AlreadyMigrated). Each is a condition
// and one Warning event, and no hook runs, no object is copied or deleted.
func TestMigratingRefusesAnotherSource(t *testing.T) {
	hooks := 0
	count := func(context.Context) error { hooks++; return nil }
	w := newMigWorld(t, placed{}, func(*migWorld) share.MigrationHooks {
		return share.MigrationHooks{Pause: count, Switch: count, Resume: count}
	})
	other, err := backupstore.OpenBucket(w.ctx, "mem://", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.WriteAll(w.ctx, "v2/Full-other", []byte("y"), nil); err != nil {
		t.Fatal(err)
	}
	w.buckets["mem://other"] = other
	w.store.e.Status.Prefix = "shoot--a/"
	step := func() {
		t.Helper()
		if _, err := w.reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	unchanged := func(what string, do func()) {
		t.Helper()
		legacy, shared, st, hooks0 := w.contents(t, w.legacy), w.contents(t, w.shared), *w.store.e.Status.Migration, hooks
		for range 3 {
			do()
		}
		if got := w.contents(t, w.legacy); !maps.Equal(got, legacy) {
			t.Errorf("%s: the legacy bucket changed: %v, was %v", what, got, legacy)
		}
		if got := w.contents(t, w.shared); !maps.Equal(got, shared) {
			t.Errorf("%s: the shared bucket changed: %v, was %v", what, got, shared)
		}
		if got := *w.store.e.Status.Migration; fmt.Sprint(got) != fmt.Sprint(st) {
			t.Errorf("%s: status.migration changed: %+v, was %+v", what, got, st)
		}
		if hooks != hooks0 {
			t.Errorf("%s: %d hooks ran", what, hooks-hooks0)
		}
	}

	step() // CreatePrefix
	step() // Copy
	if st := w.store.e.Status.Migration; st.Step != share.StepPauseWriter || st.Source != "mem://legacy/" {
		t.Fatalf("after the copy: %+v; want step PauseWriter, source mem://legacy/", st)
	}
	if c := w.migrated(t); c.Status != metav1.ConditionFalse || c.Reason != share.ReasonMigrationStep {
		t.Errorf("while migrating: %+v; want False, %s", c, share.ReasonMigrationStep)
	}

	w.source = "mem://other"
	unchanged("mid-migration", step)
	c := w.migrated(t)
	if c.Status != metav1.ConditionFalse || c.Reason != share.ReasonSourceChanged ||
		!strings.Contains(c.Message, "copies from mem://legacy/") || !strings.Contains(c.Message, "names mem://other/") {
		t.Errorf("source changed mid-migration: %+v; want False, %s, naming both sources", c, share.ReasonSourceChanged)
	}

	w.source = "mem://legacy"
	for range 10 {
		if w.store.e.Status.Migration.Step == share.StepDone {
			break
		}
		step()
		w.clk.Step(time.Hour) // the legacy bucket's grace period
	}
	if c := w.migrated(t); c.Status != metav1.ConditionTrue || c.Reason != share.ReasonMigrated {
		t.Fatalf("migrated: %+v; want True, %s", c, share.ReasonMigrated)
	}

	w.source = "mem://other"
	unchanged("migrated", step)
	c = w.migrated(t)
	if c.Status != metav1.ConditionTrue || c.Reason != share.ReasonAlreadyMigrated ||
		!strings.Contains(c.Message, "already migrated from mem://legacy/") || !strings.Contains(c.Message, "mem://other/") {
		t.Errorf("migrated, another source: %+v; want True, %s, naming both sources", c, share.ReasonAlreadyMigrated)
	}
	if got := w.contents(t, other); len(got) != 1 {
		t.Errorf("the other source changed: %v", got)
	}
	var warnings []string
	for _, e := range w.events {
		if strings.HasPrefix(e, "Warning ") {
			warnings = append(warnings, e)
		}
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], share.ReasonSourceChanged) || !strings.Contains(warnings[1], share.ReasonAlreadyMigrated) {
		t.Errorf("warnings %q; want one %s, one %s", warnings, share.ReasonSourceChanged, share.ReasonAlreadyMigrated)
	}
}
