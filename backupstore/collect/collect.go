package collect

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/internal/event"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// ErrInvalidConfig is returned by New, wrapped with the field and its value,
// when the Config cannot be used. It is backupstore.ErrInvalidConfig: one
// sentinel for a misconfigured backup store or collector. Test for it with
// errors.Is.
var ErrInvalidConfig = backupstore.ErrInvalidConfig

// Object is a backup resource: a pointer to a typed Kubernetes object (a
// custom resource's Go type) or an *unstructured.Unstructured.
type Object interface {
	metav1.Object
	runtime.Object
}

// Objects is what a Collector reads and writes of the backup resources.
// crt/backups.Objects implements it over a controller-runtime manager; a client-go
// user implements it over a typed or dynamic client. Errors are the API
// server's, with their type (apierrors.IsNotFound and IsConflict work on
// them).
type Objects[T Object] interface {
	// List returns the backups of a namespace. It may read a cache: every
	// deletion is decided again on Get's fresh copy.
	List(ctx context.Context, namespace string) ([]T, error)
	// Get reads one backup from the API server, not from a cache.
	Get(ctx context.Context, namespace, name string) (T, error)
	// UpdateStatus writes obj's status; obj carries the resourceVersion it
	// was read with, so a stale write fails with Conflict.
	UpdateStatus(ctx context.Context, obj T) error
	// Update writes obj (its finalizers); obj carries the resourceVersion
	// it was read with. Only a Collector with a Finalizer calls it.
	Update(ctx context.Context, obj T) error
	// Delete deletes the backup only if it still has this UID and
	// resourceVersion (metav1.Preconditions); otherwise the API server
	// answers Conflict. NotFound is returned as it is.
	Delete(ctx context.Context, namespace, name string, uid types.UID, resourceVersion string) error
}

// Location is where the data of one backup lives.
type Location struct {
	// URL is the bucket's URL as backupstore.OpenBucket takes it:
	// "s3://bucket", "gs://bucket", "azblob://container".
	URL string
	// Prefix is the backup's own data: every key under it, and no other,
	// is deleted with the backup. It must end in "/" (backupstore.CheckPrefix),
	// so that backup "b1" never takes "b10"'s data.
	Prefix string
	// Secret names the Secret with the store's credentials
	// (backupstore.LoadCredentials); empty: the provider's ambient
	// credentials (workload identity, instance metadata).
	Secret string
	// SecretNamespace is the Secret's namespace; default the backup's (a
	// cluster-scoped backup names it).
	SecretNamespace string
	// SecretField is how the backup names the Secret, for messages
	// ("spec.storage.secret"); default "credentials Secret".
	SecretField string
	// BucketMayBeMissing says that the store's bucket may never have been
	// created (an entry placed in a pool's bucket before that bucket was
	// made in the store): when the bucket does not exist, the backup has
	// no data there, and its deletion succeeds with nothing deleted.
	// Without it, a bucket that does not exist keeps the backup
	// (DeletionFailed): a wrong URL must not drop the one record of where
	// the data is.
	BucketMayBeMissing bool
	// Owner, if set, is the identity (a UID) that the marker object
	// Prefix+Marker must name (backupstore.WriteMarker, as
	// backupstore/share writes it when it gives a prefix out) for the data
	// to be the backup's: a marker that names another owner or none, or
	// objects under the prefix without a marker, keep the backup
	// (ReasonNotOwner) and nothing is deleted; no marker and no object
	// mean no data, and the deletion succeeds with nothing deleted. The
	// marker is deleted last (backupstore.DeleteOptions.Last): while some
	// data stays (Object Lock, a failure, a process that ended midway), so
	// does the marker, and a retry still proves whose it is.
	Owner  string
	Marker string
	// NoDataUnlessOwner, with Owner, says that the prefix may never have
	// been given to the backup (an entry whose admission is not recorded
	// on it: refused, or admitted by a write whose status update was
	// lost): unless the marker names Owner, the backup has no data there,
	// and it goes with nothing deleted, the other's data left as it is.
	// Without it, such a prefix keeps the backup (ReasonNotOwner).
	NoDataUnlessOwner bool
}

// The zero Location says that the backup has no data (it was never
// written): the resource goes, or its finalizer is removed, without a store
// being opened.

// Where is the location for people: the URL with the prefix after the
// bucket, before the URL's query ("s3://b/p/?endpoint=…"), so that it reads
// as one address.
func (l Location) Where() string {
	base, query, _ := strings.Cut(l.URL, "?")
	where := strings.TrimSuffix(base, "/") + "/" + l.Prefix
	if query != "" {
		where += "?" + query
	}
	return where
}

// Config says how to read a backup resource, what to keep (Keep) and how
// a deleted one's data goes (Finalizer). A Collector with a policy and no
// Finalizer deletes a backup's data, then its resource; with a Finalizer,
// the data of a backup deleted by anyone goes before its finalizer; with a
// Finalizer and no policy (Keep nil), it only finalizes deleted backups and
// Pass keeps every one.
type Config[T Object] struct {
	// Objects reads and writes the backup resources. Required.
	Objects Objects[T]
	// Secrets reads the credentials Secrets, from the API server
	// (backupstore.SecretsFrom, crt.Secrets). Required.
	Secrets backupstore.SecretGetter
	// Location says where a backup's data lives; it may read other
	// objects (a bucket resource the backup names), from a cache. An error
	// keeps the backup (ReasonInvalidLocation): nothing is deleted on the
	// strength of a field that cannot be read. Required.
	Location func(ctx context.Context, backup T) (Location, error)
	// Keep is the retention policy: a GroupPolicy (the backups of a group
	// judged together), a BackupPolicy (each backup judged alone: a
	// time-to-live field) or Combined (both: a backup is kept while either
	// keeps it). Nil: no policy; the Collector only finalizes deleted
	// backups, and Finalizer is required.
	Keep Keep[T]
	// Finalizer, if set, is the finalizer the Collector owns and how a
	// deleted backup's data goes: Prepare adds it to every backup, and a
	// backup that is deleted (by the pass or by anyone) has its data
	// deleted by Finalize before the finalizer is removed. Without it, the
	// pass deletes the data and then the resource, and a backup deleted by
	// someone else keeps its data.
	Finalizer *Finalizer[T]
	// Time is what a policy measures from, the group's and each backup's
	// alike; default the creation timestamp.
	Time func(T) time.Time
	// Describe says, for messages and events, why a backup expired
	// ("spec.ttl 7d from 2026-03-01T00:00:00Z ran out"); optional.
	Describe func(T) string

	// ConditionType is the type of the condition the Collector sets False,
	// with the reason a backup is kept, on a backup type that implements
	// ConditionSetter; default "DataDeleted".
	ConditionType string
	// Reasons renames the condition and event reasons, for an API that
	// documents its own; empty fields keep the defaults (the Reason
	// constants).
	Reasons Reasons
	// Recorder records events on the backups; nil records none.
	Recorder EventRecorder
	// Clock is what the Collector takes for now; default the real clock.
	Clock clock.PassiveClock
	// Open opens a bucket and returns the function that releases it;
	// default backupstore.OpenBucket and Bucket.Close.
	Open func(ctx context.Context, url string, creds *backupstore.Credentials) (*blob.Bucket, func() error, error)
	// RetryAfter is how long a backup whose data could not be deleted
	// waits before the next attempt; default 5 minutes. A backup kept by
	// Object Lock waits until its retention ends instead.
	RetryAfter time.Duration
	// DryRun decides and reports, and deletes nothing.
	DryRun DryRun
}

// Keep is a Collector's retention policy: GroupPolicy, BackupPolicy or
// Combined, and no other type.
type Keep[T Object] interface {
	policies() (group *GroupPolicy[T], each BackupPolicy[T])
}

var (
	_ Keep[Object] = GroupPolicy[Object]{}
	_ Keep[Object] = BackupPolicy[Object](nil)
	_ Keep[Object] = Combined[Object]{}
)

// GroupPolicy is the retention policy of a group of backups (Group),
// judged together: the newest successful backup of each group is never
// deleted (retention's guard).
type GroupPolicy[T Object] struct {
	// Policy is the policy of a group. It is called once per group and
	// pass, and may read the policy from another object (the database's
	// resource, crt/backups.PolicyOf), from a cache; an error keeps the
	// group's backups (ReasonInvalidPolicy). Required.
	Policy func(ctx context.Context, group string) (retention.Policy, error)
	// Group names the set a backup is judged in (the database it is of);
	// default "", one group per namespace.
	Group func(T) string
	// Outcome says whether a backup succeeded or failed. Required (see the
	// package doc, "Unknown outcomes"): a backup for which it returns
	// retention.OutcomeUnspecified (still running, or not yet reported) is
	// left out of its group's evaluation and kept.
	Outcome func(T) retention.Outcome
	// Tags are the labels a Calendar policy's Tags match; optional.
	Tags func(T) []string
}

func (p GroupPolicy[T]) policies() (*GroupPolicy[T], BackupPolicy[T]) { return &p, nil }

// BackupPolicy is the policy of one backup judged alone, for a
// time-to-live field on each backup (aerospike's spec.ttl; TTLField reads
// one): the guard, which would keep every backup judged alone, is off. An
// error keeps the backup (ReasonInvalidPolicy).
type BackupPolicy[T Object] func(T) (retention.Policy, error)

func (p BackupPolicy[T]) policies() (*GroupPolicy[T], BackupPolicy[T]) { return nil, p }

// Combined is a group's policy and each backup's own together (a
// database's "the newest 7" and a backup's own spec.ttl): a backup goes
// only when both let it go. A backup without a time-to-live of its own
// (TTLField: kept for ever) is then kept whatever its group's policy says;
// have Backup return retention.TTL{} (no time: expired at once) to leave
// such a backup to its group. Both are required.
type Combined[T Object] struct {
	Group  GroupPolicy[T]
	Backup BackupPolicy[T]
}

func (p Combined[T]) policies() (*GroupPolicy[T], BackupPolicy[T]) { return &p.Group, p.Backup }

// Finalizer is the finalizer a Collector owns, and how long a deleted
// backup's data outlives its deletion.
type Finalizer[T Object] struct {
	// Name is the finalizer ("example.com/backup-data"). Required.
	Name string
	// GracePeriod is how long after its deletion timestamp a deleted
	// backup's data is kept (Gardener's deletionGracePeriod); 0 deletes at
	// once.
	GracePeriod time.Duration
	// Force reports that a deleted backup's data goes at once, without the
	// grace period (an annotation); optional.
	Force func(T) bool
	// OnGrace is called on a copy of a deleted backup in its grace period,
	// with the instant its data goes, before the condition is written: to
	// record that instant in the status; optional.
	OnGrace func(backup T, deleteAt time.Time)
	// Backstop asks the store to expire a deleted backup's data itself
	// from the end of its grace period (backupstore.ExpirePrefix: an S3
	// lifecycle rule), so that the data does not outlive its grace period
	// by more than a day or two even if no collector runs by then; the
	// rule is removed before the finalizer. Stores without a lifecycle API
	// are left to the collector.
	Backstop bool
}

// DryRun says whether a Collector only reports.
type DryRun struct {
	// Enabled: decide, list what would be deleted (Outcome.Keys) and why,
	// write nothing (but Prepare's finalizer, and what Report asks for).
	Enabled bool
	// Report, in a dry run, records what would be deleted on the backup:
	// the condition with reason Reasons.DryRun and a Normal event (and,
	// with a Finalizer, the grace period's condition). Only the status is
	// written.
	Report bool
}

// ConditionSetter is implemented by a backup type whose status has
// conditions (cluster-api's util/conditions Getter and Setter): the
// Collector sets its condition (Config.ConditionType) there. A type that
// does not implement it (an *unstructured.Unstructured) gets events only;
// assert it with var _ collect.ConditionSetter = (*v1.Backup)(nil).
type ConditionSetter interface {
	// GetConditions returns the status conditions; the Collector does not
	// modify the slice returned.
	GetConditions() []metav1.Condition
	// SetConditions replaces the status conditions.
	SetConditions([]metav1.Condition)
}

// Reasons are the condition and event reasons the Collector writes; see
// the Reason constants for their meaning and defaults.
type Reasons struct {
	Collected, SecretNotFound, InvalidCredentials, DeletionFailed, NestedPrefix,
	Retained, InvalidPolicy, InvalidLocation, GracePeriod, DryRun, NotOwner string
}

func (r Reasons) withDefaults() Reasons {
	or := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	or(&r.Collected, ReasonCollected)
	or(&r.SecretNotFound, ReasonSecretNotFound)
	or(&r.InvalidCredentials, ReasonInvalidCredentials)
	or(&r.DeletionFailed, ReasonDeletionFailed)
	or(&r.NestedPrefix, ReasonNestedPrefix)
	or(&r.Retained, ReasonRetained)
	or(&r.InvalidPolicy, ReasonInvalidPolicy)
	or(&r.InvalidLocation, ReasonInvalidLocation)
	or(&r.GracePeriod, ReasonGracePeriod)
	or(&r.DryRun, ReasonDryRun)
	or(&r.NotOwner, ReasonNotOwner)
	return r
}

// The condition type and reasons the Collector writes.
const (
	// ConditionDataDeleted is the default ConditionType.
	ConditionDataDeleted = "DataDeleted"

	// ReasonCollected (Normal event): the data was deleted, then the
	// resource (or its finalizer removed). Also the condition True, with
	// a Warning event, on a backup without a finalizer whose data was
	// deleted and whose resource changed before its deletion: it is kept
	// (decided again), and says that its data is gone.
	ReasonCollected = "BackupCollected"
	// ReasonSecretNotFound: the credentials Secret does not exist; nothing
	// was deleted.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonInvalidCredentials: the Secret lacks a key the store needs.
	ReasonInvalidCredentials = "InvalidCredentials"
	// ReasonDeletionFailed: the store could not be opened or reached, or
	// refused or failed the deletion; some data may be left.
	ReasonDeletionFailed = "DeletionFailed"
	// ReasonNestedPrefix: another backup's data prefix in the same bucket
	// lies inside this one's, or this one's inside it: deleting this data
	// would delete some of the other's. Kept until a person moves one.
	ReasonNestedPrefix = "NestedPrefix"
	// ReasonNotOwner: the location names an owner (Location.Owner) and
	// the marker under its prefix names another, or none, or the prefix
	// holds objects and no marker: the data is not proven the backup's,
	// and nothing was deleted. Kept until a person sees whose it is.
	ReasonNotOwner = "NotOwner"
	// ReasonRetained: the store keeps some of the data under S3 Object
	// Lock; the rest was deleted, and the backup is collected when the
	// retention ends.
	ReasonRetained = "Retained"
	// ReasonInvalidPolicy (event only): the backup's policy, time or
	// outcome cannot be read; it is kept.
	ReasonInvalidPolicy = "InvalidPolicy"
	// ReasonInvalidLocation: the backup's location cannot be read.
	ReasonInvalidLocation = "InvalidLocation"
	// ReasonGracePeriod (Normal, with a Finalizer): the deleted backup's
	// data is kept until its grace period ends.
	ReasonGracePeriod = "GracePeriod"
	// ReasonDryRun (Normal, with DryRun.Report): what a dry run would
	// delete.
	ReasonDryRun = "DryRun"
)

// Outcome is what a pass or Finalize did (in a dry run: would do) with one
// backup it found deletable.
type Outcome struct {
	// Name is the backup's name.
	Name string
	// Deleted: the data is gone, then the resource (or its finalizer); in
	// a dry run, would be.
	Deleted bool
	// Reason is the condition reason when the backup was kept (Deleted
	// false); empty when it was left for the next pass to decide.
	Reason string
	// Message says what happened, for people.
	Message string
	// Keys are, in a dry run, exactly the keys that would be deleted.
	Keys []string
	// RetryAt is when the next attempt is due, for a kept backup.
	RetryAt time.Time
}

// Kept is a backup the policy keeps, and why.
type Kept struct {
	Name string
	// Why is retention's reasons ("ttl", "newest+guard"), or "outcome
	// unknown" for a backup left out of its group's evaluation.
	Why string
	// Until is when it becomes deletable by time alone; zero: not by time.
	Until time.Time
}

// Report is the result of one pass.
type Report struct {
	Now time.Time
	// Backups are the deletable backups and what became of them, by name.
	Backups []Outcome
	// Kept are the backups the policy keeps, by name.
	Kept []Kept
	// RequeueAfter is when the next pass is due by time alone (a backup
	// expires, a failed deletion is retried); 0 if never.
	RequeueAfter time.Duration
}

// Collector collects the backups of one resource type. It is safe for use
// by several goroutines; a controller runs one pass at a time per
// namespace.
type Collector[T Object] struct {
	cfg Config[T]
	// group and each are cfg.Keep's policies; nil where it has none.
	group *GroupPolicy[T]
	each  BackupPolicy[T]
	// fin is cfg.Finalizer; the zero value (Name "") without one.
	fin Finalizer[T]
	mu  sync.Mutex
	// notBefore holds, per backup UID, when its next attempt is due after
	// a failure, so that the passes other changes trigger do not hammer a
	// store that is down.
	notBefore map[types.UID]retry
}

type retry struct {
	namespace string
	at        time.Time
}

// New validates cfg and returns its Collector. It refuses a GroupPolicy
// without an Outcome mapping: see the package doc, "Unknown outcomes".
func New[T Object](cfg Config[T]) (*Collector[T], error) {
	c := &Collector[T]{notBefore: map[types.UID]retry{}}
	if cfg.Keep != nil {
		c.group, c.each = cfg.Keep.policies()
	}
	if cfg.Finalizer != nil {
		c.fin = *cfg.Finalizer
	}
	_, combined := cfg.Keep.(Combined[T])
	switch {
	case cfg.Objects == nil:
		return nil, fmt.Errorf("%w: Config.Objects is nil", ErrInvalidConfig)
	case cfg.Secrets == nil:
		return nil, fmt.Errorf("%w: Config.Secrets is nil", ErrInvalidConfig)
	case cfg.Location == nil:
		return nil, fmt.Errorf("%w: Config.Location is nil", ErrInvalidConfig)
	case cfg.Keep == nil && cfg.Finalizer == nil:
		return nil, fmt.Errorf("%w: Config.Keep is nil and there is no Config.Finalizer: set a policy (GroupPolicy, BackupPolicy or Combined), a Finalizer, or both", ErrInvalidConfig)
	case cfg.Finalizer != nil && cfg.Finalizer.Name == "":
		return nil, fmt.Errorf("%w: Config.Finalizer.Name is empty", ErrInvalidConfig)
	case c.group != nil && c.group.Policy == nil:
		return nil, fmt.Errorf("%w: Config.Keep: GroupPolicy.Policy is nil", ErrInvalidConfig)
	case c.group != nil && c.group.Outcome == nil:
		return nil, fmt.Errorf("%w: Config.Keep: GroupPolicy.Outcome is nil: a group's policy needs each backup's outcome, or a failed newest backup would count as the one good backup the guard keeps", ErrInvalidConfig)
	case combined && c.each == nil:
		return nil, fmt.Errorf("%w: Config.Keep: Combined.Backup is nil", ErrInvalidConfig)
	case c.group == nil && c.each == nil && cfg.Keep != nil:
		return nil, fmt.Errorf("%w: Config.Keep: the BackupPolicy is nil", ErrInvalidConfig)
	case cfg.RetryAfter < 0:
		return nil, fmt.Errorf("%w: Config.RetryAfter = %s: must not be negative", ErrInvalidConfig, cfg.RetryAfter)
	case c.fin.GracePeriod < 0:
		return nil, fmt.Errorf("%w: Config.Finalizer.GracePeriod = %s: must not be negative", ErrInvalidConfig, c.fin.GracePeriod)
	}
	if cfg.Time == nil {
		cfg.Time = func(o T) time.Time { return o.GetCreationTimestamp().Time }
	}
	cfg.Reasons = cfg.Reasons.withDefaults()
	if cfg.ConditionType == "" {
		cfg.ConditionType = ConditionDataDeleted
	}
	if cfg.Recorder == nil {
		cfg.Recorder = event.Func(func(runtime.Object, string, string, string) {})
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Open == nil {
		cfg.Open = openBucket
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = 5 * time.Minute
	}
	c.cfg = cfg
	return c, nil
}

// DryRun reports whether the Collector only reports.
func (c *Collector[T]) DryRun() bool { return c.cfg.DryRun.Enabled }

func openBucket(ctx context.Context, url string, creds *backupstore.Credentials) (*blob.Bucket, func() error, error) {
	b, err := backupstore.OpenBucket(ctx, url, creds)
	if err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}

// Finalizer returns the name of the Config's Finalizer; "" without one.
func (c *Collector[T]) Finalizer() string { return c.fin.Name }
