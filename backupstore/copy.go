package backupstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"gocloud.dev/blob"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// ErrTargetDiffers is a copy's refusal to write over an object of the
// target that holds other content (another size or checksum) than the
// source object of its key: CopyBackups never writes over data in the
// target. The key stays uncopied (StatusNone) and is named in the
// *CopyError's Failed keys, until a person moves one of the two.
var ErrTargetDiffers = errclass.Retryable("backupstore: the target holds other content at the key")

// Status is the state of one object in a copy Manifest, as in Gardener's
// backup migration.
type Status string

const (
	// StatusNone: not copied yet.
	StatusNone Status = "None"
	// StatusCopied: present in the target with the source's size and
	// checksum, copied by this or an earlier run.
	StatusCopied Status = "Copied"
	// StatusNotFound: listed in the source but gone when it was to be read.
	StatusNotFound Status = "NotFound"
)

// ManifestEntry is one source object of a copy.
type ManifestEntry struct {
	// Key is the source key; the target key is the key with
	// CopyOptions.SourcePrefix replaced by CopyOptions.TargetPrefix.
	Key  string `json:"key"`
	Size int64  `json:"size"`
	// MD5 is the source's MD5 in hex, empty when the source gives none.
	MD5 string `json:"md5,omitempty"`
	// ModTime is the source's modification time.
	ModTime time.Time `json:"modTime"`
	Status  Status    `json:"status"`
}

// Manifest lists the objects a copy selected and the status of each. It is
// stored as JSON at CopyOptions.ManifestKey in the target bucket, so that a
// copy that was interrupted continues where it stopped.
type Manifest struct {
	SourcePrefix string          `json:"sourcePrefix"`
	TargetPrefix string          `json:"targetPrefix"`
	Entries      []ManifestEntry `json:"entries"`
}

// Count returns the number of entries with status s.
func (m *Manifest) Count(s Status) int {
	n := 0
	for _, e := range m.Entries {
		if e.Status == s {
			n++
		}
	}
	return n
}

// CopyOptions configure CopyBackups. nil means the defaults.
type CopyOptions struct {
	// SourcePrefix selects the source objects; TargetPrefix replaces it in
	// the target keys. Each is empty or passes CheckPrefix (so it ends in
	// Separator): CopyBackups refuses anything else, which would also
	// select, or write over, the keys of siblings. Where a bucket has a
	// prefix of its own that the store's listing request or OpenBucket
	// shows, that prefix followed by SourcePrefix (TargetPrefix) is
	// checked the same way, as DeletePrefix does.
	SourcePrefix, TargetPrefix string
	// MaxBackupAge, when positive, copies only backups younger than it
	// (etcd-druid's maxBackupAge; convert days with retention.Days).
	MaxBackupAge time.Duration
	// MaxBackups, when positive, copies only the newest MaxBackups backups
	// (etcd-druid's maxBackups). Both filters apply together.
	MaxBackups int
	// Backup says which backup an object belongs to and when that backup was
	// taken. The default makes every object its own backup, taken at the
	// object's modification time. Filters count backups, not objects, and
	// copy all objects of a selected backup.
	Backup func(key string, modTime time.Time) (id string, taken time.Time)
	// Concurrency bounds the objects copied at once, at most
	// MaxConcurrency. Default (0): 8. Goroutines are started as objects
	// are copied, never more than there are objects to copy.
	Concurrency int
	// ManifestKey, when set, is where the manifest is kept in the target
	// bucket: read at the start, written before copying and every 100
	// objects, and at the end, with MetadataManifest. A manifest is never
	// copied, compared or counted as a backup, whatever its key: an object
	// in the source that carries MetadataManifest, or is JSON
	// (application/json) holding a Manifest and nothing else (the
	// manifest of an earlier copy into it, such as A to B before B to C),
	// is not selected. CopyBackups refuses to start when a backup would be
	// written at ManifestKey in the target, or when the manifest found
	// there belongs to a copy with other prefixes.
	ManifestKey string
	// DryRun selects the backups and compares them with the target, and
	// writes nothing, not even the manifest: the result's Manifest entries
	// with StatusNone are what a copy would write, but for those whose
	// target keys hold other content now, which Overwrites names (a copy
	// refuses them: ErrTargetDiffers).
	DryRun bool
	// Retry configures the retries of transient errors.
	Retry Retry
	// Progress, when set, is called with the running totals after every
	// object. Calls come from one goroutine, in order, and all return
	// before CopyBackups does; no lock is held during a call, so a slow
	// callback never stalls the copy workers, it only falls behind (the
	// copy may be further along than the totals a call sees).
	Progress func(CopyProgress)
	// Clock gives the current time for MaxBackupAge and times retries.
	// Default clock.RealClock{}.
	Clock clock.WithTicker
}

// CopyProgress are the running totals of a CopyBackups call.
type CopyProgress struct {
	// Selected objects; Copied now, Skipped because already present,
	// NotFound in the source, Failed for good.
	Selected, Copied, Skipped, NotFound, Failed int
	// Bytes copied.
	Bytes int64
}

// CopyResult says what CopyBackups did.
type CopyResult struct {
	CopyProgress
	// Excluded counts the source objects the filters left out. Manifests
	// found in the source are not backups and are not counted.
	Excluded int
	// Manifest is the final manifest.
	Manifest *Manifest
	// FailedKeys are the keys that could not be copied, with the reason.
	FailedKeys []KeyError
	// Overwrites are the target keys that held other content (another
	// size or checksum) than their source objects when the copy compared
	// them: the copy does not write over them (each is in FailedKeys with
	// ErrTargetDiffers), nor would a dry run's.
	Overwrites []string
}

// CopyError is returned when some objects were not copied. Rerunning
// CopyBackups copies only them. It unwraps to ErrIncomplete, to
// ErrTargetDiffers when a key was not copied because the target holds other
// content there (which a rerun does not change), and to the cause that
// stopped the run, if any.
type CopyError struct {
	Failed []KeyError
	Err    error
}

func (e *CopyError) Error() string {
	return incomplete("backupstore: copy incomplete", e.Err, e.Failed, 0)
}

// Terminal reports false: the error is retried, or judged by the error
// it wraps (crt.Terminal).
func (*CopyError) Terminal() bool { return false }

// Unwrap returns ErrIncomplete, ErrTargetDiffers if a failed key's error is
// one, and Err.
func (e *CopyError) Unwrap() []error {
	errs := []error{ErrIncomplete}
	if slices.ContainsFunc(e.Failed, func(k KeyError) bool { return errors.Is(k.Err, ErrTargetDiffers) }) {
		errs = append(errs, ErrTargetDiffers)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Metadata keys written on every copied object.
const (
	// MetadataSourceModTime holds the source object's modification time
	// (RFC 3339, nanoseconds): the fallback identity check where a store
	// gives no MD5.
	MetadataSourceModTime = "backupstore-source-modtime"
	// MetadataManifest marks a copy manifest: CopyBackups writes it on
	// every manifest, and never selects an object that carries it as a
	// backup, whatever its key.
	MetadataManifest = "backupstore-manifest"
)

// manifestFormat is the value of MetadataManifest: the manifest's format.
const manifestFormat = "v1"

// CopyBackups copies the backups under opts.SourcePrefix in src to
// opts.TargetPrefix in dst, any store to any store, streaming each object
// (memory per object in flight is bounded by the target driver's upload
// buffer, not by the object's size), several at once.
//
// The filters MaxBackupAge and MaxBackups select backups with the retention
// package: All{TTL{After: MaxBackupAge}, Newest{N: MaxBackups}}.
//
// An object already in the target is not copied again when it has the same
// size and the same MD5 as the source (taken from the listing, or from the
// object's attributes where the listing has none, at one request per
// object). Where either side has no MD5 at all (S3 multipart uploads, Azure
// blobs uploaded in blocks without Content-MD5), the fallback is: same size, and the
// target's metadata MetadataSourceModTime equals the source's modification
// time, which CopyBackups writes on every object it copies. Objects are
// written with the source's MD5 as gocloud's ContentMD5 when there is one, so
// a corrupted transfer fails instead of landing.
//
// A source and a target that are one bucket, with one prefix under the
// other, are refused with an error that is ErrInvalidConfig and names
// both, before anything is read: one bucket is the same *blob.Bucket, or
// two that OpenBucket opened with URLs of one identity (SameBucket), their
// prefix= counted (Overlap). Buckets opened otherwise cannot be compared.
//
// Nothing in the target is written over: an object there that holds other
// content than its source (another size, another MD5 or, without MD5s, no
// matching MetadataSourceModTime) is not copied, and its key is a failure
// of the *CopyError that is ErrTargetDiffers (CopyResult.Overwrites names
// them all); every write is conditional (blob.WriterOptions.IfNotExist,
// If-None-Match on S3), so an object that appears at a key after the
// target was listed is not written over either: it is compared with the
// source then, and either counts as copied or fails the same way.
//
// A source object that vanishes before it is read is marked NotFound and is
// not an error. Failures are retried when transient and otherwise reported
// in a *CopyError naming the keys; the manifest records every other
// object's status, and a rerun copies only what is missing.
func CopyBackups(ctx context.Context, src, dst *blob.Bucket, opts *CopyOptions) (*CopyResult, error) {
	if opts == nil {
		opts = &CopyOptions{}
	}
	if err := checkCopyOptions(opts); err != nil {
		return nil, err
	}
	if err := checkOverlap(src, dst, opts.SourcePrefix, opts.TargetPrefix); err != nil {
		return nil, err
	}
	c := &copier{src: src, dst: dst, opts: opts, retry: opts.Retry.withDefaults(), clock: opts.Clock,
		log: logr.FromContextOrDiscard(ctx).WithValues("sourcePrefix", opts.SourcePrefix, "targetPrefix", opts.TargetPrefix)}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	res := &CopyResult{}
	c.res = res
	c.progress = newNotifier(opts.Progress)
	defer c.progress.close()

	// The plan, from fresh listings: the manifest, every selected object
	// Copied where the target has it. A dry run returns it.
	srcObjs, selected, err := c.selectSource(ctx)
	if err != nil {
		return res, err
	}
	present, prev, err := c.readTarget(ctx)
	if err != nil {
		return res, err
	}
	if err := c.plan(ctx, srcObjs, selected, present, prev); err != nil {
		return res, err
	}
	if opts.DryRun {
		return res, nil
	}
	if err := c.saveManifest(ctx); err != nil {
		return res, &CopyError{Err: err}
	}
	c.copyMissing(ctx)
	c.dropSourceManifests()
	saveErr := c.saveManifest(context.WithoutCancel(ctx))
	if len(res.FailedKeys) > 0 || ctx.Err() != nil || saveErr != nil {
		return res, &CopyError{Failed: res.FailedKeys, Err: errors.Join(ctx.Err(), saveErr)}
	}
	c.log.V(1).Info("copied backups", "copied", res.Copied, "skipped", res.Skipped, "notFound", res.NotFound, "excluded", res.Excluded)
	return res, nil
}

// checkCopyOptions refuses the options CopyBackups cannot use, naming the
// field and its value.
func checkCopyOptions(opts *CopyOptions) error {
	if opts.MaxBackupAge < 0 {
		return fmt.Errorf("%w: CopyOptions.MaxBackupAge = %v: must not be negative", ErrInvalidConfig, opts.MaxBackupAge)
	}
	if opts.MaxBackups < 0 {
		return fmt.Errorf("%w: CopyOptions.MaxBackups = %d: must not be negative", ErrInvalidConfig, opts.MaxBackups)
	}
	if err := checkConcurrency("CopyOptions.Concurrency", opts.Concurrency); err != nil {
		return err
	}
	// A prefix that does not end in Separator selects (SourcePrefix) or
	// writes over (TargetPrefix) the keys of siblings sharing its leading
	// characters: "tenant-a" + "b/x" is tenant-ab's "tenant-ab/x".
	for _, p := range []struct{ field, value string }{{"SourcePrefix", opts.SourcePrefix}, {"TargetPrefix", opts.TargetPrefix}} {
		if err := CheckPrefix(p.value, PrefixRules{AllowEmpty: true}); err != nil {
			return fmt.Errorf("backupstore: copy: %s: %w", p.field, err)
		}
	}
	return nil
}

// selectSource lists what the source holds and returns it with what the
// filters select of it. A manifest in the source (an earlier copy into it,
// A to B before B to C, whatever its key) is not a backup: it is never
// selected.
func (c *copier) selectSource(ctx context.Context) (srcObjs, selected []*blob.ListObject, err error) {
	opts, res := c.opts, c.res
	srcObjs, err = c.listAll(ctx, c.src, opts.SourcePrefix, opts.ManifestKey, "SourcePrefix")
	if pe := (*PrefixError)(nil); errors.As(err, &pe) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, &CopyError{Err: fmt.Errorf("list source: %w", err)}
	}
	// Without filters, a source whose reads bring the metadata (S3) has
	// its manifests recognised as they are read, which saves a request an
	// object; only the objects that are not read (already in the target)
	// are asked beforehand.
	_, readsMetadata := c.srcRemover.(driver.MetadataReader)
	c.deferManifests = readsMetadata && !opts.DryRun && opts.MaxBackups == 0 && opts.MaxBackupAge == 0
	selected, manifests := srcObjs, 0
	if !c.deferManifests {
		if selected, manifests, err = c.selectBackups(ctx, srcObjs); err != nil {
			return nil, nil, err
		}
	}
	res.Excluded = len(srcObjs) - manifests - len(selected)
	if opts.ManifestKey == "" {
		return srcObjs, selected, nil
	}
	for i := 0; i < len(selected); i++ {
		o := selected[i]
		if c.targetKey(o.Key) != opts.ManifestKey {
			continue
		}
		if c.deferManifests {
			isManifest, err := c.isManifest(ctx, c.src, o)
			if err != nil {
				return nil, nil, &CopyError{Err: fmt.Errorf("source: %w", err)}
			}
			if isManifest {
				selected = slices.Delete(slices.Clone(selected), i, i+1)
				i--
				continue
			}
		}
		return nil, nil, fmt.Errorf("%w: source object %q is a backup, and its target key is ManifestKey = %q: the copy would write it over its own manifest", ErrInvalidConfig, o.Key, opts.ManifestKey)
	}
	return srcObjs, selected, nil
}

// readTarget returns what the target holds, by key, and the manifest an
// earlier run recorded (nil: none). A manifest of another copy is refused.
func (c *copier) readTarget(ctx context.Context) (map[string]*blob.ListObject, *Manifest, error) {
	opts := c.opts
	dstObjs, err := c.listAll(ctx, c.dst, opts.TargetPrefix, opts.ManifestKey, "TargetPrefix")
	if pe := (*PrefixError)(nil); errors.As(err, &pe) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, &CopyError{Err: fmt.Errorf("list target: %w", err)}
	}
	present := make(map[string]*blob.ListObject, len(dstObjs))
	for _, o := range dstObjs {
		present[o.Key] = o
	}
	prev, err := c.loadManifest(ctx)
	if err != nil {
		return nil, nil, &CopyError{Err: err}
	}
	if prev != nil && (prev.SourcePrefix != opts.SourcePrefix || prev.TargetPrefix != opts.TargetPrefix) {
		// Resuming from it would record objects of another copy; writing
		// over it would lose that copy's record.
		return nil, nil, fmt.Errorf("%w: the manifest at ManifestKey = %q belongs to a copy from SourcePrefix = %q to TargetPrefix = %q, not from %q to %q: choose another ManifestKey",
			ErrInvalidConfig, opts.ManifestKey, prev.SourcePrefix, prev.TargetPrefix, opts.SourcePrefix, opts.TargetPrefix)
	}
	return present, prev, nil
}

// plan writes the manifest (c.manifest, CopyResult.Manifest): every
// selected object, Copied where the target has it, and what an earlier run
// recorded of the objects this run does not select.
func (c *copier) plan(ctx context.Context, srcObjs, selected []*blob.ListObject, present map[string]*blob.ListObject, prev *Manifest) error {
	res := c.res
	m := &Manifest{SourcePrefix: c.opts.SourcePrefix, TargetPrefix: c.opts.TargetPrefix}
	inSource := make(map[string]bool, len(selected))
	for _, o := range selected {
		inSource[o.Key] = true
		e := ManifestEntry{Key: o.Key, Size: o.Size, ModTime: o.ModTime, Status: StatusNone}
		if _, all := c.srcRemover.(driver.MD5Lister); len(o.MD5) == 0 && !all {
			// Some listings leave the MD5 out where the object has one
			// (fileblob's does).
			var err error
			if o.MD5, err = c.md5(ctx, c.src, o.Key); err != nil {
				return &CopyError{Err: err}
			}
		}
		if len(o.MD5) > 0 {
			e.MD5 = hex.EncodeToString(o.MD5)
		}
		there := present[c.targetKey(o.Key)]
		same, err := c.samePresent(ctx, o, there)
		if err != nil {
			return &CopyError{Err: err}
		}
		if (same || there != nil) && c.deferManifests {
			// Not read by this copy (there already, or not written
			// over): asked now.
			isManifest, err := c.isManifest(ctx, c.src, o)
			if err != nil {
				return &CopyError{Err: fmt.Errorf("source: %w", err)}
			}
			if isManifest {
				delete(inSource, o.Key)
				selected = slices.DeleteFunc(slices.Clone(selected), func(s *blob.ListObject) bool { return s == o })
				continue
			}
		}
		if same {
			e.Status = StatusCopied
			res.Skipped++
		} else if there != nil {
			res.Overwrites = append(res.Overwrites, c.targetKey(o.Key))
		}
		m.Entries = append(m.Entries, e)
	}
	m.Entries = append(m.Entries, carriedOver(prev, inSource, srcObjs)...)
	slices.SortFunc(m.Entries, func(a, b ManifestEntry) int { return strings.Compare(a.Key, b.Key) })
	c.manifest = m
	res.Manifest = m
	res.Selected = len(selected)
	res.NotFound = m.Count(StatusNotFound)
	return nil
}

// carriedOver returns the entries of an earlier run's manifest for objects
// this run does not select: those that have left the source since, and
// those the filters now exclude. Only what is known is recorded: NotFound
// only for an object gone from the source; an excluded object that was not
// copied leaves the manifest.
func carriedOver(prev *Manifest, inSource map[string]bool, srcObjs []*blob.ListObject) []ManifestEntry {
	if prev == nil {
		return nil
	}
	listed := make(map[string]bool, len(srcObjs))
	for _, o := range srcObjs {
		listed[o.Key] = true
	}
	var out []ManifestEntry
	for _, e := range prev.Entries {
		if inSource[e.Key] {
			continue
		}
		if listed[e.Key] && e.Status != StatusCopied {
			continue
		}
		if e.Status == StatusNone {
			e.Status = StatusNotFound
		}
		out = append(out, e)
	}
	return out
}

// copyMissing copies the manifest's entries that are not Copied, several
// at once, but never over another content: a target key that holds other
// content fails with ErrTargetDiffers.
func (c *copier) copyMissing(ctx context.Context) {
	m, res := c.manifest, c.res
	differs := make(map[string]bool, len(res.Overwrites))
	for _, k := range res.Overwrites {
		differs[k] = true
	}
	var todo []int
	for i, e := range m.Entries {
		switch {
		case e.Status != StatusNone:
		case differs[c.targetKey(e.Key)]:
			c.finish(ctx, i, StatusNone, 0, c.differs(c.targetKey(e.Key)))
		default:
			todo = append(todo, i)
		}
	}
	errs := driver.ForEach(ctx, len(todo), c.concurrency(), func(j int) error {
		i := todo[j]
		status, size, err := c.copyOne(ctx, m.Entries[i])
		c.finish(ctx, i, status, size, err)
		return err
	})
	for j, err := range errs {
		if err != nil && !slices.ContainsFunc(res.FailedKeys, func(f KeyError) bool { return f.Key == m.Entries[todo[j]].Key }) {
			// Not started because the context ended.
			res.FailedKeys = append(res.FailedKeys, KeyError{Key: m.Entries[todo[j]].Key, Err: err})
			res.CopyProgress.Failed++
		}
	}
}

// dropSourceManifests removes the source's manifests found while copying
// from the manifest and the counts: they are not backups.
func (c *copier) dropSourceManifests() {
	if len(c.manifests) == 0 {
		return
	}
	m, res := c.manifest, c.res
	c.mu.Lock()
	defer c.mu.Unlock()
	drop := make(map[int]bool, len(c.manifests))
	for _, i := range c.manifests {
		drop[i] = true
		res.Overwrites = slices.DeleteFunc(res.Overwrites, func(k string) bool { return k == c.targetKey(m.Entries[i].Key) })
	}
	kept := m.Entries[:0:0]
	for i, e := range m.Entries {
		if !drop[i] {
			kept = append(kept, e)
		}
	}
	m.Entries = kept
	res.Selected -= len(drop)
}

type copier struct {
	src, dst *blob.Bucket
	opts     *CopyOptions
	retry    Retry
	clock    clock.WithTicker
	log      logr.Logger

	// dstRemover listed the target: it knows the bucket and its prefix
	// in the store's spelling, and may write objects (driver.Putter).
	// srcRemover listed the source.
	dstRemover, srcRemover driver.Remover
	// deferManifests: the source's manifests are recognised as they are
	// read (stream), and manifests holds the indexes of the entries found
	// to be one, which leave the manifest at the end.
	deferManifests bool
	manifests      []int

	mu       sync.Mutex // guards manifest, res, done
	manifest *Manifest
	res      *CopyResult
	done     int
	saveMu   sync.Mutex
	progress *notifier[CopyProgress]
}

func (c *copier) targetKey(key string) string {
	return c.opts.TargetPrefix + strings.TrimPrefix(key, c.opts.SourcePrefix)
}

// transientPresent is transient, except for NotFound: a copy treats a
// missing object as gone, not as a fault to wait out.
func transientPresent(ctx context.Context, err error) bool {
	return transient(ctx, err) && !notFound(err)
}

// listAll lists every object under prefix in b but skip. The first
// listing request tells the prefix the store lists, the bucket's own
// (blob.PrefixedBucket, prefix= in a URL) followed by prefix: it is checked
// as DeletePrefix checks it (field names the option in the error), so that
// a bucket opened with prefix=tenant-a neither copies nor writes over
// tenant-ab's keys.
func (c *copier) listAll(ctx context.Context, b *blob.Bucket, prefix, skip, field string) ([]*blob.ListObject, error) {
	rm, err := removerFor(b, &DeleteOptions{})
	if err != nil {
		return nil, fmt.Errorf("backupstore: copy: %s: %w", field, err)
	}
	if b == c.dst {
		c.dstRemover = rm
	} else {
		c.srcRemover = rm
	}
	d := &deletion{bucket: b, prefix: prefix, rm: rm,
		opts: &DeleteOptions{PrefixRules: PrefixRules{AllowEmpty: true}, AllowUnknownBucketPrefix: true}}
	lo := &blob.ListOptions{Prefix: prefix}
	rm.Prepare(lo)
	var out []*blob.ListObject
	token := blob.FirstPageToken
	for {
		var objs []*blob.ListObject
		var next []byte
		err := c.retry.do(ctx, c.clock, transientPresent, func() error {
			var err error
			objs, next, err = b.ListPage(ctx, token, listAllPageSize, lo)
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := d.CheckEffectivePrefix(); err != nil {
			return nil, fmt.Errorf("backupstore: copy: %s: %w", field, err)
		}
		for _, o := range objs {
			if !o.IsDir && o.Key != skip {
				out = append(out, o)
			}
		}
		if len(next) == 0 {
			return out, nil
		}
		token = next
	}
}

// selectBackups applies MaxBackupAge and MaxBackups through retention to
// the objects that are not manifests, and returns the selected objects and
// the number of manifests found. Whether an object is a manifest costs one
// attributes request (see isManifest); only the objects the filters would
// select are asked, each once: a manifest found is set aside and the
// filters run again, so that it never takes a backup's place.
func (c *copier) selectBackups(ctx context.Context, objs []*blob.ListObject) ([]*blob.ListObject, int, error) {
	manifest := make([]bool, len(objs))
	checked := make([]bool, len(objs))
	manifests := 0
	for {
		var idx []int
		for i := range objs {
			if !manifest[i] {
				idx = append(idx, i)
			}
		}
		keep, err := c.filter(objs, idx)
		if err != nil {
			return nil, 0, err
		}
		var ask []int
		for _, i := range keep {
			if !checked[i] {
				ask = append(ask, i)
				checked[i] = true
			}
		}
		if len(ask) == 0 {
			out := make([]*blob.ListObject, len(keep))
			for j, i := range keep {
				out[j] = objs[i]
			}
			return out, manifests, nil
		}
		found := make([]bool, len(ask))
		errs := driver.ForEach(ctx, len(ask), c.concurrency(), func(j int) error {
			var err error
			found[j], err = c.isManifest(ctx, c.src, objs[ask[j]])
			return err
		})
		if err := errors.Join(errs...); err != nil {
			return nil, 0, &CopyError{Err: fmt.Errorf("source: %w", err)}
		}
		for j, i := range ask {
			if found[j] {
				manifest[i] = true
				manifests++
				c.log.V(1).Info("not copying a copy manifest found in the source", "key", objs[i].Key)
			}
		}
	}
}

// filter returns the indexes among idx of the objects that MaxBackupAge
// and MaxBackups select.
func (c *copier) filter(objs []*blob.ListObject, idx []int) ([]int, error) {
	var policy retention.All
	if c.opts.MaxBackupAge > 0 {
		policy = append(policy, retention.TTL{After: c.opts.MaxBackupAge})
	}
	if c.opts.MaxBackups > 0 {
		policy = append(policy, retention.Newest{N: c.opts.MaxBackups})
	}
	if len(policy) == 0 {
		return idx, nil
	}
	group := c.opts.Backup
	if group == nil {
		group = func(key string, t time.Time) (string, time.Time) { return key, t }
	}
	ids := make([]string, len(idx))
	index := map[string]int{}
	var items []retention.Item
	for j, i := range idx {
		o := objs[i]
		id, taken := group(o.Key, o.ModTime)
		ids[j] = id
		k, ok := index[id]
		if !ok {
			index[id] = len(items)
			items = append(items, retention.Item{ID: id, Time: taken})
			continue
		}
		if taken.After(items[k].Time) {
			items[k].Time = taken
		}
	}
	var res retention.Result
	// A filter of what to copy, not a deletion: no guard adds the newest
	// backup whatever its age (etcd-druid's maxBackupAge leaves it out).
	filter := retention.Options{AllowDeleteNewest: true}
	if err := filter.Evaluate(policy, c.clock.Now(), items, &res); err != nil {
		return nil, fmt.Errorf("%w: copy filters MaxBackupAge = %v, MaxBackups = %d: %w", ErrInvalidConfig, c.opts.MaxBackupAge, c.opts.MaxBackups, err)
	}
	var out []int
	for j, i := range idx {
		if res.Decisions[index[ids[j]]].Keep {
			out = append(out, i)
		}
	}
	return out, nil
}

func (c *copier) concurrency() int {
	if c.opts.Concurrency > 0 {
		return c.opts.Concurrency
	}
	return 8
}

// maxManifestSniff bounds the size of a JSON object that isManifest reads
// to tell whether it is a manifest written without MetadataManifest.
const maxManifestSniff = 64 << 20

// isManifest reports whether o is a copy manifest: it carries
// MetadataManifest (every manifest CopyBackups writes does), or it is JSON
// (content type application/json) that decodes as a Manifest and nothing
// else, as the manifests written before the marker. An object gone
// meanwhile is not one.
func (c *copier) isManifest(ctx context.Context, b *blob.Bucket, o *blob.ListObject) (bool, error) {
	var attrs *blob.Attributes
	err := c.retry.do(ctx, c.clock, transientPresent, func() error {
		var err error
		attrs, err = b.Attributes(ctx, o.Key)
		return err
	})
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("attributes of %q: %w", o.Key, err)
	}
	if attrs.Metadata[MetadataManifest] != "" {
		return true, nil
	}
	if !strings.HasPrefix(attrs.ContentType, "application/json") || attrs.Size > maxManifestSniff {
		return false, nil
	}
	var data []byte
	err = c.retry.do(ctx, c.clock, transientPresent, func() error {
		var err error
		data, err = b.ReadAll(ctx, o.Key)
		return err
	})
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %q: %w", o.Key, err)
	}
	return looksLikeManifest(data), nil
}

// looksLikeManifest reports whether data is the JSON of a Manifest: an
// object with exactly its three keys (entries may be null: a run that
// copied nothing writes that), which decodes as one.
func looksLikeManifest(data []byte) bool {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || len(fields) != 3 {
		return false
	}
	for _, k := range []string{"sourcePrefix", "targetPrefix", "entries"} {
		if _, ok := fields[k]; !ok {
			return false
		}
	}
	var m Manifest
	return json.Unmarshal(data, &m) == nil
}

// samePresent reports whether the target object t is the source object o.
func (c *copier) samePresent(ctx context.Context, o, t *blob.ListObject) (bool, error) {
	if t == nil || t.Size != o.Size {
		return false, nil
	}
	if _, all := c.dstRemover.(driver.MD5Lister); len(o.MD5) > 0 && len(t.MD5) == 0 && !all {
		md5, err := c.md5(ctx, c.dst, t.Key)
		if err != nil {
			return false, err
		}
		t.MD5 = md5
	}
	if len(o.MD5) > 0 && len(t.MD5) > 0 {
		return bytes.Equal(o.MD5, t.MD5), nil
	}
	var attrs *blob.Attributes
	err := c.retry.do(ctx, c.clock, transientPresent, func() error {
		var err error
		attrs, err = c.dst.Attributes(ctx, t.Key)
		return err
	})
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("target %q: %w", t.Key, err)
	}
	return attrs.Metadata[MetadataSourceModTime] == o.ModTime.UTC().Format(time.RFC3339Nano), nil
}

// md5 asks the store for the MD5 of key: nil when it has none or the object
// is gone.
func (c *copier) md5(ctx context.Context, b *blob.Bucket, key string) ([]byte, error) {
	var attrs *blob.Attributes
	err := c.retry.do(ctx, c.clock, transientPresent, func() error {
		var err error
		attrs, err = b.Attributes(ctx, key)
		return err
	})
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("attributes of %q: %w", key, err)
	}
	return attrs.MD5, nil
}

// copyOne streams one object and returns its status and the bytes copied.
func (c *copier) copyOne(ctx context.Context, e ManifestEntry) (Status, int64, error) {
	var n int64
	err := c.retry.do(ctx, c.clock, transientPresent, func() error {
		var err error
		n, err = c.stream(ctx, e)
		return err
	})
	if notFound(err) {
		return StatusNotFound, 0, nil
	}
	if errors.Is(err, errIsManifest) {
		return statusManifest, 0, nil
	}
	if driver.IsExists(err) {
		// An object appeared at the key since the target was listed (or
		// an attempt whose answer was lost wrote it): it is the copy if
		// it holds the source's content.
		same, serr := c.sameAsEntry(ctx, e)
		switch {
		case serr != nil:
			return StatusNone, 0, serr
		case same:
			return StatusCopied, 0, nil
		}
		return StatusNone, 0, c.differs(c.targetKey(e.Key))
	}
	if err != nil {
		return StatusNone, 0, err
	}
	return StatusCopied, n, nil
}

// differs is the refusal to write over the target's key, which holds
// other content than its source.
func (c *copier) differs(key string) error {
	return fmt.Errorf("%w: %q (its size or checksum is not the source's): not written over", ErrTargetDiffers, key)
}

// sameAsEntry reports whether the target's object of e holds e's content,
// judged as samePresent judges a listed one.
func (c *copier) sameAsEntry(ctx context.Context, e ManifestEntry) (bool, error) {
	key := c.targetKey(e.Key)
	var attrs *blob.Attributes
	err := c.retry.do(ctx, c.clock, transientPresent, func() error {
		var err error
		attrs, err = c.dst.Attributes(ctx, key)
		return err
	})
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("target %q: %w", key, err)
	}
	if attrs.Size != e.Size {
		return false, nil
	}
	if e.MD5 != "" && len(attrs.MD5) > 0 {
		return e.MD5 == hex.EncodeToString(attrs.MD5), nil
	}
	return attrs.Metadata[MetadataSourceModTime] == e.ModTime.UTC().Format(time.RFC3339Nano), nil
}

// errIsManifest: the object read is a copy manifest, not a backup.
var errIsManifest = errors.New("a copy manifest")

// statusManifest is the status copyOne gives a source object it found to
// be a copy manifest; such an entry leaves the manifest.
const statusManifest Status = "manifest"

// readManifest tells from what r brought whether the object e is a copy
// manifest, as isManifest does from its attributes: the metadata came with
// the content; a JSON object small enough to be sniffed is read whole, and
// data then holds it for the copy.
func (c *copier) readManifest(r *blob.Reader, e ManifestEntry) (isManifest bool, data []byte, err error) {
	md, ok := c.srcRemover.(driver.MetadataReader).ReadMetadata(r)
	if !ok {
		return false, nil, fmt.Errorf("source %q: the store's reader gives no metadata", e.Key)
	}
	if md[MetadataManifest] != "" {
		return true, nil, nil
	}
	if !strings.HasPrefix(r.ContentType(), "application/json") || e.Size > maxManifestSniff {
		return false, nil, nil
	}
	data, err = io.ReadAll(io.LimitReader(r, maxManifestSniff+1))
	if err != nil {
		return false, nil, err
	}
	return looksLikeManifest(data), data, nil
}

func (c *copier) stream(ctx context.Context, e ManifestEntry) (int64, error) {
	r, err := c.src.NewReader(ctx, e.Key, nil)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var body io.Reader = r
	if c.deferManifests {
		isManifest, data, err := c.readManifest(r, e)
		if err != nil {
			return 0, err
		}
		if isManifest {
			return 0, errIsManifest
		}
		if data != nil {
			body = bytes.NewReader(data)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wo := &blob.WriterOptions{
		ContentType: r.ContentType(),
		Metadata:    map[string]string{MetadataSourceModTime: e.ModTime.UTC().Format(time.RFC3339Nano)},
	}
	if e.MD5 != "" {
		wo.ContentMD5, _ = hex.DecodeString(e.MD5)
	}
	if raw, ok := c.rawTarget(e.Key); ok && r.ContentType() != "" {
		if p, ok := c.dstRemover.(driver.Putter); ok {
			if ok, err := p.Put(ctx, raw, body, e.Size, r.ContentType(), wo.ContentMD5, wo.Metadata); ok {
				if err != nil {
					return 0, err
				}
				return e.Size, nil
			}
		}
	}
	// Never over an object written since the target was listed.
	result := ifNotExist(wctx, c.dst, c.targetKey(e.Key), wo)
	w, err := c.dst.NewWriter(wctx, c.targetKey(e.Key), wo)
	if err != nil {
		return 0, result(err)
	}
	h := md5.New()
	buf := copyBuffers.Get().(*[]byte)
	// The writer is hidden behind writeOnly: *blob.Writer's ReadFrom would
	// allocate a buffer of 1 MiB for every object.
	n, err := io.CopyBuffer(writeOnly{w}, io.TeeReader(body, h), *buf)
	copyBuffers.Put(buf)
	if err == nil && n != e.Size {
		err = fmt.Errorf("source changed while copying: listed %d bytes, read %d", e.Size, n)
	}
	if err != nil {
		cancel() // abandons the upload
		w.Close()
		return n, result(err)
	}
	return n, result(w.Close())
}

// rawTarget returns the target key of key as the target store spells it:
// the prefix the target's listing sent, followed by the rest of the key,
// where gocloud would not escape the key (no control characters, no "../",
// no "__0x") so that both spellings are the same; ok is false otherwise.
// Only a driver.Putter uses it, and refuses to write if no listing was
// made.
func (c *copier) rawTarget(key string) (string, bool) {
	if c.dstRemover == nil {
		return "", false
	}
	// A listing request without a prefix (none given, no prefix of the
	// bucket's own) lists the keys as they are.
	listed, _ := c.dstRemover.ListedPrefix()
	if !strings.HasPrefix(key, c.opts.SourcePrefix) {
		return "", false
	}
	raw := listed + strings.TrimPrefix(key, c.opts.SourcePrefix)
	if strings.Contains(raw, "../") || strings.Contains(raw, "__0x") || strings.ContainsFunc(raw, func(r rune) bool { return r < 32 }) {
		return "", false
	}
	return raw, true
}

// copyBuffers are the buffers objects are copied through, shared by the
// objects and workers of every copy.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// copyBufferSize is the size of a copy buffer: the amount handed to the
// target's writer at once.
const copyBufferSize = 256 << 10

// writeOnly hides every method of a writer but Write.
type writeOnly struct{ w io.Writer }

func (w writeOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

func (c *copier) finish(ctx context.Context, i int, status Status, size int64, err error) {
	c.mu.Lock()
	e := &c.manifest.Entries[i]
	switch {
	case err != nil:
		c.res.FailedKeys = append(c.res.FailedKeys, KeyError{Key: e.Key, Err: err})
		c.res.CopyProgress.Failed++
	case status == StatusNotFound:
		e.Status = StatusNotFound
		c.res.NotFound++
	case status == statusManifest:
		c.manifests = append(c.manifests, i)
		c.log.V(1).Info("not copying a copy manifest found in the source", "key", e.Key)
	default:
		e.Status = StatusCopied
		c.res.Copied++
		c.res.Bytes += size
	}
	c.done++
	save := c.done%100 == 0
	// Queued under the lock, so the calls see the totals in order; run on
	// the notifier's goroutine, outside it.
	c.progress.send(c.res.CopyProgress)
	c.mu.Unlock()
	if save {
		if err := c.saveManifest(ctx); err != nil {
			c.log.Error(err, "saving the copy manifest; continuing")
		}
	}
}

func (c *copier) loadManifest(ctx context.Context) (*Manifest, error) {
	if c.opts.ManifestKey == "" {
		return nil, nil
	}
	var data []byte
	err := c.retry.do(ctx, c.clock, transientPresent, func() error {
		var err error
		data, err = c.dst.ReadAll(ctx, c.opts.ManifestKey)
		return err
	})
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest %q: %w", c.opts.ManifestKey, err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("read manifest %q: %w", c.opts.ManifestKey, err)
	}
	return &m, nil
}

func (c *copier) saveManifest(ctx context.Context) error {
	if c.opts.ManifestKey == "" {
		return nil
	}
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.mu.Lock()
	data, err := json.Marshal(c.manifest)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	err = c.retry.do(ctx, c.clock, transientPresent, func() error {
		return c.dst.WriteAll(ctx, c.opts.ManifestKey, data, &blob.WriterOptions{
			ContentType: "application/json",
			Metadata:    map[string]string{MetadataManifest: manifestFormat},
		})
	})
	if err != nil {
		return fmt.Errorf("write manifest %q: %w", c.opts.ManifestKey, err)
	}
	return nil
}

// checkOverlap refuses a copy whose source and target are one bucket with
// one prefix under the other (or both the whole bucket): such a copy reads
// what it writes, a bucket copied into itself, and a migration that then
// deletes its source deletes the copy with it. src and dst are one bucket
// when they are the same *blob.Bucket, or when OpenBucket opened both
// with URLs of one identity (SameBucket, whatever their other options;
// their prefix= counts, as Overlap says). Every mem:// OpenBucket is a
// bucket of its own. Two buckets opened otherwise cannot be told apart:
// they are taken to be two.
func checkOverlap(src, dst *blob.Bucket, sourcePrefix, targetPrefix string) error {
	su, sok := openedURL(src)
	du, dok := openedURL(dst)
	var overlap bool
	switch {
	case src == dst:
		overlap = strings.HasPrefix(sourcePrefix, targetPrefix) || strings.HasPrefix(targetPrefix, sourcePrefix)
	case sok && dok && su.ID.Scheme != "mem":
		overlap = Overlap(su, sourcePrefix, du, targetPrefix)
	}
	if !overlap {
		return nil
	}
	name := func(u URL, ok bool) string {
		if !ok {
			return "the bucket"
		}
		return fmt.Sprintf("%s (bucket %s)", u, u.ID)
	}
	return fmt.Errorf("%w: copy: the source %s with SourcePrefix %q and the target %s with TargetPrefix %q are one bucket, and one prefix holds the other: the copy would read what it writes; nothing was copied",
		ErrInvalidConfig, name(su, sok), sourcePrefix, name(du, dok), targetPrefix)
}
