package migrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/internal/keys"
	"github.com/groundskeeper-io/groundskeeper/internal/event"
)

// Event reasons of a Controller.
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
	// ReasonAlreadyMigrated: the entry's migration is done, and its spec
	// now names another source, which is not migrated.
	ReasonAlreadyMigrated = "AlreadyMigrated"
	// ReasonSourceChanged: the entry's spec names another source than the
	// one its migration, not done yet, copies from; nothing is done until
	// the spec names that source again.
	ReasonSourceChanged = "SourceChanged"
	// ReasonSourceIsShared: the entry's source is, or cannot be told from,
	// the store's bucket of its own location or of a bucket object
	// (Config.LiveBuckets): a shared bucket, whose deletion
	// would take every entry's data. Nothing is done until that changes.
	ReasonSourceIsShared = "SourceIsShared"
	// ReasonLegacyNotCopied: StepDeleteLegacy found legacy objects that
	// the target lacks (ErrLegacyNotCopied): the legacy location is kept,
	// and the step retried.
	ReasonLegacyNotCopied = "LegacyNotCopied"
	// ReasonLegacyInUse: StepDeleteLegacy found another entry whose
	// migration copies from the same legacy location (or one that
	// overlaps it) and has not copied it yet (ErrLegacyInUse): the legacy
	// location is kept, and the step retried.
	ReasonLegacyInUse = "LegacyInUse"
)

// ConditionMigrated is the condition a Controller keeps on each entry with
// a migration when the entry's type implements collect.ConditionSetter:
// False while the migration runs (reason MigrationStep, or MigrationFailed
// with the last error, LegacyNotCopied, LegacyInUse, SourceChanged or
// SourceIsShared), True once it
// is done (Migrated, or AlreadyMigrated when the spec names another
// source since).
const ConditionMigrated = "Migrated"

// Config says how the entries' migrations run in their
// reconcile (Controller).
type Config[E, B collect.Object] struct {
	// Reconciler places and admits the entries: a Share or a Pool.
	// Required.
	Reconciler share.Reconciler[E, B]
	// Entries writes an entry's status. Required.
	Entries collect.Objects[E]
	// Collector opens an entry's legacy bucket (Source, with its Secret:
	// collect.Collector.OpenLocation) and its shared bucket (its
	// Location: collect.Collector.OpenBucket). Required.
	Collector *collect.Collector[E]
	// Source is where entry e's legacy backups are, and SourcePrefix in
	// it; ok is false when e has nothing to migrate. Required.
	Source func(e E) (loc collect.Location, ok bool)
	// LiveBuckets lists every bucket object (of every namespace) from the
	// API server, never from a cache (crt/backups.LiveList), and BucketURL
	// is the URL of a bucket object's store bucket (its prefix= is not
	// looked at; "" for none): a source that is the store's bucket of one
	// of them (backupstore.SameBucket), or of e's own location, is
	// refused (ReasonSourceIsShared). Required.
	LiveBuckets func(ctx context.Context) ([]B, error)
	BucketURL   func(b B) string
	// LiveEntries lists every entry (of every namespace) from the API
	// server, never from a cache (crt/backups.LiveList): right before
	// StepDeleteLegacy deletes, an entry whose Source overlaps this
	// one's (backupstore.Overlap) and whose migration has not reached
	// StepDeleteLegacy (not copied yet, or not started) keeps the legacy
	// location (ErrLegacyInUse). nil lists with Entries.List(ctx, ""),
	// which may be a cache (crt/backups.Objects): an entry created, or
	// given its source, a moment before may then be missed.
	LiveEntries func(ctx context.Context) ([]E, error)
	// Hooks are the hooks of e's writer (crt/backups.DeploymentWriter).
	// Without a DeleteLegacy hook, a legacy location that is a whole
	// bucket (no prefix, no prefix= in its URL) is deleted with its data
	// (backupstore.DeleteBucket, after the data went through the opened
	// bucket); one under a prefix loses the objects under it. Either
	// way, and with a hook, only once Migration.Next's dry-run copy finds
	// nothing of it missing in the target.
	// Required.
	Hooks func(e E) Hooks
	// Prefix is e's prefix, the migration's target; "" until e is
	// admitted. Required.
	Prefix func(e E) string
	// Status points at the entry's status field that records its
	// migration (nil before the first step). Required.
	Status func(E) **Status
	// Migration is copied into each entry's migration: set GracePeriod,
	// a Marker, Copy options; Buckets, SourcePrefix, TargetPrefix,
	// MarkerOwner (its UID) and Hooks are the entry's.
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

// Controller runs each admitted entry's Migration after its Reconciler,
// one step per reconcile, and records the step in the entry's status
// before the next one runs: a restarted controller resumes at the
// recorded step, and a failed step is retried (with the Reconciler's
// backoff) without repeating the completed ones. The source is recorded
// at the first step (Status.Source): an entry whose spec names
// another source later is not migrated from it, and nothing is done for it
// (condition reason SourceChanged while the migration runs, AlreadyMigrated
// once it is done). An entry whose recorded step is StepDone is not
// migrated again, whatever its spec says.
//
// A source that is a shared bucket is never migrated from: before the
// first step, before the copy, and before StepDeleteLegacy (at every
// reconcile at those steps), the source is compared with the entry's own
// location (Config.Collector) and with the store's bucket of
// every bucket object, read from the API server (LiveBuckets, BucketURL),
// by bucket identity (backupstore.SameBucket: one bucket spelled with
// other options or a region is one). When it is, or cannot be told from,
// one of them (or a URL cannot be parsed), the step is not run: condition
// reason SourceIsShared naming both, a Warning event, no hook call, no
// copy, no deletion. The steps from the pause to the resume are not held
// (a refusal there would keep the writer paused, and they delete
// nothing).
//
// Two entries may migrate from one legacy location (or from two that
// overlap: a bucket and a prefix of it), each into its own prefix: each
// copies it whole. Neither deletes it while the other has not copied it:
// right before StepDeleteLegacy deletes (after its dry-run copy), the
// entries are listed (LiveEntries), and one other than e, deleted or
// not, whose Source overlaps e's and whose recorded step is before
// StepDeleteLegacy (or that has none yet) keeps the legacy location:
// the step fails with ErrLegacyInUse naming it (condition reason
// LegacyInUse, a Warning event) and is retried. So is one whose recorded
// source (SourceChanged) is e's, spelled alike. The copies themselves are
// not held: two migrations that each waited for the other to copy first
// would wait for ever.
//
// The deletion of an entry ends its migration. When the migration had
// paused the writer and not resumed it, Controller resumes it (Hooks.Resume)
// and records ResumedAt before the Reconciler goes on with the deletion,
// which waits until the writer is resumed: the writer runs on where it
// wrote last (the legacy location before StepSwitch, the new one after),
// and nothing of the legacy location is deleted, since that is a step
// after the switch. Everything else is the Reconciler's.
type Controller[E, B collect.Object] struct {
	share.Reconciler[E, B]
	cfg Config[E, B]
}

var _ share.Reconciler[collect.Object, collect.Object] = (*Controller[collect.Object, collect.Object])(nil)

// New checks cfg and returns its Controller.
func New[E, B collect.Object](cfg Config[E, B]) (*Controller[E, B], error) {
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"Reconciler", cfg.Reconciler != nil}, {"Entries", cfg.Entries != nil}, {"Collector", cfg.Collector != nil},
		{"Source", cfg.Source != nil}, {"Hooks", cfg.Hooks != nil}, {"Prefix", cfg.Prefix != nil}, {"Status", cfg.Status != nil},
		{"LiveBuckets", cfg.LiveBuckets != nil}, {"BucketURL", cfg.BucketURL != nil},
	} {
		if !f.ok {
			return nil, fmt.Errorf("%w: share: migrate.Config.%s is required", backupstore.ErrInvalidConfig, f.name)
		}
	}
	if cfg.LiveEntries == nil {
		entries := cfg.Entries
		cfg.LiveEntries = func(ctx context.Context) ([]E, error) { return entries.List(ctx, "") }
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
	return &Controller[E, B]{Reconciler: cfg.Reconciler, cfg: cfg}, nil
}

// nextStepAt once: a status write does not reconcile the entry again.
const nextStepAt = time.Millisecond

// ReconcileEntry reconciles e with the Reconciler, then runs the next step
// of its migration, if any, and records it in e's status. It returns when
// to look again: at once after a step, when the legacy bucket's grace
// period ends, or after Wait while e waits for its prefix.
func (m *Controller[E, B]) ReconcileEntry(ctx context.Context, e E) (time.Duration, error) {
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
	src, ok := m.cfg.Source(e)
	recorded := *m.cfg.Status(e)
	if recorded != nil && recorded.Step == StepDone {
		if !ok || recorded.Source == "" || recorded.Source == src.Where() {
			return after, m.setCondition(ctx, e, recorded, ReasonMigrated, "")
		}
		return after, m.setCondition(ctx, e, recorded, ReasonAlreadyMigrated, fmt.Sprintf(
			"already migrated from %s; spec names %s now, which is not migrated: a migrated entry is not migrated again", recorded.Source, src.Where()))
	}
	if !ok {
		return after, nil
	}
	if recorded != nil && recorded.Source != "" && recorded.Source != src.Where() {
		return after, m.setCondition(ctx, e, recorded, ReasonSourceChanged, fmt.Sprintf(
			"the migration copies from %s (at step %s); spec names %s now: nothing is done until it names %s again", recorded.Source, recorded.Step, src.Where(), recorded.Source))
	}
	if m.cfg.Prefix(e) == "" {
		return m.cfg.Wait, nil // the migration waits for the prefix
	}
	step := StepCreatePrefix
	if recorded != nil && recorded.Step != "" {
		step = recorded.Step
	}
	if step == StepCreatePrefix || step == StepCopy || step == StepDeleteLegacy {
		shared, err := m.sharedSource(ctx, e, src)
		if err != nil {
			return 0, fmt.Errorf("compare the migration's source %s with the shared buckets: %w", src.Where(), err)
		}
		if shared != "" {
			return after, m.setCondition(ctx, e, recorded, ReasonSourceIsShared, shared)
		}
	}
	mig := m.migration(e, src)
	e = e.DeepCopyObject().(E)
	st := recorded.DeepCopy()
	if st == nil {
		st = &Status{}
	}
	before := *st
	if before.Step == "" {
		before.Step = StepCreatePrefix
	}
	if st.Source == "" {
		st.Source = src.Where()
	}
	done, wait, err := mig.Next(ctx, st)
	if equality.Semantic.DeepEqual(before, *st) {
		if err == nil {
			// Waiting for the grace period: nothing to record but a
			// condition that a refusal (SourceIsShared) left.
			return wait, m.setCondition(ctx, e, st, ReasonMigrated, "")
		}
		return wait, err
	}
	*m.cfg.Status(e) = st
	m.condition(e, st, err, "", "")
	if werr := m.cfg.Entries.UpdateStatus(ctx, e); werr != nil {
		return 0, errors.Join(err, fmt.Errorf("record migration step %s: %w", before.Step, werr))
	}
	return m.announce(e, before, st, done, wait, err)
}

// announce records the event of a migration step that changed st (from
// before), and returns when to look again: at once after a step, after
// wait in a dry run of DeleteLegacy.
func (m *Controller[E, B]) announce(e E, before Status, st *Status, done bool, wait time.Duration, err error) (time.Duration, error) {
	now := m.cfg.Clock.Now()
	switch {
	case err != nil:
		if before.LastError != st.LastError {
			m.cfg.Recorder.Event(e, corev1.EventTypeWarning, failedReason(err), st.LastError)
		}
		return 0, err
	case done:
		m.cfg.Recorder.Event(e, corev1.EventTypeNormal, ReasonMigrated,
			fmt.Sprintf("migrated from %s: %d objects copied, %d not found, downtime %s", st.Source, st.Copied, st.NotFound, st.Downtime(now)))
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

// condition sets e's ConditionMigrated from its migration's status st and
// the error of its last step, or to reason and msg when reason is given;
// it reports whether the condition changed. On an entry whose type does
// not implement collect.ConditionSetter it does nothing (the events and
// the status still say it all).
func (m *Controller[E, B]) condition(e E, st *Status, err error, reason, msg string) bool {
	cs, ok := any(e).(collect.ConditionSetter)
	if !ok {
		return false
	}
	c := metav1.Condition{Type: ConditionMigrated, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: e.GetGeneration()}
	switch {
	case reason == ReasonAlreadyMigrated:
		c.Status = metav1.ConditionTrue
	case reason != "":
	case err != nil:
		c.Reason, c.Message = failedReason(err), st.LastError
	case st.Step == StepDone:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonMigrated
		c.Message = fmt.Sprintf("migrated from %s: %d objects copied, %d not found", st.Source, st.Copied, st.NotFound)
		if st.PausedAt != nil && st.ResumedAt != nil {
			c.Message += fmt.Sprintf(", downtime %s", st.Downtime(st.ResumedAt.Time))
		}
	default:
		c.Reason, c.Message = ReasonMigrationStep, fmt.Sprintf("migrating from %s: next step %s", st.Source, st.Step)
	}
	conds := slices.Clone(cs.GetConditions())
	if !meta.SetStatusCondition(&conds, c) {
		return false
	}
	cs.SetConditions(conds)
	return true
}

// failedReason is the reason of a step's failure err.
func failedReason(err error) string {
	switch {
	case errors.Is(err, ErrLegacyNotCopied):
		return ReasonLegacyNotCopied
	case errors.Is(err, ErrLegacyInUse):
		return ReasonLegacyInUse
	}
	return ReasonMigrationFailed
}

// setCondition sets e's ConditionMigrated (condition) and writes e's status
// when it changed, with an event for a reason other than ReasonMigrated.
func (m *Controller[E, B]) setCondition(ctx context.Context, e E, st *Status, reason, msg string) error {
	if reason == ReasonMigrated {
		reason = "" // from st
	}
	e = e.DeepCopyObject().(E)
	if !m.condition(e, st, nil, reason, msg) {
		return nil
	}
	if err := m.cfg.Entries.UpdateStatus(ctx, e); err != nil {
		return fmt.Errorf("record condition %s: %w", ConditionMigrated, err)
	}
	if reason != "" {
		m.cfg.Recorder.Event(e, corev1.EventTypeWarning, reason, msg)
	}
	return nil
}

// resumeAbandoned resumes the writer of e, an entry being deleted, when
// its migration paused the writer and did not resume it, and records when
// in e's status; it returns e as written.
func (m *Controller[E, B]) resumeAbandoned(ctx context.Context, e E) (E, error) {
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
	u, err := backupstore.ParseURL(loc.URL)
	return err == nil && loc.Prefix == "" && u.Prefix == ""
}

// sharedSource returns why e's migration must not run from src, "" if
// nothing stands in the way: src is, or cannot be told from
// (backupstore.SameBucket), the store's bucket of e's own location or of
// a bucket object (LiveBuckets, BucketURL), or a URL cannot be parsed.
// The error is for a retry: a list or the location that could not be
// read.
func (m *Controller[E, B]) sharedSource(ctx context.Context, e E, src collect.Location) (string, error) {
	from, err := backupstore.ParseURL(src.URL)
	if err != nil {
		return fmt.Sprintf("the source %s cannot be compared with the shared buckets: %v; nothing is done", src.Where(), err), nil
	}
	refuse := func(what, rawURL string) string {
		return fmt.Sprintf("the source %s is bucket %s, the store's bucket of %s (%s): a shared bucket holds other entries' data, and the migration would delete it with the legacy location; nothing is done until the source names another bucket",
			src.Where(), from.ID, what, rawURL)
	}
	buckets, err := m.cfg.LiveBuckets(ctx)
	if err != nil {
		return "", fmt.Errorf("list the buckets: %w", err)
	}
	for _, b := range buckets {
		raw := m.cfg.BucketURL(b)
		if raw == "" {
			continue // names no store bucket
		}
		what := "bucket " + b.GetName()
		if b.GetNamespace() != "" {
			what = "bucket " + b.GetNamespace() + "/" + b.GetName()
		}
		u, err := backupstore.ParseURL(raw)
		if err != nil {
			return fmt.Sprintf("%s names a URL that cannot be compared with the source %s: %v; nothing is done", what, src.Where(), err), nil
		}
		if backupstore.SameBucket(from.ID, u.ID) {
			return refuse(what, raw), nil
		}
	}
	// The entry's own location, the one its migration copies into, even
	// where no bucket object names it.
	_, loc, release, err := m.cfg.Collector.OpenBucket(ctx, e)
	if err != nil {
		return "", fmt.Errorf("the entry's location: %w", err)
	}
	_ = release()
	own, err := backupstore.ParseURL(loc.URL)
	if err != nil {
		return fmt.Sprintf("the entry's location %s cannot be compared with the source %s: %v; nothing is done", loc.Where(), src.Where(), err), nil
	}
	if backupstore.SameBucket(from.ID, own.ID) {
		return refuse("the entry's own location", loc.Where()), nil
	}
	return "", nil
}

// legacyInUse returns an error that is ErrLegacyInUse, naming them, when
// an entry other than e (LiveEntries) migrates from a source that
// overlaps src and has not copied it yet: its recorded step is before
// StepDeleteLegacy, or it has none. An entry whose source cannot be
// compared with src counts as one that overlaps. The error is also one
// for a list that failed: nothing is deleted on a list not read.
func (m *Controller[E, B]) legacyInUse(ctx context.Context, e E, src collect.Location) error {
	from, err := backupstore.ParseURL(src.URL)
	if err != nil {
		return fmt.Errorf("%w: the source %s cannot be compared with other entries' sources: %w", ErrLegacyInUse, src.Where(), err)
	}
	entries, err := m.cfg.LiveEntries(ctx)
	if err != nil {
		return fmt.Errorf("list the entries whose migration may copy from %s: %w", src.Where(), err)
	}
	var users []string
	for _, o := range entries {
		if o.GetUID() == e.GetUID() && o.GetNamespace() == e.GetNamespace() && o.GetName() == e.GetName() {
			continue
		}
		step := StepCreatePrefix
		var recorded string
		if st := *m.cfg.Status(o); st != nil {
			recorded = st.Source
			step = cmp.Or(st.Step, StepCreatePrefix)
		}
		if step == StepDeleteLegacy || step == StepDone {
			continue // it has copied what it copies: the rest it checks itself
		}
		name := o.GetName()
		if o.GetNamespace() != "" {
			name = o.GetNamespace() + "/" + name
		}
		// Its recorded source, the one it copies from, and the one its
		// spec names: either may be copied from next.
		why := ""
		if recorded == src.Where() {
			why = "records it"
		}
		if s, ok := m.cfg.Source(o); ok && why == "" {
			u, err := backupstore.ParseURL(s.URL)
			switch {
			case err != nil:
				why = fmt.Sprintf("names %s, which cannot be compared with it: %v", s.Where(), err)
			case backupstore.Overlap(from, src.Prefix, u, s.Prefix):
				why = "names " + s.Where()
			}
		}
		if why != "" {
			users = append(users, fmt.Sprintf("%s (%s, at step %s)", name, why, step))
		}
	}
	if len(users) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s is kept for %s", ErrLegacyInUse, src.Where(), keys.Named(users))
}

// migration is e's migration from src into its prefix.
func (m *Controller[E, B]) migration(e E, src collect.Location) *Migration {
	mig := m.cfg.Migration
	mig.SourcePrefix, mig.TargetPrefix, mig.Hooks = src.Prefix, m.cfg.Prefix(e), m.cfg.Hooks(e)
	mig.MarkerOwner = string(e.GetUID()) // the admission's marker names it too
	mig.inUse = func(ctx context.Context) error { return m.legacyInUse(ctx, e, src) }
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
