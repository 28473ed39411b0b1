package migrate_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
	"github.com/groundskeeper-io/groundskeeper/internal/soak"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// sums reads every object under prefix: key (without prefix) -> sha256.
func sums(t *testing.T, b *blob.Bucket, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := b.ReadAll(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(o.Key, prefix)] = fmt.Sprintf("%x", sha256.Sum256(data))
	}
}

// migrationRun is one migration of a legacy bucket into a prefix of a
// shared bucket on MinIO, with a writer that adds objects to the legacy
// bucket until it is paused and to the new prefix once resumed.
type migrationRun struct {
	t              *testing.T
	legacy, shared *blob.Bucket
	clk            *clocktesting.FakeClock
	mu             sync.Mutex
	stop           chan struct{}
	stopped        chan struct{}
	switched       bool
	resumed        bool
	legacyDeleted  time.Time
	pauses         int
	writtenLegacy  int
}

const (
	migrationPrefix = "shoot--dev--alpha--1a2b3/"
	migrationGrace  = 72 * time.Hour
)

func newMigrationRun(t *testing.T, objects int) *migrationRun {
	ctx := context.Background()
	r := &migrationRun{t: t, legacy: testenv.S3(t).Open(t), shared: testenv.S3(t).Open(t),
		clk: clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)), stop: make(chan struct{}), stopped: make(chan struct{})}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range objects {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := r.legacy.WriteAll(ctx, fmt.Sprintf("v2/Full-%06d", i), fmt.Appendf(nil, "backup %d %s", i, strings.Repeat("x", i%512)), nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Another entry's prefix in the shared bucket: the migration must not
	// touch it.
	if err := r.shared.WriteAll(ctx, "shoot--dev--beta--5e6f7/v2/Full-000001", []byte("beta"), nil); err != nil {
		t.Fatal(err)
	}
	// The writer: adds to the legacy bucket until paused.
	t.Cleanup(func() {
		r.mu.Lock()
		select {
		case <-r.stop:
		default:
			close(r.stop)
		}
		r.mu.Unlock()
		<-r.stopped
	})
	go func() {
		defer close(r.stopped)
		for i := 0; ; i++ {
			select {
			case <-r.stop:
				return
			default:
			}
			if err := r.legacy.WriteAll(ctx, fmt.Sprintf("v2/Incr-%06d", i), fmt.Appendf(nil, "incr %d", i), nil); err != nil {
				select {
				case <-r.stop: // the test is over
				default:
					t.Error(err)
				}
				return
			}
			r.mu.Lock()
			r.writtenLegacy++
			r.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return r
}

func (r *migrationRun) migration() *migrate.Migration {
	return &migrate.Migration{
		Buckets: func(context.Context) (*blob.Bucket, *blob.Bucket, func(), error) {
			return r.legacy, r.shared, func() {}, nil
		},
		TargetPrefix: migrationPrefix, MarkerKey: "backup-entry.json", Marker: []byte(`{"migrated":true}`),
		GracePeriod: migrationGrace, Clock: r.clk,
		Hooks: migrate.Hooks{
			Pause: func(context.Context) error {
				r.mu.Lock()
				r.pauses++
				select {
				case <-r.stop:
				default:
					close(r.stop)
				}
				r.mu.Unlock()
				<-r.stopped
				return nil
			},
			Switch: func(context.Context) error {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.switched = true
				return nil
			},
			Resume: func(ctx context.Context) error {
				r.mu.Lock()
				defer r.mu.Unlock()
				if !r.switched {
					return errors.New("resumed before the switch")
				}
				r.resumed = true
				return nil
			},
			DeleteLegacy: func(ctx context.Context) error {
				if _, err := backupstore.DeletePrefix(ctx, r.legacy, "v2/", nil); err != nil {
					return err
				}
				r.mu.Lock()
				defer r.mu.Unlock()
				if r.legacyDeleted.IsZero() {
					r.legacyDeleted = r.clk.Now()
				}
				return nil
			},
		},
	}
}

// check verifies the end state: every legacy object as of the pause is in
// the new prefix byte for byte, the other prefix is untouched, the legacy
// data is gone after the grace period, the writer was paused and resumed.
func (r *migrationRun) check(st migrate.Status, legacyAtPause map[string]string) {
	t := r.t
	got := sums(t, r.shared, migrationPrefix)
	delete(got, "backup-entry.json")
	delete(got, "migration-manifest.json")
	if !maps.Equal(got, legacyAtPause) {
		missing, extra := 0, 0
		for k, v := range legacyAtPause {
			if got[k] != v {
				missing++
			}
		}
		for k := range got {
			if _, ok := legacyAtPause[k]; !ok {
				extra++
			}
		}
		t.Errorf("new prefix holds %d objects, legacy held %d: %d missing or different, %d extra", len(got), len(legacyAtPause), missing, extra)
	}
	if other := sums(t, r.shared, "shoot--dev--beta--5e6f7/"); len(other) != 1 {
		t.Errorf("the other prefix holds %v", other)
	}
	if left := sums(t, r.legacy, ""); len(left) != 0 {
		t.Errorf("legacy bucket still holds %d objects", len(left))
	}
	if r.legacyDeleted.Sub(st.SwitchedAt.Time) < migrationGrace {
		t.Errorf("legacy deleted at %s, switched at %s: before the grace period", r.legacyDeleted, st.SwitchedAt.Time)
	}
	if !r.resumed || st.PausedAt == nil || st.ResumedAt == nil {
		t.Errorf("writer not paused and resumed: %+v", st)
	}
	if st.Copied != len(legacyAtPause) {
		t.Errorf("status counts %d copied, legacy held %d", st.Copied, len(legacyAtPause))
	}
}

// 500 legacy objects (2,000 under make soak) and a writer that keeps
// adding until it is paused: afterwards every object is in the new prefix
// byte for byte, the other entry's prefix is untouched, the legacy data
// goes only after the grace period, and the downtime is reported.
func TestMigrationOfManyObjectsWithAWriter(t *testing.T) {
	t.Parallel()
	r := newMigrationRun(t, soak.Size(500, 2000))
	var atPause map[string]string
	st := r.driveRecording(&atPause)
	r.check(st, atPause)
	r.mu.Lock()
	t.Logf("legacy objects at the pause: %d (%d written by the writer); downtime %s on the fake clock", len(atPause), r.writtenLegacy, st.Downtime(r.clk.Now()))
	r.mu.Unlock()
	if r.writtenLegacy == 0 {
		t.Error("the writer wrote nothing before the pause")
	}
}

// driveRecording drives without a crash and records the legacy bucket's
// content right after the pause.
func (r *migrationRun) driveRecording(atPause *map[string]string) migrate.Status {
	ctx := context.Background()
	m := r.migration()
	var st migrate.Status
	for range 50 {
		prev := st.Step
		done, after, err := m.Next(ctx, &st)
		if err != nil {
			r.t.Fatalf("step %s: %v", prev, err)
		}
		if prev == migrate.StepPauseWriter {
			*atPause = sums(r.t, r.legacy, "")
		}
		if done {
			return st
		}
		r.clk.Step(after)
	}
	r.t.Fatalf("not done: %+v", st)
	return st
}

// A controller killed after each step, before the step's record is
// written, resumes and ends with the same result.
func TestMigrationResumesAfterACrashAtEachStep(t *testing.T) {
	t.Parallel()
	for _, step := range []migrate.Step{migrate.StepCreatePrefix, migrate.StepCopy, migrate.StepPauseWriter,
		migrate.StepCopyRemaining, migrate.StepSwitch, migrate.StepResumeWriter, migrate.StepDeleteLegacy} {
		t.Run(string(step), func(t *testing.T) {
			r := newMigrationRun(t, 100)
			var atPause map[string]string
			st := r.driveCrash(step, &atPause)
			r.check(st, atPause)
		})
	}
}

func (r *migrationRun) driveCrash(crashAt migrate.Step, atPause *map[string]string) migrate.Status {
	ctx := context.Background()
	m := r.migration()
	var st migrate.Status
	crashed := false
	for range 50 {
		saved := st
		done, after, err := m.Next(ctx, &st)
		if err != nil {
			r.t.Fatalf("step %s: %v", saved.Step, err)
		}
		if saved.Step == migrate.StepPauseWriter && st.Step != saved.Step && *atPause == nil {
			*atPause = sums(r.t, r.legacy, "")
		}
		if !crashed && saved.Step == crashAt && st.Step != saved.Step {
			crashed = true
			st = saved        // the status write is lost
			m = r.migration() // a new controller resumes
			continue
		}
		if done {
			return st
		}
		r.clk.Step(after)
	}
	r.t.Fatalf("not done: %+v", st)
	return st
}

// drive runs m's steps from st until it is done, a step fails, or
// maxSteps calls were made, stepping the clock over the grace period.
func drive(ctx context.Context, m *migrate.Migration, clk *clocktesting.FakeClock, st *migrate.Status, maxSteps int) (bool, error) {
	for range maxSteps {
		done, after, err := m.Next(ctx, st)
		if done || err != nil {
			return done, err
		}
		clk.Step(after)
	}
	return false, nil
}

// A whole legacy bucket is deleted only when the target holds everything
// in it: not when it holds the target itself (the shared bucket, through
// a handle the copy cannot tell apart from it: its other entry's data and
// the target stay, and nothing is copied at the deletion), and not when
// the copy's filters left objects out. Under a SourcePrefix, what the
// filters leave out goes, as asked.
func TestMigrationKeepsAWholeBucketThatHoldsWhatItDidNotCopy(t *testing.T) {
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	hooks := migrate.Hooks{Pause: noop, Switch: noop, Resume: noop}
	newMigration := func(legacy, shared *blob.Bucket, clk *clocktesting.FakeClock) *migrate.Migration {
		return &migrate.Migration{
			Buckets: func(context.Context) (*blob.Bucket, *blob.Bucket, func(), error) {
				return legacy, shared, func() {}, nil
			},
			TargetPrefix: "shoot--a/", MarkerKey: "backup-entry.json", Marker: []byte(`{}`),
			GracePeriod: time.Hour, Clock: clk, Hooks: hooks,
		}
	}
	list := func(b *blob.Bucket) map[string]string {
		t.Helper()
		out := sums(t, b, "")
		return out
	}

	t.Run("the shared bucket through another handle", func(t *testing.T) {
		dir := t.TempDir()
		legacy, err := backupstore.OpenBucket(ctx, "file://"+dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer legacy.Close()
		shared, err := fileblob.OpenBucket(dir, nil) // not OpenBucket's: the copy cannot tell it is the legacy bucket
		if err != nil {
			t.Fatal(err)
		}
		defer shared.Close()
		if err := shared.WriteAll(ctx, "shoot--b/v2/Full-1", []byte("another entry's"), nil); err != nil {
			t.Fatal(err)
		}
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
		m := newMigration(legacy, shared, clk)
		var st migrate.Status
		done, err := drive(ctx, m, clk, &st, 20)
		if done || !errors.Is(err, migrate.ErrLegacyNotCopied) || st.Step != migrate.StepDeleteLegacy || !strings.Contains(err.Error(), "shoot--a/") {
			t.Fatalf("done %t, %v, step %s; want DeleteLegacy refused with ErrLegacyNotCopied naming keys under shoot--a/", done, err, st.Step)
		}
		t.Log(err)
		before := list(legacy)
		if _, err := drive(ctx, m, clk, &st, 3); !errors.Is(err, migrate.ErrLegacyNotCopied) {
			t.Errorf("again: %v; want ErrLegacyNotCopied", err)
		}
		after := list(legacy)
		if !maps.Equal(after, before) {
			t.Errorf("the bucket changed at the refused deletion (a copy nesting the target in itself?): %v, was %v", after, before)
		}
		if _, ok := after["shoot--b/v2/Full-1"]; !ok {
			t.Errorf("the other entry's data is gone: %v", after)
		}
	})

	t.Run("filters", func(t *testing.T) {
		for _, tc := range []struct {
			name, sourcePrefix string
			deleted            bool
		}{
			{"whole bucket", "", false},
			{"under a prefix", "v2/", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				legacy, err := backupstore.OpenBucket(ctx, "mem://", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer legacy.Close()
				shared, err := backupstore.OpenBucket(ctx, "mem://", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer shared.Close()
				clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
				for i := range 5 {
					if err := legacy.WriteAll(ctx, fmt.Sprintf("v2/Full-%d", i), []byte("x"), nil); err != nil {
						t.Fatal(err)
					}
				}
				m := newMigration(legacy, shared, clk)
				m.SourcePrefix = tc.sourcePrefix
				m.Copy.MaxBackups = 2
				var st migrate.Status
				done, err := drive(ctx, m, clk, &st, 20)
				left := len(list(legacy))
				if tc.deleted {
					if !done || err != nil || left != 0 {
						t.Errorf("done %t, %v, %d objects left; want the prefix deleted, filters and all", done, err, left)
					}
					return
				}
				if done || !errors.Is(err, migrate.ErrLegacyNotCopied) || !strings.Contains(err.Error(), "filters leave 3 objects") || left != 5 {
					t.Errorf("done %t, %v, %d objects left; want ErrLegacyNotCopied for the 3 the filters left out, and all 5 kept", done, err, left)
				}
			})
		}
	})
}

// A writer the pause did not reach writes to the legacy bucket on MinIO
// through the switch and the grace period: StepDeleteLegacy deletes
// nothing while the target lacks its newest objects (the error names
// them), copies them, and once the writer stops deletes the legacy
// objects with every one of them in the new prefix, byte for byte.
func TestMigrationKeepsWhatAWriterWritesAfterTheSwitchOnMinIO(t *testing.T) {
	t.Parallel()
	r := newMigrationRun(t, 100)
	ctx := context.Background()
	m := r.migration()
	m.Hooks.Pause = func(context.Context) error { return nil } // the writer is not reached
	var st migrate.Status
	for st.Step != migrate.StepDeleteLegacy {
		if _, _, err := m.Next(ctx, &st); err != nil {
			t.Fatalf("step %s: %v", st.Step, err)
		}
	}
	r.clk.Step(migrationGrace)
	done, _, err := m.Next(ctx, &st)
	if done || !errors.Is(err, migrate.ErrLegacyNotCopied) || !strings.Contains(err.Error(), "v2/Incr-") {
		t.Fatalf("the writer writes on: done %t, %v; want ErrLegacyNotCopied naming its objects", done, err)
	}
	t.Log(err)
	r.mu.Lock()
	deleted := r.legacyDeleted
	r.mu.Unlock()
	if !deleted.IsZero() {
		t.Fatal("DeleteLegacy was called while the target lacked legacy objects")
	}
	// The writer stops (a person found it); what it wrote last is copied
	// at the next attempts, and only then is the legacy bucket deleted.
	r.mu.Lock()
	close(r.stop)
	r.mu.Unlock()
	<-r.stopped
	atEnd := sums(t, r.legacy, "")
	for range 3 {
		if done, _, err = m.Next(ctx, &st); done || !errors.Is(err, migrate.ErrLegacyNotCopied) {
			break
		}
	}
	if !done || err != nil {
		t.Fatalf("after the writer stopped: done %t, %v", done, err)
	}
	r.check(st, atEnd)
	r.mu.Lock()
	t.Logf("%d legacy objects migrated, %d of them written by the writer", len(atEnd), r.writtenLegacy)
	r.mu.Unlock()
}

// StepCreatePrefix never replaces a marker, on each store (file://,
// MinIO): the admission's owner marker at the same key (MarkerKey is the
// Share's) is kept as it is, content and owner, and the step goes on; a
// marker that names another owner, or none, fails the step, naming the
// key and the owner, and stays; with no marker, the step writes one that
// names MarkerOwner; without MarkerOwner, one only where there is none.
func TestMigrationNeverReplacesAMarker(t *testing.T) {
	for _, store := range []struct {
		name string
		open func(testing.TB) *testenv.BlobStore
	}{{"file", testenv.File}, {"MinIO", testenv.S3}} {
		t.Run(store.name, func(t *testing.T) {
			ctx := context.Background()
			legacy, shared := store.open(t).Open(t), store.open(t).Open(t)
			const key = "ns.a/.groundskeeper-entry"
			noop := func(context.Context) error { return nil }
			for _, tc := range []struct {
				name         string
				owner        string // MarkerOwner
				before       string // the marker's owner before, "-" for none, "" for one without
				fails        bool
				wantOwner    string
				wantContents string
			}{
				{"the admission's marker", "uid-a", "uid-a", false, "uid-a", "admission"},
				{"another owner's", "uid-a", "uid-b", true, "uid-b", "admission"},
				{"a marker without an owner", "uid-a", "", true, "", "admission"},
				{"no marker", "uid-a", "-", false, "uid-a", "migration"},
				{"no marker, no MarkerOwner", "", "-", false, "", "migration"},
				{"without MarkerOwner, another owner's", "", "uid-b", true, "uid-b", "admission"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					if err := shared.Delete(ctx, key); err != nil && !strings.Contains(err.Error(), "not found") && !strings.Contains(err.Error(), "NotFound") {
						t.Fatal(err)
					}
					switch tc.before {
					case "-":
					case "":
						if err := shared.WriteAll(ctx, key, []byte("admission"), nil); err != nil {
							t.Fatal(err)
						}
					default:
						if err := backupstore.WriteMarker(ctx, shared, key, tc.before, []byte("admission")); err != nil {
							t.Fatal(err)
						}
					}
					m := &migrate.Migration{
						Buckets: func(context.Context) (*blob.Bucket, *blob.Bucket, func(), error) {
							return legacy, shared, func() {}, nil
						},
						TargetPrefix: "ns.a/", MarkerKey: ".groundskeeper-entry", Marker: []byte("migration"), MarkerOwner: tc.owner,
						Hooks: migrate.Hooks{Pause: noop, Switch: noop, Resume: noop},
					}
					st := &migrate.Status{}
					_, _, err := m.Next(ctx, st)
					if tc.fails {
						if err == nil || st.Step != migrate.StepCreatePrefix || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), fmt.Sprintf("owner %q", tc.before)) {
							t.Errorf("step: %v, next %s; want it failed naming %s and owner %q", err, st.Step, key, tc.before)
						}
					} else if err != nil || st.Step != migrate.StepCopy {
						t.Errorf("step: %v, next %s; want %s", err, st.Step, migrate.StepCopy)
					}
					owner, found, err := backupstore.MarkerOwner(ctx, shared, key)
					if err != nil {
						t.Fatal(err)
					}
					data, err := shared.ReadAll(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
					if !found || owner != tc.wantOwner || string(data) != tc.wantContents {
						t.Errorf("the marker names %q (found %t) and holds %q; want %q, %q", owner, found, data, tc.wantOwner, tc.wantContents)
					}
				})
			}
		})
	}
}

// A migration that is done (an entry already migrated) runs nothing and
// changes nothing; an unknown step and a Migration without its hooks are
// refused with ErrInvalidConfig.
func TestMigrationBadInput(t *testing.T) {
	ctx := context.Background()
	called := 0
	hook := func(context.Context) error { called++; return nil }
	m := &migrate.Migration{
		Buckets: func(context.Context) (*blob.Bucket, *blob.Bucket, func(), error) {
			called++
			return nil, nil, nil, errors.New("not opened")
		},
		TargetPrefix: "entry/",
		Hooks:        migrate.Hooks{Pause: hook, Switch: hook, Resume: hook, DeleteLegacy: hook},
	}
	st := migrate.Status{Step: migrate.StepDone}
	done, after, err := m.Next(ctx, &st)
	if !done || after != 0 || err != nil || called != 0 || st != (migrate.Status{Step: migrate.StepDone}) {
		t.Errorf("done migration: done %v, after %s, err %v, %d calls, status %+v", done, after, err, called, st)
	}
	st = migrate.Status{Step: "Teleport"}
	if _, _, err := m.Next(ctx, &st); !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "Teleport") {
		t.Errorf("unknown step: %v", err)
	}
	m.Hooks.Pause = nil
	if _, _, err := m.Next(ctx, &migrate.Status{}); !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "Pause") {
		t.Errorf("no Pause hook: %v", err)
	}
	if called != 0 {
		t.Errorf("%d calls on refused input", called)
	}
}
