package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// migEntries keeps many entries by name, with the API server's
// resourceVersion check on status writes.
type migEntries struct {
	byName map[string]*migEntry
	rv     int
}

func (s *migEntries) List(context.Context, string) ([]*migEntry, error) {
	var out []*migEntry
	for _, name := range slices.Sorted(maps.Keys(s.byName)) {
		out = append(out, s.byName[name].DeepCopyObject().(*migEntry))
	}
	return out, nil
}
func (s *migEntries) Get(_ context.Context, _, name string) (*migEntry, error) {
	e, ok := s.byName[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "entries"}, name)
	}
	return e.DeepCopyObject().(*migEntry), nil
}
func (s *migEntries) Update(context.Context, *migEntry) error { return errors.New("not used") }
func (s *migEntries) UpdateStatus(_ context.Context, e *migEntry) error {
	if e.ResourceVersion != s.byName[e.Name].ResourceVersion {
		return apierrors.NewConflict(schema.GroupResource{Resource: "entries"}, e.Name, errors.New("stale"))
	}
	s.rv++
	e.ResourceVersion = strconv.Itoa(s.rv)
	s.byName[e.Name] = e.DeepCopyObject().(*migEntry)
	return nil
}
func (s *migEntries) Delete(context.Context, string, string, types.UID, string) error {
	return errors.New("not used")
}

// Two entries migrate from one legacy bucket on MinIO, spelled two ways
// (another order of the URL's options), each into its own prefix of a
// shared bucket on MinIO. Entry a reaches StepDeleteLegacy while entry b,
// not admitted yet, has copied nothing: a's deletion is refused
// (ErrLegacyInUse, condition LegacyInUse naming b) and the legacy objects
// stay, until b's migration is past its copies; then a deletes them, and
// each prefix holds every legacy object. Entry c, which migrates from
// another prefix of the bucket and is never admitted, holds nothing.
func TestTwoEntriesMigratingFromOneLegacyBucketOnMinIO(t *testing.T) {
	ctx := context.Background()
	legacyStore, sharedStore := testenv.S3(t), testenv.S3(t)
	legacy, shared := legacyStore.Open(t), sharedStore.Open(t)
	// The same bucket, its options in another order: one bucket to the
	// store (backupstore.Overlap), two strings.
	base, query, _ := strings.Cut(legacyStore.URL, "?")
	opts := strings.Split(query, "&")
	slices.Reverse(opts)
	spellings := map[string]string{"a": legacyStore.URL, "b": base + "?" + strings.Join(opts, "&")}
	buckets := map[string]*blob.Bucket{spellings["a"]: legacy, spellings["b"]: legacy, sharedStore.URL: shared}
	for i := range 3 {
		if err := legacy.WriteAll(ctx, fmt.Sprintf("v2/Full-%d", i), fmt.Appendf(nil, "backup %d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	want := sums(t, legacy, "v2/")
	store := &migEntries{byName: map[string]*migEntry{}}
	for _, name := range []string{"a", "b", "c"} {
		store.rv++
		store.byName[name] = &migEntry{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: strconv.Itoa(store.rv)}}
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	var events []string
	c, err := collect.New(collect.Config[*migEntry]{Objects: store, Finalizer: &collect.Finalizer[*migEntry]{Name: "f"}, Secrets: secretsNotFound{},
		Location: func(_ context.Context, e *migEntry) (collect.Location, error) {
			return collect.Location{URL: sharedStore.URL, Prefix: e.Status.Prefix}, nil
		},
		Open: func(_ context.Context, url string, _ *backupstore.Credentials) (*blob.Bucket, func() error, error) {
			b := buckets[url]
			if b == nil {
				return nil, nil, fmt.Errorf("no bucket %s", url)
			}
			return b, func() error { return nil }, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context) error { return nil }
	m, err := migrate.New(migrate.Config[*migEntry, *migEntry]{
		Reconciler: placed{}, Entries: store, Collector: c, Clock: clk,
		Migration: migrate.Migration{GracePeriod: time.Hour},
		Status:    func(e *migEntry) **migrate.Status { return &e.Status.Migration },
		Prefix:    func(e *migEntry) string { return e.Status.Prefix },
		Recorder: eventFunc(func(o runtime.Object, typ, reason, msg string) {
			events = append(events, o.(*migEntry).Name+": "+typ+" "+reason+": "+msg)
		}),
		Source: func(e *migEntry) (collect.Location, bool) {
			if e.Name == "c" { // another prefix of the bucket: no overlap
				return collect.Location{URL: legacyStore.URL, Prefix: "v1/"}, true
			}
			return collect.Location{URL: spellings[e.Name], Prefix: "v2/"}, true
		},
		Hooks: func(*migEntry) migrate.Hooks {
			return migrate.Hooks{Pause: noop, Switch: noop, Resume: noop}
		},
		LiveBuckets: func(context.Context) ([]*migEntry, error) {
			return []*migEntry{bucketObject("shared", sharedStore.URL)}, nil
		},
		BucketURL:   func(b *migEntry) string { return b.Annotations["url"] },
		LiveEntries: func(ctx context.Context) ([]*migEntry, error) { return store.List(ctx, "") },
	})
	if err != nil {
		t.Fatal(err)
	}
	reconcile := func(name string) error {
		_, err := m.ReconcileEntry(ctx, store.byName[name].DeepCopyObject().(*migEntry))
		return err
	}
	step := func(name string) migrate.Step {
		if st := store.byName[name].Status.Migration; st != nil {
			return st.Step
		}
		return ""
	}
	// a is admitted and migrates up to its deletion; b is not admitted yet.
	store.byName["a"].Status.Prefix = "ns.a/"
	for step("a") != migrate.StepDeleteLegacy {
		if err := reconcile("a"); err != nil {
			t.Fatal(err)
		}
	}
	if err := reconcile("b"); err != nil || step("b") != "" {
		t.Fatalf("b, not admitted: %v, step %q; want it waiting", err, step("b"))
	}
	clk.Step(time.Hour)
	for range 2 {
		err := reconcile("a")
		st := store.byName["a"].Status.Migration
		if !errors.Is(err, migrate.ErrLegacyInUse) || st.Step != migrate.StepDeleteLegacy || !strings.Contains(st.LastError, "b (names "+collect.Location{URL: spellings["b"], Prefix: "v2/"}.Where()) {
			t.Fatalf("a's deletion while b has copied nothing: %v, step %s, lastError %q; want ErrLegacyInUse naming b", err, st.Step, st.LastError)
		}
		if strings.Contains(st.LastError, "c (") {
			t.Fatalf("a's deletion is held by c, whose source does not overlap a's: %s", st.LastError)
		}
		if got := sums(t, legacy, "v2/"); !maps.Equal(got, want) {
			t.Fatalf("the legacy bucket holds %v while b has not copied it; want %v", got, want)
		}
	}
	t.Log(store.byName["a"].Status.Migration.LastError)
	conds := store.byName["a"].Status.Conditions
	if i := slices.IndexFunc(conds, func(c metav1.Condition) bool { return c.Type == migrate.ConditionMigrated }); i < 0 ||
		conds[i].Status != metav1.ConditionFalse || conds[i].Reason != migrate.ReasonLegacyInUse {
		t.Errorf("a's conditions %+v; want Migrated False, %s", conds, migrate.ReasonLegacyInUse)
	}
	if !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "a: Warning "+migrate.ReasonLegacyInUse+": ") }) {
		t.Errorf("events %q; want a Warning %s for a", events, migrate.ReasonLegacyInUse)
	}
	// b is admitted and copies; a waits until b is past its copies.
	store.byName["b"].Status.Prefix = "ns.b/"
	for step("b") != migrate.StepDeleteLegacy {
		if step("b") != "" {
			if err := reconcile("a"); !errors.Is(err, migrate.ErrLegacyInUse) {
				t.Fatalf("a's deletion while b is at step %s: %v; want ErrLegacyInUse", step("b"), err)
			}
		}
		if err := reconcile("b"); err != nil {
			t.Fatal(err)
		}
	}
	if err := reconcile("a"); err != nil || step("a") != migrate.StepDone {
		t.Fatalf("a's deletion once b copied: %v, step %s; want Done", err, step("a"))
	}
	if got := sums(t, legacy, ""); len(got) != 0 {
		t.Errorf("the legacy bucket holds %v after a's deletion; want nothing", got)
	}
	clk.Step(time.Hour)
	if err := reconcile("b"); err != nil || step("b") != migrate.StepDone {
		t.Fatalf("b's deletion, a's done: %v, step %s; want Done", err, step("b"))
	}
	for _, prefix := range []string{"ns.a/", "ns.b/"} {
		got := sums(t, shared, prefix)
		delete(got, "migration-manifest.json")
		if !maps.Equal(got, want) {
			t.Errorf("%s holds %v; want every legacy object %v", prefix, got, want)
		}
	}
}

type secretsNotFound struct{}

func (secretsNotFound) GetSecret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}
