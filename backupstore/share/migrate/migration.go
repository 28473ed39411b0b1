package migrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/internal/keys"
	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrLegacyNotCopied is StepDeleteLegacy's refusal to delete a legacy
// location that holds objects the target does not (see Migration.Next):
// the step is retried, and deletes once nothing is missing.
var ErrLegacyNotCopied = errclass.Retryable("share: legacy objects not copied")

// ErrLegacyInUse is StepDeleteLegacy's refusal, under a Controller, to delete
// a legacy location that another entry's migration also copies from and
// has not copied yet (Config.LiveEntries): the step is retried,
// and deletes once that migration is past its copies.
var ErrLegacyInUse = errclass.Retryable("share: another entry's migration has not copied the legacy location yet")

// Step is a step of the move of an entry's backups from a legacy
// bucket of its own into its prefix in a shared bucket, in the order of the
// seed's migration sequence.
type Step string

// The steps, in order. A Status names the next one to run.
const (
	// StepCreatePrefix writes the marker under the target prefix, never
	// over another (Migration.MarkerOwner).
	StepCreatePrefix Step = "CreatePrefix"
	// StepCopy copies the legacy objects with a manifest (None, Copied,
	// NotFound) while the writer still writes to the legacy bucket.
	StepCopy Step = "Copy"
	// StepPauseWriter stops the writer (Hooks.Pause): the downtime starts.
	StepPauseWriter Step = "PauseWriter"
	// StepCopyRemaining copies what was written meanwhile.
	StepCopyRemaining Step = "CopyRemaining"
	// StepSwitch points the entry at its new location (Hooks.Switch).
	StepSwitch Step = "Switch"
	// StepResumeWriter starts the writer on the new location
	// (Hooks.Resume): the downtime ends.
	StepResumeWriter Step = "ResumeWriter"
	// StepDeleteLegacy deletes the legacy bucket once GracePeriod has
	// passed since the switch (Hooks.DeleteLegacy), and only while the
	// target holds every legacy object (ErrLegacyNotCopied) and, under
	// Controller, no other entry's migration still has to copy it
	// (ErrLegacyInUse).
	StepDeleteLegacy Step = "DeleteLegacy"
	// StepDone: nothing is left to do.
	StepDone Step = "Done"
)

var migrationOrder = []Step{StepCreatePrefix, StepCopy, StepPauseWriter, StepCopyRemaining, StepSwitch, StepResumeWriter, StepDeleteLegacy, StepDone}

// +kubebuilder:object:generate=true

// Status is what a migration records after each step, in the
// entry's status: a controller that restarts resumes at Step, and a
// failed step is retried without repeating the completed ones. It has
// DeepCopy functions, so that an API type may hold it.
type Status struct {
	// Step is the next step to run; "" is StepCreatePrefix.
	Step Step `json:"step,omitempty"`
	// Source is where the migration copies from (collect.Location.Where
	// of the legacy location), recorded at its first step by a Controller,
	// which migrates from no other.
	Source string `json:"source,omitempty"`
	// Copied and NotFound count the manifest's objects after a copy step.
	Copied   int `json:"copied,omitempty"`
	NotFound int `json:"notFound,omitempty"`
	// PausedAt and ResumedAt bound the downtime (the writer paused).
	PausedAt  *metav1.Time `json:"pausedAt,omitempty"`
	ResumedAt *metav1.Time `json:"resumedAt,omitempty"`
	// SwitchedAt is when the entry was pointed at its new location; the
	// legacy bucket goes GracePeriod later.
	SwitchedAt *metav1.Time `json:"switchedAt,omitempty"`
	// LastError is the error of the last failed attempt of Step.
	LastError string `json:"lastError,omitempty"`
	// DryRun says what StepDeleteLegacy would delete, in a dry run
	// (Migration.DryRun), which stays at that step.
	DryRun string `json:"dryRun,omitempty"`
}

// Downtime is how long the writer was (or has been, if it is still)
// paused; 0 before the pause.
func (s Status) Downtime(now time.Time) time.Duration {
	switch {
	case s.PausedAt == nil:
		return 0
	case s.ResumedAt == nil:
		return now.Sub(s.PausedAt.Time)
	}
	return s.ResumedAt.Sub(s.PausedAt.Time)
}

// Hooks are the operator's own parts of a migration. Each is
// called again after a crash between its success and the status write
// that records it, so each must be idempotent (scale to 0 twice, switch
// twice).
type Hooks struct {
	// Pause stops the writer of the legacy bucket and returns once it has
	// stopped (a Deployment scaled to 0, its pods gone).
	Pause func(ctx context.Context) error
	// Switch points the entry at its new location.
	Switch func(ctx context.Context) error
	// Resume starts the writer on the new location.
	Resume func(ctx context.Context) error
	// DeleteLegacy deletes the legacy bucket: its data and the bucket.
	// It is called only once a dry-run copy, right before, finds every
	// legacy object in the target (see Migration.Next), as the default
	// deletion is. nil deletes every object under SourcePrefix in the
	// legacy bucket, all of them when it is "" (backupstore.DeletePrefix,
	// which refuses "" on a bucket whose own prefix it cannot see: one not
	// opened by backupstore.OpenBucket); the empty bucket stays.
	DeleteLegacy func(ctx context.Context) error
}

// Migration moves one entry's backups from a legacy bucket into its
// prefix in a shared bucket.
type Migration struct {
	// Buckets opens the legacy (source) and shared (target) buckets for
	// one step, and the function that releases them. Required.
	Buckets func(ctx context.Context) (legacy, shared *blob.Bucket, release func(), err error)
	// SourcePrefix selects the legacy objects ("" for the whole bucket);
	// TargetPrefix is the entry's prefix in the shared bucket. Required.
	SourcePrefix, TargetPrefix string
	// ManifestKey is where the copy's manifest is kept in the shared
	// bucket, under TargetPrefix; default TargetPrefix+"migration-manifest.json".
	ManifestKey string
	// Marker is written at TargetPrefix+MarkerKey by StepCreatePrefix,
	// with MarkerOwner (the entry's UID; Controller sets it) as its owner
	// (backupstore.WriteMarker). A marker is never replaced: one there
	// already that names MarkerOwner (the admission's, when MarkerKey is
	// the Share's) is kept as it is, and one that names another owner, or
	// none while MarkerOwner is set, fails the step. Without MarkerOwner
	// the marker is written only where there is none, and one there that
	// names an owner fails the step.
	Marker      []byte
	MarkerKey   string
	MarkerOwner string
	// Hooks are the operator's steps: Pause, Switch and Resume are
	// required.
	Hooks Hooks
	// GracePeriod is how long the legacy bucket is kept after the switch.
	GracePeriod time.Duration
	// Clock, default the real clock.
	Clock clock.PassiveClock
	// Copy adjusts the copies (Concurrency, Retry); its prefixes and
	// manifest key are the Migration's.
	Copy backupstore.CopyOptions
	// DryRun keeps the legacy bucket: StepDeleteLegacy, once due, lists
	// what it would delete (with the default DeleteLegacy; a hook of the
	// caller's is not called), and why it would delete nothing now (legacy
	// objects the target lacks, which it does not copy then), into
	// Status.DryRun and stays, to be looked at again after
	// DryRunWait (default 1h). The other steps run: they delete nothing.
	DryRun     bool
	DryRunWait time.Duration

	// inUse, set by a Controller, says why the legacy location must not be
	// deleted now (another entry's migration has not copied it yet):
	// asked right before the deletion, after the dry-run copy.
	inUse func(ctx context.Context) error
}

// Next runs the next step of st and records it in st: on success st names
// the step after it; on failure st.LastError says why and the error is
// returned (retry with backoff; the step is run again). A copy step never
// writes over an object of the target that holds other content: it fails
// (backupstore.ErrTargetDiffers, naming the keys) until a person moves
// one of the two. It returns
// whether the migration is done and, while the legacy bucket waits for
// its grace period, when to call again. Persist st after every call
// (before the next one): a step whose record is lost runs again.
//
// StepDeleteLegacy, once the grace period is over, first makes a dry-run
// copy with the copy steps' options and manifest, and deletes nothing
// (neither by default nor by Hooks.DeleteLegacy) while the target lacks a
// legacy object the copy selects: a writer the switch did not reach
// writes there for the whole grace period, and its backups are the
// newest. It fails then with an error that is ErrLegacyNotCopied and
// names the keys (the first 10, and how many more), and copies them; the
// retry checks again and deletes once nothing is missing, so a writer
// that still writes holds the deletion. A whole legacy bucket
// (SourcePrefix "") is deleted only when the copy left nothing in it out
// (no Copy.MaxBackups or MaxBackupAge excluding objects): what a
// migration did not copy may not be the entry's. A copy that would write
// over an object of the target, or with a missing key under
// TargetPrefix (the legacy location may hold the target), is not made:
// those keys stay missing, and the legacy location stays, until a person
// copies or deletes them. Under Controller, the deletion also waits, right
// before it, while another entry's migration from the same legacy
// location has not copied it (ErrLegacyInUse). With DryRun, the report
// says why nothing would be deleted now.
func (m *Migration) Next(ctx context.Context, st *Status) (done bool, after time.Duration, err error) {
	if err := m.check(); err != nil {
		return false, 0, err
	}
	clk := m.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if st.Step == "" {
		st.Step = StepCreatePrefix
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("migrationStep", st.Step)
	now := metav1.NewTime(clk.Now())
	fail := func(err error) (bool, time.Duration, error) {
		err = fmt.Errorf("migration step %s: %w", st.Step, err)
		st.LastError = err.Error()
		return false, 0, err
	}
	switch st.Step {
	case StepDone:
		return true, 0, nil
	case StepCreatePrefix, StepCopy, StepCopyRemaining:
		if err := m.copyStep(ctx, st); err != nil {
			return fail(err)
		}
	case StepPauseWriter:
		if st.PausedAt == nil {
			st.PausedAt = &now // the downtime counts from the first attempt
		}
		if err := m.Hooks.Pause(ctx); err != nil {
			return fail(err)
		}
	case StepSwitch:
		if err := m.Hooks.Switch(ctx); err != nil {
			return fail(err)
		}
		st.SwitchedAt = &now
	case StepResumeWriter:
		if err := m.Hooks.Resume(ctx); err != nil {
			return fail(err)
		}
		st.ResumedAt = &now
	case StepDeleteLegacy:
		deleted, after, err := m.deleteLegacyStep(ctx, st, now.Time)
		if err != nil {
			return fail(err)
		}
		if !deleted {
			return false, after, nil
		}
	default:
		return false, 0, fmt.Errorf("%w: migration step %q is not one of %v", backupstore.ErrInvalidConfig, st.Step, migrationOrder)
	}
	log.Info("migration step done")
	st.LastError = ""
	for i, s := range migrationOrder {
		if s == st.Step {
			st.Step = migrationOrder[i+1]
			break
		}
	}
	return st.Step == StepDone, 0, nil
}

// copyStep makes the prefix (StepCreatePrefix: its owner marker) or copies
// the legacy location into it (StepCopy, StepCopyRemaining), recording the
// manifest's counts in st.
func (m *Migration) copyStep(ctx context.Context, st *Status) error {
	legacy, shared, release, err := m.Buckets(ctx)
	if err != nil {
		return err
	}
	defer release()
	if st.Step == StepCreatePrefix {
		return m.writeMarker(ctx, shared)
	}
	opts := m.copyOptions()
	res, err := backupstore.CopyBackups(ctx, legacy, shared, &opts)
	if err != nil {
		return err
	}
	st.Copied, st.NotFound = res.Manifest.Count(backupstore.StatusCopied), res.Manifest.Count(backupstore.StatusNotFound)
	logr.FromContextOrDiscard(ctx).Info("copied", "copied", res.Copied, "skipped", res.Skipped, "notFound", res.NotFound, "manifestCopied", st.Copied)
	return nil
}

// deleteLegacyStep deletes the legacy location once the grace period after
// the switch has passed and what the copy steps copied is read again and
// still in the target. It reports whether the location was deleted, and
// otherwise how long to wait (the grace period; in a dry run, DryRunWait
// after recording its report in st).
func (m *Migration) deleteLegacyStep(ctx context.Context, st *Status, now time.Time) (deleted bool, after time.Duration, err error) {
	if st.SwitchedAt == nil {
		return false, 0, errors.New("no switch recorded: the legacy bucket is kept")
	}
	if at := st.SwitchedAt.Add(m.GracePeriod); now.Before(at) {
		return false, at.Sub(now), nil
	}
	// What the copy steps copied is a claim about the legacy location
	// before the switch: read it again now, for the default deletion
	// and a hook of the caller's alike.
	notCopied := m.checkCopied(ctx, st)
	if notCopied == nil && m.inUse != nil {
		// Asked last, right before the deletion: another entry whose
		// migration started during the dry-run copy is seen.
		notCopied = m.inUse(ctx)
	}
	if notCopied != nil && (!m.DryRun || !errors.Is(notCopied, ErrLegacyNotCopied) && !errors.Is(notCopied, ErrLegacyInUse)) {
		return false, 0, notCopied
	}
	if m.DryRun {
		report, err := m.wouldDelete(ctx)
		if err != nil {
			return false, 0, err
		}
		if notCopied != nil {
			report = fmt.Sprintf("would delete nothing now: %v (then: %s)", notCopied, report)
		}
		st.DryRun, st.LastError = report, ""
		return false, cmp.Or(m.DryRunWait, time.Hour), nil
	}
	del := m.Hooks.DeleteLegacy
	if del == nil {
		del = m.deleteLegacy
	}
	if err := del(ctx); err != nil {
		return false, 0, err
	}
	st.DryRun = ""
	return true, 0, nil
}

func (m *Migration) check() error {
	switch {
	case m.Buckets == nil:
		return fmt.Errorf("%w: share: Migration.Buckets is required", backupstore.ErrInvalidConfig)
	case m.TargetPrefix == "":
		return fmt.Errorf("%w: share: Migration.TargetPrefix is required", backupstore.ErrInvalidConfig)
	case m.Hooks.Pause == nil || m.Hooks.Switch == nil || m.Hooks.Resume == nil:
		return fmt.Errorf("%w: share: Migration.Hooks: Pause, Switch and Resume are required", backupstore.ErrInvalidConfig)
	}
	return nil
}

// copyOptions are the options of the migration's copies.
func (m *Migration) copyOptions() backupstore.CopyOptions {
	opts := m.Copy
	opts.SourcePrefix, opts.TargetPrefix = m.SourcePrefix, m.TargetPrefix
	opts.ManifestKey = cmp.Or(m.ManifestKey, m.TargetPrefix+"migration-manifest.json")
	return opts
}

// writeMarker writes the marker of StepCreatePrefix, never over another:
// the prefix may hold the owner marker of its admission at that key, and
// replacing it would lose the proof of whose the prefix is (a collector
// then keeps its data for good).
func (m *Migration) writeMarker(ctx context.Context, shared *blob.Bucket) error {
	if m.MarkerKey == "" {
		return nil
	}
	key := m.TargetPrefix + m.MarkerKey
	var err error
	if m.MarkerOwner != "" {
		err = backupstore.WriteMarker(ctx, shared, key, m.MarkerOwner, m.Marker)
		if !driver.IsExists(err) {
			return err
		}
	} else {
		// Asked first: fileblob's conditional write replaces the
		// metadata (the owner) of the marker it fails on
		// (backupstore.WriteMarker).
		ok, err := shared.Exists(ctx, key)
		if err != nil {
			return err
		}
		if !ok {
			err = shared.WriteAll(ctx, key, m.Marker, &blob.WriterOptions{IfNotExist: true})
			if !driver.IsExists(err) {
				return err
			}
		}
	}
	// There already: an earlier attempt's, the admission's, or another's.
	owner, found, err := backupstore.MarkerOwner(ctx, shared, key)
	switch {
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("the marker %q was there, and is gone: written again at the retry", key)
	case owner != m.MarkerOwner:
		return fmt.Errorf("the marker %q names owner %q, not %q: the prefix is not this entry's, and its marker is not replaced", key, owner, m.MarkerOwner)
	}
	return nil
}

// checkCopied is StepDeleteLegacy's check that the target holds every
// legacy object, made right before the deletion: a dry-run copy with the
// copy steps' options and manifest. It returns an error that is
// ErrLegacyNotCopied, naming the keys, while the target lacks an object
// the copy selects (one written to the legacy location after the copy
// steps, by a writer the switch did not reach: the newest backups), and,
// for a whole legacy bucket (SourcePrefix ""), while the copy's filters
// (Copy.MaxBackups, MaxBackupAge) leave any object out: the deletion of a
// whole bucket takes everything in it, and what the migration did not
// copy may not be the entry's. A legacy bucket that is gone holds
// nothing: a deletion whose record was lost runs again.
//
// The objects the target lacks are copied then (as StepCopyRemaining
// copies, recorded in the manifest and st), and the error still
// returned: the next attempt checks again, and deletes only when nothing
// is missing. They are not copied in a dry run, nor when a copy would
// write over an object of the target, nor when one lies under
// TargetPrefix (the legacy location may then hold the target: a copy
// would nest the target in itself), nor when the filters left objects of
// a whole bucket out; then they stay missing, and so does the deletion,
// until a person copies or deletes them.
func (m *Migration) checkCopied(ctx context.Context, st *Status) error {
	legacy, shared, release, err := m.Buckets(ctx)
	if err != nil {
		return err
	}
	defer release()
	opts := m.copyOptions()
	opts.DryRun = true
	res, err := backupstore.CopyBackups(ctx, legacy, shared, &opts)
	if err != nil {
		if ok, aerr := legacy.IsAccessible(ctx); aerr == nil && !ok {
			return nil // gone: nothing in it to lose
		}
		return fmt.Errorf("the dry-run copy that checks that the target holds every legacy object: %w", err)
	}
	var missing []string
	nests := false
	for _, e := range res.Manifest.Entries {
		if e.Status == backupstore.StatusNone {
			missing = append(missing, e.Key)
			nests = nests || strings.HasPrefix(e.Key, m.TargetPrefix)
		}
	}
	leftOut := 0
	if m.SourcePrefix == "" {
		leftOut = res.Excluded
	}
	if len(missing) == 0 && leftOut == 0 {
		return nil
	}
	var why []string
	if len(missing) > 0 {
		why = append(why, fmt.Sprintf("%s of the legacy location not in the target (written after the copy, by a writer the switch did not reach?): %s",
			objects(len(missing)), keys.Named(missing)))
	}
	if leftOut > 0 {
		why = append(why, fmt.Sprintf("the copy's filters leave %s of the legacy bucket out, and a whole bucket is deleted only when everything in it was copied", objects(leftOut)))
	}
	switch {
	case len(missing) == 0:
	case m.DryRun:
	case leftOut > 0:
		why = append(why, "they are not copied while the filters leave objects out")
	case len(res.Overwrites) > 0:
		why = append(why, fmt.Sprintf("they are not copied: the target holds other content at %s: %s", objects(len(res.Overwrites)), keys.Named(res.Overwrites)))
	case nests:
		why = append(why, fmt.Sprintf("they are not copied: some lie under the target prefix %q, so the legacy location may hold the target", m.TargetPrefix))
	default:
		opts.DryRun = false
		res, err := backupstore.CopyBackups(ctx, legacy, shared, &opts)
		if err != nil {
			why = append(why, fmt.Sprintf("copying them failed: %v", err))
			break
		}
		st.Copied, st.NotFound = res.Manifest.Count(backupstore.StatusCopied), res.Manifest.Count(backupstore.StatusNotFound)
		why = append(why, fmt.Sprintf("copied %s now", objects(res.Copied)))
	}
	return fmt.Errorf("%w: %s; the legacy location is kept and checked again at the next attempt", ErrLegacyNotCopied, strings.Join(why, "; "))
}

// objects is "1 object", "2 objects".
func objects(n int) string {
	if n == 1 {
		return "1 object"
	}
	return fmt.Sprintf("%d objects", n)
}

// deleteLegacy deletes every object under SourcePrefix in the legacy
// bucket.
func (m *Migration) deleteLegacy(ctx context.Context) error {
	_, err := m.deletePrefix(ctx, false)
	return err
}

// wouldDelete says what deleteLegacy would delete.
func (m *Migration) wouldDelete(ctx context.Context) (string, error) {
	res, err := m.deletePrefix(ctx, true)
	if err != nil {
		return "", err
	}
	what := "every object of the legacy bucket"
	if m.SourcePrefix != "" {
		what = fmt.Sprintf("every object under %q in the legacy bucket", m.SourcePrefix)
	}
	return fmt.Sprintf("would delete %d objects (%d bytes): %s", len(res.Keys), res.Bytes, what), nil
}

func (m *Migration) deletePrefix(ctx context.Context, dryRun bool) (*backupstore.DeleteResult, error) {
	legacy, _, release, err := m.Buckets(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	// "" is the whole legacy bucket: the entry's own.
	return backupstore.DeletePrefix(ctx, legacy, m.SourcePrefix, &backupstore.DeleteOptions{DryRun: dryRun,
		PrefixRules: backupstore.PrefixRules{AllowEmpty: m.SourcePrefix == ""}})
}
