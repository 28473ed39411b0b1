package share_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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
		Prefix    string
		Migration *share.MigrationStatus
	}
}

func (e *migEntry) DeepCopyObject() runtime.Object {
	c := *e
	c.ObjectMeta = *e.ObjectMeta.DeepCopy()
	c.Status.Migration = e.Status.Migration.DeepCopy()
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

// Migrating runs one step per reconcile and records it before the next:
// nothing while the entry has no prefix; a failed pause is recorded
// (LastError, a Warning event once) and retried; the legacy bucket waits
// for its grace period without a status write; the downtime is reported;
// a migrated entry is never migrated again.
func TestMigratingRecordsEachStep(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	legacy, err := backupstore.OpenBucket(ctx, "mem://", nil) // its prefix known: DeletePrefix takes ""
	if err != nil {
		t.Fatal(err)
	}
	shared := memblob.OpenBucket(nil)
	defer legacy.Close()
	defer shared.Close()
	for i := range 3 {
		if err := legacy.WriteAll(ctx, fmt.Sprintf("v2/Full-%d", i), []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	store := &migStore{e: &migEntry{ObjectMeta: metav1.ObjectMeta{Name: "shoot--a", ResourceVersion: "1"}}}
	pauseFails, asked := 1, 0
	var events []string
	// The collector opens the two buckets by URL.
	c, err := collect.New(collect.Config[*migEntry]{Objects: store, Finalizer: "f", Secrets: backupstore.SecretsFrom(nil),
		Location: func(context.Context, *migEntry) (collect.Location, error) {
			return collect.Location{URL: "mem://shared", Prefix: "shoot--a/"}, nil
		},
		Open: func(_ context.Context, url string, _ *backupstore.Credentials) (*blob.Bucket, func() error, error) {
			b := map[string]*blob.Bucket{"mem://legacy": legacy, "mem://shared": shared}[url]
			if b == nil {
				return nil, nil, fmt.Errorf("no bucket %s", url)
			}
			return b, func() error { return nil }, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := share.NewMigrating(share.MigratingConfig[*migEntry, *migEntry]{
		Reconciler: placed{}, Entries: store, Collector: c, Clock: clk,
		Migration: share.Migration{GracePeriod: time.Hour},
		Status:    func(e *migEntry) **share.MigrationStatus { return &e.Status.Migration },
		Prefix:    func(e *migEntry) string { return e.Status.Prefix },
		Recorder:  eventFunc(func(_ runtime.Object, typ, reason, msg string) { events = append(events, typ+" "+reason+": "+msg) }),
		Source: func(*migEntry) (collect.Location, bool) {
			asked++
			return collect.Location{URL: "mem://legacy"}, true
		},
		Hooks: func(*migEntry) share.MigrationHooks {
			return share.MigrationHooks{
				Pause: func(context.Context) error {
					if pauseFails > 0 {
						pauseFails--
						clk.Step(30 * time.Second) // the pod takes 30s to go
						return errors.New("1 pod left")
					}
					return nil
				},
				Switch: func(context.Context) error { return nil },
				Resume: func(context.Context) error { return nil },
				// DeleteLegacy nil: the legacy objects are deleted.
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reconcile := func() (time.Duration, error) { return m.ReconcileEntry(ctx, store.e.DeepCopyObject().(*migEntry)) }

	if after, err := reconcile(); err != nil || after != time.Second || store.writes != 0 {
		t.Fatalf("not admitted: %v, %v, %d writes, asked %d; want 1s, nil, none", after, err, store.writes, asked)
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
	joined := strings.Join(events, "\n")
	for _, w := range []string{
		"Warning MigrationFailed: migration step PauseWriter: 1 pod left",
		"Normal MigrationStep: Copy done, next PauseWriter (3 objects copied, 0 not found)",
		"Normal MigrationStep: ResumeWriter done, next DeleteLegacy: the writer resumed after 30s of downtime",
		"Normal Migrated: migrated: 3 objects copied, 0 not found, downtime 30s",
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("no event %q in:\n%s", w, joined)
		}
	}
	// Migrated: a new reconcile changes nothing, whatever the entry says.
	writes, asked0 := store.writes, asked
	if after, err := reconcile(); err != nil || after != 0 || store.writes != writes || asked != asked0 {
		t.Errorf("a migrated entry: %v, %v, %d writes, its source asked %d times; want nothing done", after, err, store.writes-writes, asked-asked0)
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
