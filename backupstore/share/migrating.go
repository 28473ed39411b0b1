package share

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/internal/event"
)

// Event reasons of a Migrating.
const (
	// ReasonMigrationStep: a step of an entry's migration is done.
	ReasonMigrationStep = "MigrationStep"
	// ReasonMigrationFailed: a step failed; it is retried with backoff.
	ReasonMigrationFailed = "MigrationFailed"
	// ReasonMigrated: the migration is done.
	ReasonMigrated = "Migrated"
	// ReasonMigrationAbandoned: the entry is being deleted while its
	// migration had the writer paused; the writer was resumed.
	ReasonMigrationAbandoned = "MigrationAbandoned"
	// ReasonMigrationDryRun: what the deletion of the legacy bucket's
	// objects would delete (Migration.DryRun).
	ReasonMigrationDryRun = "MigrationDryRun"
)

// MigratingConfig says how the entries' migrations run in their
// reconcile (Migrating).
type MigratingConfig[E, B collect.Object] struct {
	// Reconciler places and admits the entries: a Share or a Pool.
	// Required.
	Reconciler Reconciler[E, B]
	// Entries writes an entry's status. Required.
	Entries collect.Objects[E]
	// Collector opens an entry's legacy bucket (Source, with its Secret:
	// collect.Collector.OpenLocation) and its shared bucket (its
	// Location: collect.Collector.OpenBucket). Required.
	Collector *collect.Collector[E]
	// Source is where entry e's legacy backups are, and SourcePrefix in
	// it; ok is false when e has nothing to migrate. Required.
	Source func(e E) (loc collect.Location, ok bool)
	// Hooks are the hooks of e's writer (crt/backups.DeploymentWriter).
	// Without a DeleteLegacy hook, a legacy location that is a whole
	// bucket (no prefix, no prefix= in its URL) is deleted with its data
	// (backupstore.DeleteBucket, after the data went through the opened
	// bucket); one under a prefix loses the objects under it.
	// Required.
	Hooks func(e E) MigrationHooks
	// Prefix is e's prefix, the migration's target; "" until e is
	// admitted. Required.
	Prefix func(e E) string
	// Status points at the entry's status field that records its
	// migration (nil before the first step). Required.
	Status func(E) **MigrationStatus
	// Migration is copied into each entry's migration: set GracePeriod,
	// a Marker, Copy options; Buckets, SourcePrefix, TargetPrefix and
	// Hooks are the entry's.
	Migration Migration
	// Wait is when an entry with a migration that is not admitted yet is
	// looked at again (an admission writes only the status, which does
	// not reconcile the entry again); default 1s.
	Wait time.Duration
	// Recorder records the steps, failures and the downtime; nil records
	// none.
	Recorder event.Recorder
	// Clock, default the real clock; also the migrations' clock.
	Clock clock.PassiveClock
}

// Migrating runs each admitted entry's Migration after its Reconciler,
// one step per reconcile, and records the step in the entry's status
// before the next one runs: a restarted controller resumes at the
// recorded step, and a failed step is retried (with the Reconciler's
// backoff) without repeating the completed ones. An entry whose recorded
// step is StepDone is not migrated again, whatever its spec says.
//
// The deletion of an entry ends its migration. When the migration had
// paused the writer and not resumed it, Migrating resumes it (Hooks.Resume)
// and records ResumedAt before the Reconciler goes on with the deletion,
// which waits until the writer is resumed: the writer runs on where it
// wrote last (the legacy location before StepSwitch, the new one after),
// and nothing of the legacy location is deleted, since that is a step
// after the switch. Everything else is the Reconciler's.
type Migrating[E, B collect.Object] struct {
	Reconciler[E, B]
	cfg MigratingConfig[E, B]
}

var _ Reconciler[collect.Object, collect.Object] = (*Migrating[collect.Object, collect.Object])(nil)

// NewMigrating checks cfg and returns its Migrating.
func NewMigrating[E, B collect.Object](cfg MigratingConfig[E, B]) (*Migrating[E, B], error) {
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"Reconciler", cfg.Reconciler != nil}, {"Entries", cfg.Entries != nil}, {"Collector", cfg.Collector != nil},
		{"Source", cfg.Source != nil}, {"Hooks", cfg.Hooks != nil}, {"Prefix", cfg.Prefix != nil}, {"Status", cfg.Status != nil},
	} {
		if !f.ok {
			return nil, fmt.Errorf("%w: share: MigratingConfig.%s is required", ErrInvalidConfig, f.name)
		}
	}
	if cfg.Wait <= 0 {
		cfg.Wait = time.Second
	}
	if cfg.Recorder == nil {
		cfg.Recorder = event.Func(func(runtime.Object, string, string, string) {})
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Migrating[E, B]{Reconciler: cfg.Reconciler, cfg: cfg}, nil
}

// nextStepAt once: a status write does not reconcile the entry again.
const nextStepAt = time.Millisecond

// ReconcileEntry reconciles e with the Reconciler, then runs the next step
// of its migration, if any, and records it in e's status. It returns when
// to look again: at once after a step, when the legacy bucket's grace
// period ends, or after Wait while e waits for its prefix.
func (m *Migrating[E, B]) ReconcileEntry(ctx context.Context, e E) (time.Duration, error) {
	if e.GetDeletionTimestamp() != nil {
		var err error
		if e, err = m.resumeAbandoned(ctx, e); err != nil {
			return 0, err
		}
	}
	after, err := m.Reconciler.ReconcileEntry(ctx, e)
	if err != nil || e.GetDeletionTimestamp() != nil {
		return after, err
	}
	if st := *m.cfg.Status(e); st != nil && st.Step == StepDone {
		return after, nil
	}
	src, ok := m.cfg.Source(e)
	if !ok {
		return after, nil
	}
	if m.cfg.Prefix(e) == "" {
		return m.cfg.Wait, nil // the migration waits for the prefix
	}
	mig := m.migration(e, src)
	e = e.DeepCopyObject().(E)
	st := (*m.cfg.Status(e)).DeepCopy()
	if st == nil {
		st = &MigrationStatus{}
	}
	before := *st
	if before.Step == "" {
		before.Step = StepCreatePrefix
	}
	done, wait, err := mig.Next(ctx, st)
	if equalJSON(before, *st) {
		return wait, err // waiting for the grace period: nothing to record
	}
	*m.cfg.Status(e) = st
	if werr := m.cfg.Entries.UpdateStatus(ctx, e); werr != nil {
		return 0, errors.Join(err, fmt.Errorf("record migration step %s: %w", before.Step, werr))
	}
	now := m.cfg.Clock.Now()
	switch {
	case err != nil:
		if before.LastError != st.LastError {
			m.cfg.Recorder.Event(e, corev1.EventTypeWarning, ReasonMigrationFailed, st.LastError)
		}
		return 0, err
	case done:
		m.cfg.Recorder.Event(e, corev1.EventTypeNormal, ReasonMigrated,
			fmt.Sprintf("migrated: %d objects copied, %d not found, downtime %s", st.Copied, st.NotFound, st.Downtime(now)))
		return 0, nil
	}
	if st.Step == before.Step { // a dry run of DeleteLegacy
		if before.DryRun != st.DryRun {
			m.cfg.Recorder.Event(e, corev1.EventTypeNormal, ReasonMigrationDryRun, st.DryRun)
		}
		return wait, nil
	}
	msg := fmt.Sprintf("%s done, next %s", before.Step, st.Step)
	switch before.Step {
	case StepCopy, StepCopyRemaining:
		msg += fmt.Sprintf(" (%d objects copied, %d not found)", st.Copied, st.NotFound)
	case StepPauseWriter:
		msg += ": the writer is paused"
	case StepResumeWriter:
		msg += fmt.Sprintf(": the writer resumed after %s of downtime", st.Downtime(now))
	}
	m.cfg.Recorder.Event(e, corev1.EventTypeNormal, ReasonMigrationStep, msg)
	return nextStepAt, nil
}

// resumeAbandoned resumes the writer of e, an entry being deleted, when
// its migration paused the writer and did not resume it, and records when
// in e's status; it returns e as written.
func (m *Migrating[E, B]) resumeAbandoned(ctx context.Context, e E) (E, error) {
	st := *m.cfg.Status(e)
	if st == nil || st.PausedAt == nil || st.ResumedAt != nil {
		return e, nil
	}
	if err := m.cfg.Hooks(e).Resume(ctx); err != nil {
		err = fmt.Errorf("the entry is being deleted during its migration's step %s, and its writer could not be resumed: %w", st.Step, err)
		m.cfg.Recorder.Event(e, corev1.EventTypeWarning, ReasonMigrationFailed, err.Error())
		return e, err
	}
	e = e.DeepCopyObject().(E)
	st = st.DeepCopy()
	now := metav1.NewTime(m.cfg.Clock.Now())
	st.ResumedAt, st.LastError = &now, ""
	*m.cfg.Status(e) = st
	if err := m.cfg.Entries.UpdateStatus(ctx, e); err != nil {
		return e, fmt.Errorf("record the writer resumed: %w", err)
	}
	m.cfg.Recorder.Event(e, corev1.EventTypeNormal, ReasonMigrationAbandoned, fmt.Sprintf(
		"migration abandoned at step %s: the entry is being deleted; the writer resumed after %s of downtime", st.Step, st.Downtime(now.Time)))
	return e, nil
}

// wholeBucket reports whether loc is a whole bucket: no prefix of its own,
// none in its URL (prefix=).
func wholeBucket(loc collect.Location) bool {
	u, err := url.Parse(loc.URL)
	return err == nil && loc.Prefix == "" && !u.Query().Has("prefix")
}

// migration is e's migration from src into its prefix.
func (m *Migrating[E, B]) migration(e E, src collect.Location) *Migration {
	mig := m.cfg.Migration
	mig.SourcePrefix, mig.TargetPrefix, mig.Hooks = src.Prefix, m.cfg.Prefix(e), m.cfg.Hooks(e)
	if mig.Clock == nil {
		mig.Clock = m.cfg.Clock
	}
	c := m.cfg.Collector
	if mig.Hooks.DeleteLegacy == nil && wholeBucket(src) {
		// The legacy bucket was the entry's alone: its data goes through
		// the bucket the migration opened, then the bucket itself.
		mig.Hooks.DeleteLegacy = func(ctx context.Context) error {
			if err := mig.deleteLegacy(ctx); err != nil {
				return err
			}
			creds, err := c.Credentials(ctx, e, src)
			if err != nil {
				return err
			}
			_, err = backupstore.DeleteBucket(ctx, src.URL, creds, nil)
			return err
		}
	}
	mig.Buckets = func(ctx context.Context) (*blob.Bucket, *blob.Bucket, func(), error) {
		legacy, releaseLegacy, err := c.OpenLocation(ctx, e, src)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("legacy bucket %s: %w", src.URL, err)
		}
		shared, _, releaseShared, err := c.OpenBucket(ctx, e)
		if err != nil {
			_ = releaseLegacy()
			return nil, nil, nil, err
		}
		return legacy, shared, func() { _, _ = releaseLegacy(), releaseShared() }, nil
	}
	return &mig
}
