package migrate_test

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
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
)

// migEntry is an entry with a prefix and a migration status.
type migEntry struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status struct {
		Prefix     string
		Migration  *migrate.Status
		Conditions []metav1.Condition
	}
}

var _ collect.ConditionSetter = (*migEntry)(nil)

func (e *migEntry) GetConditions() []metav1.Condition  { return e.Status.Conditions }
func (e *migEntry) SetConditions(c []metav1.Condition) { e.Status.Conditions = c }

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
// not: Controller's own work comes after it.
type placed struct {
	share.Reconciler[*migEntry, *migEntry]
}

func (placed) ReconcileEntry(context.Context, *migEntry) (time.Duration, error) { return 0, nil }

// migWorld is one entry migrating from a legacy bucket holding 3 objects
// into a shared one, both in memory, by a Controller with a grace period of
// an hour on a fake clock.
type migWorld struct {
	ctx    context.Context
	clk    *clocktesting.FakeClock
	legacy *blob.Bucket
	shared *blob.Bucket
	store  *migStore
	m      *migrate.Controller[*migEntry, *migEntry]
	events []string
	asked  int    // how often the entry's Source was asked
	source string // the entry's source: mem://legacy, or another
	// buckets are the buckets the collector opens, by URL.
	buckets map[string]*blob.Bucket
	// bucketObjects are the bucket objects LiveBuckets lists, their URL
	// in the annotation "url": the shared bucket's.
	bucketObjects []*migEntry
}

// bucketObject is a bucket object of the store's bucket rawURL.
func bucketObject(name, rawURL string) *migEntry {
	return &migEntry{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"url": rawURL}}}
}

func newMigWorld(t *testing.T, r share.Reconciler[*migEntry, *migEntry], hooks func(*migWorld) migrate.Hooks, edits ...func(*migrate.Config[*migEntry, *migEntry])) *migWorld {
	t.Helper()
	w := &migWorld{ctx: context.Background(), clk: clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)), source: "mem://legacy"}
	ctx := w.ctx
	legacy, err := backupstore.OpenBucket(ctx, "mem://", nil) // its prefix known: DeletePrefix takes ""
	if err != nil {
		t.Fatal(err)
	}
	shared, err := backupstore.OpenBucket(ctx, "mem://", nil) // its prefix known too: a source that is it would be deleted
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { legacy.Close(); shared.Close() })
	w.legacy, w.shared = legacy, shared
	w.buckets = map[string]*blob.Bucket{"mem://legacy": legacy, "mem://shared": shared}
	w.bucketObjects = []*migEntry{bucketObject("shared", "mem://shared")}
	for i := range 3 {
		if err := legacy.WriteAll(ctx, fmt.Sprintf("v2/Full-%d", i), []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	w.store = &migStore{e: &migEntry{ObjectMeta: metav1.ObjectMeta{Name: "shoot--a", ResourceVersion: "1"}}}
	// The collector opens the two buckets by URL.
	c, err := collect.New(collect.Config[*migEntry]{Objects: w.store, Finalizer: &collect.Finalizer[*migEntry]{Name: "f"}, Secrets: backupstore.SecretsFrom(nil),
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
	cfg := migrate.Config[*migEntry, *migEntry]{
		Reconciler: r, Entries: w.store, Collector: c, Clock: w.clk,
		Migration: migrate.Migration{GracePeriod: time.Hour},
		Status:    func(e *migEntry) **migrate.Status { return &e.Status.Migration },
		Prefix:    func(e *migEntry) string { return e.Status.Prefix },
		Recorder: eventFunc(func(_ runtime.Object, typ, reason, msg string) {
			w.events = append(w.events, typ+" "+reason+": "+msg)
		}),
		Source: func(*migEntry) (collect.Location, bool) {
			w.asked++
			return collect.Location{URL: w.source}, true
		},
		Hooks: func(*migEntry) migrate.Hooks { return hooks(w) },
		LiveBuckets: func(context.Context) ([]*migEntry, error) {
			return slices.Clone(w.bucketObjects), nil
		},
		BucketURL: func(b *migEntry) string { return b.Annotations["url"] },
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	w.m, err = migrate.New(cfg)
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

// Controller runs one step per reconcile and records it before the next:
// nothing while the entry has no prefix; a failed pause is recorded
// (LastError, a Warning event once) and retried; the legacy bucket waits
// for its grace period without a status write; the downtime is reported;
// a migrated entry is never migrated again.
func TestMigratingRecordsEachStep(t *testing.T) {
	pauseFails := 1
	noop := func(context.Context) error { return nil }
	w := newMigWorld(t, placed{}, func(w *migWorld) migrate.Hooks {
		return migrate.Hooks{
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
	var steps []migrate.Step
	for range 20 {
		after, err := reconcile()
		st := store.e.Status.Migration
		if st == nil {
			t.Fatalf("no migration status after a step (err %v)", err)
		}
		steps = append(steps, st.Step)
		if st.Step == migrate.StepDone {
			break
		}
		if st.Step == migrate.StepDeleteLegacy && after > time.Millisecond {
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
	w := newMigWorld(t, r, func(*migWorld) migrate.Hooks {
		return migrate.Hooks{Pause: noop, Switch: noop, Resume: func(context.Context) error {
			if resumeFails > 0 {
				resumeFails--
				return errors.New("writer Deployment ns/etcd-backup: connection refused")
			}
			resumes++
			return nil
		}}
	})
	w.store.e.Status.Prefix = "shoot--a/"
	for w.store.e.Status.Migration == nil || w.store.e.Status.Migration.Step != migrate.StepCopyRemaining {
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
	if st.ResumedAt == nil || st.Downtime(w.clk.Now()) != 10*time.Second || st.Step != migrate.StepCopyRemaining {
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
	m := &migrate.Migration{
		Buckets: func(context.Context) (*blob.Bucket, *blob.Bucket, func(), error) {
			return legacy, shared, func() {}, nil
		},
		TargetPrefix: "shoot--a/", GracePeriod: time.Hour, Clock: clk, DryRun: true,
		Hooks: migrate.Hooks{Pause: noop, Switch: noop, Resume: noop},
	}
	var st migrate.Status
	for range 10 {
		if _, _, err := m.Next(ctx, &st); err != nil {
			t.Fatal(err)
		}
		if st.Step == migrate.StepDeleteLegacy {
			break
		}
	}
	clk.Step(time.Hour)
	done, after, err := m.Next(ctx, &st)
	want := "would delete 3 objects (15 bytes): every object of the legacy bucket"
	if done || after != time.Hour || err != nil || st.Step != migrate.StepDeleteLegacy || st.DryRun != want {
		t.Errorf("dry run: done %t, after %s, err %v, status %+v; want the step kept and %q", done, after, err, st, want)
	}
	if n := count(); n != 3 {
		t.Errorf("dry run: the legacy bucket holds %d objects, want 3", n)
	}
	// A legacy object the target lacks: the report says that nothing
	// would go now, and the dry run copies nothing.
	if err := legacy.WriteAll(ctx, "v2/Incr-late", []byte("late"), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Next(ctx, &st); err != nil || !strings.HasPrefix(st.DryRun, "would delete nothing now: ") || !strings.Contains(st.DryRun, "v2/Incr-late") {
		t.Errorf("dry run, a late object: %v, report %q; want it to say nothing would go now, naming v2/Incr-late", err, st.DryRun)
	}
	if ok, err := shared.Exists(ctx, "shoot--a/v2/Incr-late"); ok || err != nil || count() != 4 {
		t.Errorf("dry run, a late object: copied %t (%v), %d legacy objects; want nothing copied, 4 kept", ok, err, count())
	}
	if err := legacy.Delete(ctx, "v2/Incr-late"); err != nil {
		t.Fatal(err)
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
	i := slices.IndexFunc(w.store.e.Status.Conditions, func(c metav1.Condition) bool { return c.Type == migrate.ConditionMigrated })
	if i < 0 {
		t.Fatalf("no condition %s in %+v", migrate.ConditionMigrated, w.store.e.Status.Conditions)
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
	w := newMigWorld(t, placed{}, func(*migWorld) migrate.Hooks {
		return migrate.Hooks{Pause: count, Switch: count, Resume: count}
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
	if st := w.store.e.Status.Migration; st.Step != migrate.StepPauseWriter || st.Source != "mem://legacy/" {
		t.Fatalf("after the copy: %+v; want step PauseWriter, source mem://legacy/", st)
	}
	if c := w.migrated(t); c.Status != metav1.ConditionFalse || c.Reason != migrate.ReasonMigrationStep {
		t.Errorf("while migrating: %+v; want False, %s", c, migrate.ReasonMigrationStep)
	}

	w.source = "mem://other"
	unchanged("mid-migration", step)
	c := w.migrated(t)
	if c.Status != metav1.ConditionFalse || c.Reason != migrate.ReasonSourceChanged ||
		!strings.Contains(c.Message, "copies from mem://legacy/") || !strings.Contains(c.Message, "names mem://other/") {
		t.Errorf("source changed mid-migration: %+v; want False, %s, naming both sources", c, migrate.ReasonSourceChanged)
	}

	w.source = "mem://legacy"
	for range 10 {
		if w.store.e.Status.Migration.Step == migrate.StepDone {
			break
		}
		step()
		w.clk.Step(time.Hour) // the legacy bucket's grace period
	}
	if c := w.migrated(t); c.Status != metav1.ConditionTrue || c.Reason != migrate.ReasonMigrated {
		t.Fatalf("migrated: %+v; want True, %s", c, migrate.ReasonMigrated)
	}

	w.source = "mem://other"
	unchanged("migrated", step)
	c = w.migrated(t)
	if c.Status != metav1.ConditionTrue || c.Reason != migrate.ReasonAlreadyMigrated ||
		!strings.Contains(c.Message, "already migrated from mem://legacy/") || !strings.Contains(c.Message, "mem://other/") {
		t.Errorf("migrated, another source: %+v; want True, %s, naming both sources", c, migrate.ReasonAlreadyMigrated)
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
	if len(warnings) != 2 || !strings.Contains(warnings[0], migrate.ReasonSourceChanged) || !strings.Contains(warnings[1], migrate.ReasonAlreadyMigrated) {
		t.Errorf("warnings %q; want one %s, one %s", warnings, migrate.ReasonSourceChanged, migrate.ReasonAlreadyMigrated)
	}
}

// counting are hooks that count their calls; deleteLegacy is the caller's
// own DeleteLegacy when set.
type counting struct {
	calls        int
	deleteLegacy func(context.Context) error
}

func (c *counting) hooks(*migWorld) migrate.Hooks {
	count := func(context.Context) error { c.calls++; return nil }
	h := migrate.Hooks{Pause: count, Switch: count, Resume: count}
	if c.deleteLegacy != nil {
		h.DeleteLegacy = func(ctx context.Context) error { c.calls++; return c.deleteLegacy(ctx) }
	}
	return h
}

// warnings are the Warning events recorded, each "reason: message".
func (w *migWorld) warnings() []string {
	var out []string
	for _, e := range w.events {
		if s, ok := strings.CutPrefix(e, "Warning "); ok {
			out = append(out, s)
		}
	}
	return out
}

// A source that is a shared bucket is never migrated from: the entry's
// own bucket spelled with a region (named by a bucket object or only by
// the entry's location), or another bucket object's, spelled with a
// trailing slash. Nothing is copied, nothing deleted, no hook
// runs, no step is recorded; the condition says SourceIsShared naming
// both, with one Warning event.
func TestMigratingRefusesASharedSource(t *testing.T) {
	for _, tc := range []struct {
		name, source, names string
		// unnamed: no bucket object names the entry's bucket.
		unnamed bool
	}{
		{"the entry's own bucket", "mem://shared?region=eu-west-1", "bucket shared (mem://shared)", false},
		{"the entry's own location, no bucket object's", "mem://shared?region=eu-west-1", "the entry's own location (mem://shared/shoot--a/)", true},
		{"another bucket object's", "mem://pool-2/", "bucket pool-2 (mem://pool-2)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &counting{}
			w := newMigWorld(t, placed{}, h.hooks)
			if tc.unnamed {
				w.bucketObjects = nil
			}
			pool2, err := backupstore.OpenBucket(w.ctx, "mem://", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer pool2.Close()
			// The store's view: each URL spelling opens its bucket.
			w.buckets["mem://pool-2"], w.buckets["mem://pool-2/"], w.buckets["mem://shared?region=eu-west-1"] = pool2, pool2, w.shared
			w.bucketObjects = append(w.bucketObjects, bucketObject("pool-2", "mem://pool-2"))
			for _, b := range []*blob.Bucket{w.shared, pool2} {
				if err := b.WriteAll(w.ctx, "shoot--b/v2/Full-1", []byte("another entry's"), nil); err != nil {
					t.Fatal(err)
				}
			}
			w.store.e.Status.Prefix = "shoot--a/"
			w.source = tc.source
			shared, other := w.contents(t, w.shared), w.contents(t, pool2)
			for range 12 { // every step, and the grace period's end
				if _, err := w.reconcile(); err != nil {
					t.Fatal(err)
				}
				w.clk.Step(time.Hour)
			}
			if got := w.contents(t, w.shared); !maps.Equal(got, shared) {
				t.Errorf("the shared bucket changed: %v, was %v", got, shared)
			}
			if got := w.contents(t, pool2); !maps.Equal(got, other) {
				t.Errorf("bucket pool-2 changed: %v, was %v", got, other)
			}
			if h.calls != 0 || w.store.e.Status.Migration != nil {
				t.Errorf("%d hook calls, status.migration %+v; want none", h.calls, w.store.e.Status.Migration)
			}
			c := w.migrated(t)
			where := collect.Location{URL: tc.source}.Where()
			if c.Status != metav1.ConditionFalse || c.Reason != migrate.ReasonSourceIsShared ||
				!strings.Contains(c.Message, "the source "+where) || !strings.Contains(c.Message, tc.names) {
				t.Errorf("condition %+v; want False, %s, naming %s and %s", c, migrate.ReasonSourceIsShared, where, tc.names)
			}
			t.Log(c.Message)
			if warnings := w.warnings(); len(warnings) != 1 || !strings.HasPrefix(warnings[0], migrate.ReasonSourceIsShared+": ") {
				t.Errorf("warnings %q; want one %s", warnings, migrate.ReasonSourceIsShared)
			}
		})
	}
}

// A source that becomes a shared bucket during the grace period (a bucket
// object made for the legacy bucket, spelled with a region) is refused
// again before StepDeleteLegacy: the legacy objects stay; once no bucket
// object names it, the deletion goes on.
func TestMigratingChecksTheSourceAgainBeforeDeletingIt(t *testing.T) {
	h := &counting{}
	w := newMigWorld(t, placed{}, h.hooks)
	w.store.e.Status.Prefix = "shoot--a/"
	for st := w.store.e.Status.Migration; st == nil || st.Step != migrate.StepDeleteLegacy; st = w.store.e.Status.Migration {
		if _, err := w.reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	w.bucketObjects = append(w.bucketObjects, bucketObject("adopted", "mem://legacy?region=eu-west-1"))
	w.clk.Step(time.Hour)
	legacy := w.contents(t, w.legacy)
	for range 3 {
		if _, err := w.reconcile(); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.contents(t, w.legacy); len(got) != 3 || !maps.Equal(got, legacy) {
		t.Errorf("the legacy bucket holds %v, was %v: deleted although a bucket object names it", got, legacy)
	}
	if st := w.store.e.Status.Migration; st.Step != migrate.StepDeleteLegacy {
		t.Errorf("step %s, want %s", st.Step, migrate.StepDeleteLegacy)
	}
	if c := w.migrated(t); c.Reason != migrate.ReasonSourceIsShared || !strings.Contains(c.Message, "bucket adopted (mem://legacy?region=eu-west-1)") {
		t.Errorf("condition %+v; want %s naming bucket adopted", c, migrate.ReasonSourceIsShared)
	}
	w.bucketObjects = w.bucketObjects[:1]
	if _, err := w.reconcile(); err != nil {
		t.Fatal(err)
	}
	if st := w.store.e.Status.Migration; st.Step != migrate.StepDone || w.legacyObjects() != 0 {
		t.Errorf("once no bucket object names the source: step %s, %d legacy objects; want Done, 0", st.Step, w.legacyObjects())
	}
	if c := w.migrated(t); c.Status != metav1.ConditionTrue || c.Reason != migrate.ReasonMigrated {
		t.Errorf("condition %+v; want True, %s", c, migrate.ReasonMigrated)
	}
}

// A writer the switch did not reach writes to the legacy bucket during
// the grace period: StepDeleteLegacy deletes nothing while the target
// lacks its objects (LastError and a Warning naming the key, condition
// LegacyNotCopied), copies them, and deletes at the next attempt once
// nothing is missing; a caller's own DeleteLegacy is held the same way.
func TestMigratingKeepsLegacyObjectsWrittenAfterTheSwitch(t *testing.T) {
	for _, hook := range []bool{false, true} {
		t.Run(map[bool]string{false: "default deletion", true: "the caller's DeleteLegacy"}[hook], func(t *testing.T) {
			h := &counting{}
			var w *migWorld
			if hook {
				h.deleteLegacy = func(ctx context.Context) error {
					_, err := backupstore.DeletePrefix(ctx, w.legacy, "", &backupstore.DeleteOptions{PrefixRules: backupstore.PrefixRules{AllowEmpty: true}})
					return err
				}
			}
			w = newMigWorld(t, placed{}, h.hooks)
			w.store.e.Status.Prefix = "shoot--a/"
			for st := w.store.e.Status.Migration; st == nil || st.Step != migrate.StepDeleteLegacy; st = w.store.e.Status.Migration {
				if _, err := w.reconcile(); err != nil {
					t.Fatal(err)
				}
			}
			hooks := h.calls
			late := func(key string) {
				t.Helper()
				if err := w.legacy.WriteAll(w.ctx, key, []byte("the newest backup"), nil); err != nil {
					t.Fatal(err)
				}
			}
			late("v2/Incr-late-1")
			w.clk.Step(time.Hour)
			refused := func(key string) {
				t.Helper()
				_, err := w.reconcile()
				st := w.store.e.Status.Migration
				if !errors.Is(err, migrate.ErrLegacyNotCopied) || st.Step != migrate.StepDeleteLegacy || !strings.Contains(st.LastError, key) {
					t.Fatalf("a legacy object the target lacks: %v, step %s, lastError %q; want ErrLegacyNotCopied naming %s", err, st.Step, st.LastError, key)
				}
				if _, ok := w.contents(t, w.legacy)[key]; !ok || w.legacyObjects() < 4 || h.calls != hooks {
					t.Fatalf("the legacy bucket holds %v, %d hook calls; want %s kept and no DeleteLegacy", w.contents(t, w.legacy), h.calls-hooks, key)
				}
				if c := w.migrated(t); c.Reason != migrate.ReasonLegacyNotCopied || !strings.Contains(c.Message, key) {
					t.Errorf("condition %+v; want %s naming %s", c, migrate.ReasonLegacyNotCopied, key)
				}
				if warnings := w.warnings(); len(warnings) == 0 || !strings.HasPrefix(warnings[len(warnings)-1], migrate.ReasonLegacyNotCopied+": ") ||
					!strings.Contains(warnings[len(warnings)-1], key) {
					t.Errorf("warnings %q; want the last a %s naming %s", warnings, migrate.ReasonLegacyNotCopied, key)
				}
			}
			refused("v2/Incr-late-1")
			t.Log(w.store.e.Status.Migration.LastError)
			// The writer still writes: the next attempt finds its newest.
			late("v2/Incr-late-2")
			refused("v2/Incr-late-2")
			if _, err := w.reconcile(); err != nil {
				t.Fatal(err)
			}
			st := w.store.e.Status.Migration
			if st.Step != migrate.StepDone || w.legacyObjects() != 0 || st.Copied != 5 {
				t.Errorf("once nothing is missing: %+v, %d legacy objects; want Done, none, 5 copied", st, w.legacyObjects())
			}
			got := w.contents(t, w.shared)
			for _, k := range []string{"v2/Full-0", "v2/Full-1", "v2/Full-2", "v2/Incr-late-1", "v2/Incr-late-2"} {
				if _, ok := got["shoot--a/"+k]; !ok {
					t.Errorf("the target lacks %s: %v", k, got)
				}
			}
		})
	}
}

// New refuses a config without the means to compare the source
// with the shared buckets, naming the field.
func TestNewMigratingNeedsTheBuckets(t *testing.T) {
	store := &migStore{e: &migEntry{}}
	c, err := collect.New(collect.Config[*migEntry]{Objects: store, Finalizer: &collect.Finalizer[*migEntry]{Name: "f"}, Secrets: backupstore.SecretsFrom(nil),
		Location: func(context.Context, *migEntry) (collect.Location, error) { return collect.Location{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	full := func() migrate.Config[*migEntry, *migEntry] {
		return migrate.Config[*migEntry, *migEntry]{
			Reconciler: placed{}, Entries: store, Collector: c,
			Status:      func(e *migEntry) **migrate.Status { return &e.Status.Migration },
			Prefix:      func(e *migEntry) string { return e.Status.Prefix },
			Source:      func(*migEntry) (collect.Location, bool) { return collect.Location{}, false },
			Hooks:       func(*migEntry) migrate.Hooks { return migrate.Hooks{} },
			LiveBuckets: func(context.Context) ([]*migEntry, error) { return nil, nil },
			BucketURL:   func(*migEntry) string { return "" },
		}
	}
	if _, err := migrate.New(full()); err != nil {
		t.Fatalf("a full config: %v", err)
	}
	for field, drop := range map[string]func(*migrate.Config[*migEntry, *migEntry]){
		"migrate.Config.LiveBuckets": func(c *migrate.Config[*migEntry, *migEntry]) { c.LiveBuckets = nil },
		"migrate.Config.BucketURL":   func(c *migrate.Config[*migEntry, *migEntry]) { c.BucketURL = nil },
	} {
		cfg := full()
		drop(&cfg)
		if _, err := migrate.New(cfg); !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("without %s: %v; want ErrInvalidConfig naming it", field, err)
		}
	}
}

// Under Controller, StepCreatePrefix writes its marker with the entry's UID
// as owner and never over the admission's: with the Migration's MarkerKey
// the Share's, the admission's marker (WriteMarker, the entry's UID) stays
// as it was, owner and content, and the migration goes on; a marker at
// that key that names another owner fails the step and stays.
func TestMigratingKeepsTheAdmissionsMarker(t *testing.T) {
	for _, tc := range []struct {
		name, owner string
		fails       bool
	}{{"the entry's", "uid-a", false}, {"another's", "uid-b", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := &counting{}
			w := newMigWorld(t, placed{}, h.hooks, func(cfg *migrate.Config[*migEntry, *migEntry]) {
				cfg.Migration.MarkerKey, cfg.Migration.Marker = ".groundskeeper-entry", []byte("migration")
			})
			w.store.e.UID = "uid-a"
			w.store.e.Status.Prefix = "shoot--a/"
			const key = "shoot--a/.groundskeeper-entry"
			if err := backupstore.WriteMarker(w.ctx, w.shared, key, tc.owner, []byte("admission")); err != nil {
				t.Fatal(err)
			}
			_, err := w.reconcile()
			st := w.store.e.Status.Migration
			if tc.fails {
				if err == nil || st.Step != migrate.StepCreatePrefix || !strings.Contains(st.LastError, `names owner "uid-b", not "uid-a"`) {
					t.Errorf("a marker of another owner: %v, status %+v; want the step failed, naming both", err, st)
				}
			} else if err != nil || st.Step != migrate.StepCopy {
				t.Errorf("the admission's marker: %v, status %+v; want step %s next", err, st, migrate.StepCopy)
			}
			owner, found, err := backupstore.MarkerOwner(w.ctx, w.shared, key)
			if err != nil {
				t.Fatal(err)
			}
			if data := w.contents(t, w.shared)[key]; !found || owner != tc.owner || data != "admission" {
				t.Errorf("the marker names %q and holds %q; want %q and the admission's content, as written", owner, data, tc.owner)
			}
		})
	}
}
