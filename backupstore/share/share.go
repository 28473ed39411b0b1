package share

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
	"github.com/groundskeeper-io/groundskeeper/internal/event"
)

// ErrInvalidConfig is returned by New for a Config it cannot run with.
var ErrInvalidConfig = backupstore.ErrInvalidConfig

// Condition types and the reasons Share sets.
const (
	// ConditionAdmitted, on an entry whose type implements
	// collect.ConditionSetter, is True once it has a prefix in its bucket;
	// False with the reason why not.
	ConditionAdmitted = "Admitted"
	// ConditionInUse, on a bucket whose type implements
	// collect.ConditionSetter, is True while entries name it.
	ConditionInUse = "InUse"

	ReasonAdmitted        = "Admitted"
	ReasonBucketNotFound  = "BucketNotFound"
	ReasonBucketDeleting  = "BucketDeleting"
	ReasonBucketFull      = "BucketFull"
	ReasonInvalidName     = "InvalidName"
	ReasonStoreError      = "StoreError"
	ReasonEntriesExist    = "EntriesExist"
	ReasonNoEntries       = "NoEntries"
	ReasonDeletionBlocked = "DeletionBlocked"
	// ReasonBucketInUse is the event of a deleted bucket that entries
	// still name.
	ReasonBucketInUse = "BucketInUse"
	// ReasonNoPool: an entry that names no bucket has no pool to be
	// placed in (pool.Config.Pool refused it, an unknown provider), or its
	// pool cannot grow (its Grower's NewBucket refused).
	ReasonNoPool = "NoPool"
	// ReasonPrefixTaken: the entry's prefix in its bucket holds a marker
	// of another owner, or objects and no marker of the entry: another's
	// data, never admitted into.
	ReasonPrefixTaken = "PrefixTaken"
)

// DefaultMarkerKey is the marker's key under an entry's prefix when
// Config.MarkerKey is empty.
const DefaultMarkerKey = ".groundskeeper-entry"

// Config says how entries and buckets are read and written. Entries E and
// buckets B are Kubernetes objects of the caller's types.
type Config[E, B collect.Object] struct {
	// Entries and Buckets read and write the objects (crt/backups.Objects
	// over a controller-runtime manager). Their Get must read from the API
	// server, never a cache: an admission, a pool's place freed and each
	// step of a pool's bucket deletion decide on it (crt/backups.Objects
	// with mgr.GetAPIReader() as its live reader, for both). Entries.List
	// is called with the namespace "" (all namespaces).
	Entries collect.Objects[E]
	Buckets collect.Objects[B]
	// Collector finalizes deleted entries (its Finalizer is also put on
	// every entry) and opens an entry's bucket (its Location) for the
	// admission. Required, with a Finalizer.
	Collector *collect.Collector[E]
	// Bucket names the bucket object an entry is placed in. Required.
	Bucket func(E) (namespace, name string)
	// Limit is a bucket's most entries; 0 means no limit. Required.
	Limit func(B) int
	// Prefix points at the entry's status field that holds its prefix
	// once admitted ("" until then). Required.
	Prefix func(E) *string
	// MarkerKey is the key, under an admitted entry's prefix, of the
	// marker object written when the entry is admitted
	// (backupstore.WriteMarker): it names the entry's UID, the record of
	// whose the prefix is, and it makes the prefix exist before the first
	// backup, so that Quota counts the entry. Default
	// DefaultMarkerKey. Marker, if set, is the marker's content; default
	// a JSON object with the entry's namespace, name and UID.
	Marker    func(E) []byte
	MarkerKey string
	// BucketFinalizer is put on every bucket and removed from a deleted
	// bucket only once no entry names it. Required.
	BucketFinalizer string
	// Count, if set, records a bucket's counts in its status. A bucket
	// type that implements collect.ConditionSetter gets the InUse
	// condition; without either, a bucket's status is never written.
	Count func(b B, entries, admitted int)
	// Names words the messages; empty fields have neutral defaults.
	Names Names
	// Recorder records events; nil records none.
	Recorder event.Recorder
	// Clock stamps conditions; default the real clock.
	Clock clock.PassiveClock
}

// Names are the words of the messages: the kinds and fields of the
// caller's API.
type Names struct {
	Bucket      string // "BackupBucket"; default "bucket"
	Entries     string // "BackupEntries"; default "entries"
	BucketField string // "spec.bucketName"; default "bucket"
	LimitField  string // "spec.maxEntries"; default "limit"
}

// Share places entries in shared buckets and keeps the buckets while
// entries name them.
type Share[E, B collect.Object] struct {
	cfg Config[E, B]
}

// New checks cfg and returns its Share. A missing required field is an
// error that names it and wraps ErrInvalidConfig.
func New[E, B collect.Object](cfg Config[E, B]) (*Share[E, B], error) {
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"Entries", cfg.Entries != nil}, {"Buckets", cfg.Buckets != nil}, {"Collector", cfg.Collector != nil},
		{"Bucket", cfg.Bucket != nil}, {"Limit", cfg.Limit != nil}, {"Prefix", cfg.Prefix != nil},
		{"BucketFinalizer", cfg.BucketFinalizer != ""},
	} {
		if !f.ok {
			return nil, fmt.Errorf("%w: share: Config.%s is required", ErrInvalidConfig, f.name)
		}
	}
	if cfg.Collector.Finalizer() == "" {
		return nil, fmt.Errorf("%w: share: Config.Collector has no Finalizer (collect.Config.Finalizer)", ErrInvalidConfig)
	}
	if cfg.MarkerKey == "" {
		cfg.MarkerKey = DefaultMarkerKey
	}
	if err := backupstore.CheckPrefix(cfg.MarkerKey+backupstore.Separator, backupstore.PrefixRules{}); err != nil {
		return nil, fmt.Errorf("%w: share: Config.MarkerKey %q: %v", ErrInvalidConfig, cfg.MarkerKey, err)
	}
	if cfg.Marker == nil {
		cfg.Marker = func(e E) []byte {
			m, _ := json.Marshal(map[string]string{"namespace": e.GetNamespace(), "name": e.GetName(), "uid": string(e.GetUID())})
			return m
		}
	}
	if cfg.Recorder == nil {
		cfg.Recorder = event.Func(func(runtime.Object, string, string, string) {})
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	n := &cfg.Names
	n.Bucket, n.Entries = cmpOr(n.Bucket, "bucket"), cmpOr(n.Entries, "entries")
	n.BucketField, n.LimitField = cmpOr(n.BucketField, "bucket"), cmpOr(n.LimitField, "limit")
	return &Share[E, B]{cfg: cfg}, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ReconcileEntry reconciles one entry, read from a cache: a deleted entry
// is finalized (collect.Collector.Finalize); a live one gets the
// Collector's finalizer and, if it has no prefix yet, is admitted to its
// bucket if the bucket, read from the API server, is neither being
// deleted nor marked for deletion (AnnotationDeleting) and has room. It
// returns when to look again (0: when
// the entry or its bucket changes); an error is for a retry with backoff.
//
// Two admissions must not run at once for one bucket (Quota
// would admit both to the last place): run one worker, as
// crt/backups.Sharing does.
func (s *Share[E, B]) ReconcileEntry(ctx context.Context, e E) (time.Duration, error) {
	e = e.DeepCopyObject().(E)
	if e.GetDeletionTimestamp() != nil {
		_, after, err := s.cfg.Collector.Finalize(ctx, e)
		return after, err
	}
	if f := s.cfg.Collector.Finalizer(); !slices.Contains(e.GetFinalizers(), f) {
		e.SetFinalizers(append(e.GetFinalizers(), f))
		if err := s.cfg.Entries.Update(ctx, e); err != nil {
			return 0, fmt.Errorf("add finalizer: %w", err)
		}
	}
	if *s.cfg.Prefix(e) != "" {
		return 0, nil
	}
	return 0, s.admit(ctx, e)
}

// admit gives e a prefix in its bucket if the bucket has room, and records
// the outcome in the Admitted condition.
func (s *Share[E, B]) admit(ctx context.Context, e E) error {
	n := s.cfg.Names
	refuse := func(reason, msg string, err error) error { return s.refuse(ctx, e, reason, msg, err) }
	ns, name := s.cfg.Bucket(e)
	b, err := s.cfg.Buckets.Get(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return refuse(ReasonBucketNotFound, fmt.Sprintf("%s %q: no such %s", n.BucketField, name, n.Bucket), nil)
	}
	if err != nil {
		return err
	}
	if _, marked := b.GetAnnotations()[AnnotationDeleting]; marked || b.GetDeletionTimestamp() != nil {
		return refuse(ReasonBucketDeleting, fmt.Sprintf("%s %q: the %s is being deleted", n.BucketField, name, n.Bucket), nil)
	}
	prefix, err := PrefixOf(e)
	if err != nil {
		return refuse(ReasonInvalidName, err.Error(), nil)
	}
	store, _, closeStore, err := s.cfg.Collector.OpenBucket(ctx, e)
	if err != nil {
		return refuse(ReasonStoreError, err.Error(), err)
	}
	defer closeStore()
	if why, err := s.taken(ctx, store, e, prefix); err != nil {
		return refuse(ReasonStoreError, err.Error(), err)
	} else if why != "" {
		return refuse(ReasonPrefixTaken, fmt.Sprintf("prefix %q in %s %q %s: not admitted; move that data or name another %s", prefix, n.Bucket, name, why, n.Bucket), nil)
	}
	limit := s.cfg.Limit(b)
	count, err := Quota{Limit: limit}.Admit(ctx, store, strings.TrimSuffix(prefix, backupstore.Separator))
	if errors.Is(err, ErrBucketFull) {
		return refuse(ReasonBucketFull, fmt.Sprintf("%s %q holds %d entries, %s is %d: no prefix given", n.Bucket, name, count, n.LimitField, limit), nil)
	}
	if err != nil {
		return refuse(ReasonStoreError, err.Error(), err)
	}
	if owner, found, err := backupstore.MarkerOwner(ctx, store, prefix+s.cfg.MarkerKey); err != nil {
		return refuse(ReasonStoreError, err.Error(), err)
	} else if !found || owner != string(e.GetUID()) {
		err := backupstore.WriteMarker(ctx, store, prefix+s.cfg.MarkerKey, string(e.GetUID()), s.cfg.Marker(e))
		if driver.IsExists(err) {
			// Another admission wrote a marker since taken looked: the
			// next reconcile reads whose it is.
			return refuse(ReasonPrefixTaken, fmt.Sprintf("prefix %q in %s %q: a marker was written there meanwhile: not admitted", prefix, n.Bucket, name), err)
		}
		if err != nil {
			return refuse(ReasonStoreError, fmt.Sprintf("write %s: %v", prefix+s.cfg.MarkerKey, err), err)
		}
	}
	*s.cfg.Prefix(e) = prefix
	msg := fmt.Sprintf("prefix %q in %s %q", prefix, n.Bucket, name)
	changed, err := s.setCondition(ctx, e, metav1.ConditionTrue, ReasonAdmitted, msg)
	if err != nil {
		return err // admitted again, idempotently, on the retry
	}
	if changed {
		s.cfg.Recorder.Event(e, corev1.EventTypeNormal, ReasonAdmitted, msg)
		logr.FromContextOrDiscard(ctx).Info("admitted", "prefix", prefix, "bucket", name)
	}
	return nil
}

// taken says why prefix in store is not e's to be admitted into, "" when
// it is: its marker names another owner (or none), or it holds objects and
// no marker. A marker of e's own is an admission whose status write was
// lost, admitted again.
func (s *Share[E, B]) taken(ctx context.Context, store *blob.Bucket, e E, prefix string) (string, error) {
	owner, found, err := backupstore.MarkerOwner(ctx, store, prefix+s.cfg.MarkerKey)
	switch {
	case err != nil:
		return "", err
	case found && owner == string(e.GetUID()):
		return "", nil
	case found && owner == "":
		return "holds a marker " + s.cfg.MarkerKey + " that names no owner", nil
	case found:
		return fmt.Sprintf("holds the marker of another owner (UID %s)", owner), nil
	}
	empty, err := backupstore.Empty(ctx, store, prefix)
	if err != nil || empty {
		return "", err
	}
	return "holds objects and no marker " + s.cfg.MarkerKey + " of this entry", nil
}

// PrefixOf is the prefix an entry is given in its bucket, derived from its
// whole identity: "<namespace>.<name>/" for a namespaced entry (a namespace
// has no dot, so no two identities meet), "<name>/" for a cluster-scoped
// one. Two namespaces' entries of one name never share a prefix.
func PrefixOf(e metav1.Object) (string, error) {
	entry := e.GetName()
	if ns := e.GetNamespace(); ns != "" {
		if strings.Contains(ns, ".") {
			return "", fmt.Errorf("namespace %q of entry %q: a namespace has no dot", ns, entry)
		}
		entry = ns + "." + entry
	}
	return EntryPrefix("", entry)
}

// Config is the Config s runs with, its defaults set: a placer in front
// of s (pool.Pool) reads the entries, the buckets and their limits with it.
func (s *Share[E, B]) Config() Config[E, B] { return s.cfg }

// Refuse records on e why it is not admitted (Admitted=False with reason
// and msg; a Warning event when the condition changes) and returns err
// joined with a failed status write: a placer in front of s (pool.Pool)
// refuses an entry it cannot place with it.
func (s *Share[E, B]) Refuse(ctx context.Context, e E, reason, msg string, err error) error {
	return s.refuse(ctx, e, reason, msg, err)
}

// refuse is Refuse.
func (s *Share[E, B]) refuse(ctx context.Context, e E, reason, msg string, err error) error {
	changed, werr := s.setCondition(ctx, e, metav1.ConditionFalse, reason, msg)
	if changed {
		s.cfg.Recorder.Event(e, corev1.EventTypeWarning, reason, msg)
		logr.FromContextOrDiscard(ctx).Info("not admitted", "reason", reason, "message", msg)
	}
	return errors.Join(err, werr)
}

// setCondition sets the Admitted condition and writes the status if it
// changed. It reports whether the condition's status or reason changed,
// the moments worth an event. A failed write (a conflict with a newer
// entry) is returned for a retry: the status write does not requeue.
func (s *Share[E, B]) setCondition(ctx context.Context, e E, status metav1.ConditionStatus, reason, msg string) (bool, error) {
	before := e.DeepCopyObject().(E)
	// Without a ConditionSetter there is no condition to tell a
	// transition by: every call is one (events only, as collect's).
	transition, changed := true, false
	cs, hasConds := any(e).(collect.ConditionSetter)
	if hasConds {
		prev := meta.FindStatusCondition(cs.GetConditions(), ConditionAdmitted)
		transition = prev == nil || prev.Status != status || prev.Reason != reason
		conds := slices.Clone(cs.GetConditions())
		changed = meta.SetStatusCondition(&conds, metav1.Condition{
			Type: ConditionAdmitted, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: e.GetGeneration(), LastTransitionTime: metav1.NewTime(s.cfg.Clock.Now()),
		})
		if changed {
			cs.SetConditions(conds)
		}
	}
	if !changed && *s.cfg.Prefix(e) == *s.cfg.Prefix(before) {
		return !hasConds, nil
	}
	if err := s.cfg.Entries.UpdateStatus(ctx, e); err != nil {
		if hasConds {
			cs.SetConditions(any(before).(collect.ConditionSetter).GetConditions())
		}
		*s.cfg.Prefix(e) = *s.cfg.Prefix(before)
		return false, fmt.Errorf("update status (%s %s): %w", ConditionAdmitted, reason, err)
	}
	return transition, nil
}

// ReconcileBucket reconciles one bucket, read from a cache: it puts the
// BucketFinalizer on a live bucket, removes it from a deleted bucket only
// once no entry names it (with the resourceVersion read), and records the
// counts and the InUse condition. A deleted bucket that entries still
// name gets a BucketInUse event when its condition changes.
func (s *Share[E, B]) ReconcileBucket(ctx context.Context, b B) (time.Duration, error) {
	b = b.DeepCopyObject().(B)
	all, err := s.cfg.Entries.List(ctx, "")
	if err != nil {
		return 0, err
	}
	var names []string
	admitted := 0
	for _, e := range all {
		if !s.names(e, b) {
			continue
		}
		names = append(names, e.GetName())
		if *s.cfg.Prefix(e) != "" {
			admitted++
		}
	}
	slices.Sort(names)

	f := s.cfg.BucketFinalizer
	if b.GetDeletionTimestamp() != nil {
		if !slices.Contains(b.GetFinalizers(), f) {
			return 0, nil
		}
		if len(names) == 0 {
			b.SetFinalizers(slices.DeleteFunc(b.GetFinalizers(), func(x string) bool { return x == f }))
			if err := s.cfg.Buckets.Update(ctx, b); err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("remove finalizer: %w", err)
			}
			logr.FromContextOrDiscard(ctx).Info("finalizer removed", "why", "no entry names the bucket")
			return 0, nil
		}
	} else if !slices.Contains(b.GetFinalizers(), f) {
		b.SetFinalizers(append(b.GetFinalizers(), f))
		if err := s.cfg.Buckets.Update(ctx, b); err != nil {
			return 0, fmt.Errorf("add finalizer: %w", err)
		}
	}
	bcs, hasConds := any(b).(collect.ConditionSetter)
	if !hasConds && s.cfg.Count == nil {
		return 0, nil
	}
	before := b.DeepCopyObject().(B)
	if s.cfg.Count != nil {
		s.cfg.Count(b, len(names), admitted)
	}
	changed := false
	if hasConds {
		inUse := metav1.Condition{Type: ConditionInUse, Status: metav1.ConditionFalse, Reason: ReasonNoEntries,
			Message: "no " + s.cfg.Names.Entries + " name the bucket", ObservedGeneration: b.GetGeneration(), LastTransitionTime: metav1.NewTime(s.cfg.Clock.Now())}
		if len(names) > 0 {
			inUse.Status, inUse.Reason = metav1.ConditionTrue, ReasonEntriesExist
			inUse.Message = fmt.Sprintf("%d %s name the bucket: %s", len(names), s.cfg.Names.Entries, strings.Join(names, ", "))
			if b.GetDeletionTimestamp() != nil {
				inUse.Reason = ReasonDeletionBlocked
			}
		}
		conds := slices.Clone(bcs.GetConditions())
		if changed = meta.SetStatusCondition(&conds, inUse); changed {
			bcs.SetConditions(conds)
		}
		if changed && b.GetDeletionTimestamp() != nil {
			s.cfg.Recorder.Event(b, corev1.EventTypeWarning, ReasonBucketInUse, "deletion waits: "+inUse.Message)
		}
	}
	if !changed && equality.Semantic.DeepEqual(before, b) {
		return 0, nil
	}
	if err := s.cfg.Buckets.UpdateStatus(ctx, b); err != nil {
		return 0, fmt.Errorf("update status: %w", err)
	}
	return 0, nil
}

// names reports whether entry e names bucket b.
func (s *Share[E, B]) names(e E, b B) bool {
	ns, name := s.cfg.Bucket(e)
	return ns == b.GetNamespace() && name == b.GetName()
}

// Waiting lists the entries that wait for a place in bucket b (no
// prefix, not deleted), if b is not being deleted (nor marked for it,
// AnnotationDeleting) and has room now by the admitted entries listed:
// a controller reconciles them again when b changes, which it does when an
// entry frees a place (ReconcileBucket counts the entries).
func (s *Share[E, B]) Waiting(ctx context.Context, b B) ([]E, error) {
	if _, marked := b.GetAnnotations()[AnnotationDeleting]; marked || b.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	all, err := s.cfg.Entries.List(ctx, "")
	if err != nil {
		return nil, err
	}
	var waiting []E
	admitted := 0
	for _, e := range all {
		switch {
		case !s.names(e, b):
		case *s.cfg.Prefix(e) != "":
			admitted++
		case e.GetDeletionTimestamp() == nil:
			waiting = append(waiting, e)
		}
	}
	if limit := s.cfg.Limit(b); limit > 0 && admitted >= limit {
		return nil, nil
	}
	return waiting, nil
}

// BucketOf names the bucket that entry e names (Config.Bucket).
func (s *Share[E, B]) BucketOf(e E) (namespace, name string) { return s.cfg.Bucket(e) }

// Reconciler is what crt/backups.Sharing runs: a Share, or a pool.Pool
// over one (and a migrate.Controller over either).
type Reconciler[E, B collect.Object] interface {
	ReconcileEntry(ctx context.Context, e E) (time.Duration, error)
	ReconcileBucket(ctx context.Context, b B) (time.Duration, error)
	Waiting(ctx context.Context, b B) ([]E, error)
	BucketOf(e E) (namespace, name string)
}

var _ Reconciler[collect.Object, collect.Object] = (*Share[collect.Object, collect.Object])(nil)

// AnnotationDeleting marks a bucket whose deletion a pool.Pool has
// decided (RFC 3339, UTC): the pool takes no place in it and Share
// admits no entry to it. It is removed, and the deletion given up,
// when the bucket turns out to be in use before its object is deleted.
const AnnotationDeleting = "backupstore.groundskeeper.io/deleting"
