// Package driver is the contract between backupstore and the packages
// that give it a store's own API (backupstore/s3store, gcsstore,
// azurestore): what a provider registers, and what backupstore asks of it.
// backupstore keeps the portable work (prefix checks, listing, the
// pipeline of deletions, retries, copies, the expiry rules' read-modify-
// write); a provider opens its store's buckets from credentials and
// deletes, lists versions and writes lifecycle rules through its SDK.
//
// The contract is internal: the providers live in this repository and
// change with it, and users see only backupstore's API and the import of a
// provider. Methods are called from several goroutines of one deletion
// only where their doc says so.
package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"sync"
	"time"

	"gocloud.dev/blob"
)

// Provider is one store's support, registered by its package's init.
type Provider interface {
	// Scheme is the URL scheme of the store's buckets: "s3", "gs", "azblob".
	Scheme() string
	// Open opens the bucket of u, whose scheme is Scheme() and whose query
	// no longer holds prefix=. With nil creds it uses the store's ambient
	// credentials, as gocloud's URL opener does.
	Open(ctx context.Context, u *url.URL, creds *Credentials) (*blob.Bucket, error)
	// Owns reports whether b is a bucket of this store (b.As reaches the
	// store's client), whoever opened it.
	Owns(b *blob.Bucket) bool
	// Remover returns a Remover for b, a bucket this provider owns. A
	// Remover serves one call of backupstore (a deletion, a copy's
	// listings, an expiry) and remembers what that call learns.
	Remover(b *blob.Bucket, opts RemoverOptions) Remover
	// Transient judges err when it is an error of this store's SDK that
	// tells whether a retry may succeed (an HTTP status, a per-key error
	// code); known is false for every other error.
	Transient(err error) (transient, known bool)
	// NotFound judges err, which gocloud reports as NotFound, when this
	// store's SDK tells better (S3: only the service's own not-found
	// codes); known is false otherwise.
	NotFound(err error) (notFound, known bool)
}

// Credentials are backupstore.Credentials, field for field.
type Credentials struct {
	AccessKeyID, SecretAccessKey string
	Region, Endpoint             string
	S3PathStyle                  bool
	ServiceAccountJSON           []byte
	StorageAccount, StorageKey   string
}

// BatchMode is backupstore.BatchMode.
type BatchMode int

// The batch modes.
const (
	BatchAuto BatchMode = iota
	BatchAlways
	BatchNever
)

// RemoverOptions are the options of a deletion that a store's API needs.
type RemoverOptions struct {
	// AzureBatch: whether Azure's Blob Batch API is used.
	AzureBatch BatchMode
	// BypassGovernance: delete S3 versions under governance retention.
	BypassGovernance bool
}

// Target is one object, or one version of one, to delete.
type Target struct {
	// Key is the key in gocloud's terms (the bucket's own prefix left
	// out); Raw is the key as the store spells it (gocloud escapes some
	// characters, and a blob.PrefixedBucket's prefix is part of it).
	Key, Raw string
	Size     int64
	// Version is the version to delete on a versioned bucket, empty for
	// the current object; Marker says it is a delete marker, Latest that
	// it is the current version of its key.
	Version string
	Marker  bool
	Latest  bool
}

// ID identifies the target among those of a run.
func (t Target) ID() string {
	if t.Version == "" {
		return t.Key
	}
	return t.Key + "\x00" + t.Version
}

// ErrGone marks a target that was already deleted.
var ErrGone = errors.New("already gone")

// Remover deletes objects through one store's API.
type Remover interface {
	// Method names the way objects are deleted, for DeleteResult.Method.
	Method() string
	// BatchSize is the most targets one call of Remove takes.
	BatchSize() int
	// Concurrency is the default number of Remove calls in flight.
	Concurrency() int
	// Prepare is called with the options of every listing request, so
	// that the remover can learn what the bucket does not tell otherwise.
	Prepare(opts *blob.ListOptions)
	// Raw returns the store's own spelling of the key of obj.
	Raw(obj *blob.ListObject) (string, bool)
	// ListedPrefix returns the prefix of the last listing request as the
	// store saw it: the prefix of a blob.PrefixedBucket followed by the
	// caller's. Raw keys must be under it. It may be called while a
	// listing runs.
	ListedPrefix() (string, bool)
	// Remove deletes ts and returns one error per target: nil when it is
	// gone, ErrGone when it was already gone. It is called from several
	// goroutines at once.
	Remove(ctx context.Context, ts []Target) []error
}

// MD5Lister is a Remover whose store's listing gives the MD5 of every
// object that has one (S3: the ETag of an object written in one request):
// asking the store for the attributes of an object listed without an MD5
// would learn none.
type MD5Lister interface {
	ListsEveryMD5()
}

// MetadataReader is a Remover that reads an object's metadata from the
// response that brought its content (a *blob.Reader), where gocloud would
// send a request more (Attributes).
type MetadataReader interface {
	ReadMetadata(r *blob.Reader) (map[string]string, bool)
}

// Run is what a Remover may ask of the backupstore call it serves.
type Run interface {
	Bucket() *blob.Bucket
	// Prefix is the caller's prefix.
	Prefix() string
	// CheckEffectivePrefix checks the prefix the store lists (the
	// Remover's ListedPrefix, or what the bucket tells otherwise) as
	// backupstore checks the caller's, and returns a *PrefixError.
	CheckEffectivePrefix() error
	// Retry calls f until it succeeds, fails with an error that is not
	// transient, or has been tried as often as the caller allows, waiting
	// between tries on the caller's clock.
	Retry(ctx context.Context, f func() error) error
}

// VersionLister is a Remover that can list and delete the versions of
// objects (S3 versions and delete markers, GCS generations).
type VersionLister interface {
	// ProbeVersioning learns the bucket's name and the prefix the store
	// lists (with the prefix of a blob.PrefixedBucket) without a request,
	// checks that prefix (run.CheckEffectivePrefix), and asks the store
	// once whether the bucket keeps versions. When it does, the Remover
	// deletes versions from then on.
	ProbeVersioning(ctx context.Context, run Run) (bool, error)
	// VersionsPage lists one page of versions under listed, the prefix in
	// the store's spelling, from token (nil: the first page). Targets have
	// Raw, Size, Version, Marker and Latest set. next is nil after the
	// last page.
	VersionsPage(ctx context.Context, listed string, token any) (ts []Target, next any, err error)
}

// RetentionLister is a VersionLister on a store with object locks (S3
// Object Lock).
type RetentionLister interface {
	// Retention returns, for every version in ts, the lock that would keep
	// it from being deleted at now (a backupstore.*Retention), or nil;
	// governance retention does not count when bypass is set. It makes no
	// request on a bucket without object locks.
	Retention(ctx context.Context, ts []Target, now time.Time, bypass bool) ([]error, error)
}

// Expirer is a Remover whose store expires objects itself, by lifecycle
// rules (S3).
type Expirer interface {
	// Lifecycle learns the bucket's name and the prefix the store sees
	// for run.Prefix(), checks that prefix (run.CheckEffectivePrefix), and
	// returns the bucket's lifecycle configuration seen through it.
	Lifecycle(ctx context.Context, run Run) (Lifecycle, error)
}

// Lifecycle is a bucket's lifecycle configuration, seen through one
// prefix. backupstore owns the read-modify-write (see
// backupstore.ExpirePrefix); the store reads, writes and builds rules.
type Lifecycle interface {
	// Bucket is the bucket's name; Prefix the effective prefix, in the
	// store's spelling.
	Bucket() string
	Prefix() string
	// MaxRules is the store's limit of rules in one configuration.
	MaxRules() int
	// Versioned reports whether the bucket keeps versions.
	Versioned(ctx context.Context) (bool, error)
	// Rules reads the configuration's rules, foreign ones included; none
	// when there is no configuration.
	Rules(ctx context.Context) ([]Rule, error)
	// Write replaces the configuration with rules (deletes it when rules
	// is empty). It sends one request, never retried: the caller starts
	// over from the read.
	Write(ctx context.Context, rules []Rule) error
	// IsEmpty reports whether nothing, not even a version or delete
	// marker, is stored under prefix (in the store's spelling).
	IsEmpty(ctx context.Context, prefix string) (bool, error)
	// NewRules are the rules that expire everything under prefix from
	// date (midnight UTC), identified by expireID, and on a versioned
	// bucket also noncurrent versions a day after they become noncurrent
	// and, in a rule identified by markersID, expired delete markers.
	NewRules(expireID, markersID, prefix string, date time.Time, versioned bool) []Rule
}

// Rule is one lifecycle rule as the store holds it; Write writes back
// every field of a rule that Rules read, known here or not. Two rules are
// the same when reflect.DeepEqual says so.
type Rule interface {
	ID() string
	// Prefix is the prefix the rule filters on.
	Prefix() string
	// Date is the expiration date of current versions, zero without one.
	Date() time.Time
	// NoncurrentDays is how many days after becoming noncurrent a version
	// expires, zero without such an expiration.
	NoncurrentDays() int32
	// ExpiredDeleteMarkers: the rule removes delete markers with no
	// version behind them.
	ExpiredDeleteMarkers() bool
}

// ForEach calls f(0..n-1) with at most limit calls at once and returns the
// errors by index.
func ForEach(ctx context.Context, n, limit int, f func(int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			for j := i; j < n; j++ {
				errs[j] = ctx.Err()
			}
			wg.Wait()
			return errs
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// TransientStatus reports whether a request answered with an HTTP status
// may succeed when repeated.
func TransientStatus(status int) bool {
	return status >= 500 || status == 408 || status == 429
}

var (
	mu        sync.RWMutex
	providers = map[string]Provider{}
	sorted    []Provider // providers by scheme, replaced (never changed) by Register
)

// Register makes p the provider of its scheme. It panics when the scheme
// has one already.
func Register(p Provider) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := providers[p.Scheme()]; dup {
		panic(fmt.Sprintf("backupstore: a second provider of scheme %q", p.Scheme()))
	}
	providers[p.Scheme()] = p
	next := make([]Provider, 0, len(providers))
	for _, q := range providers {
		next = append(next, q)
	}
	sort.Slice(next, func(i, j int) bool { return next[i].Scheme() < next[j].Scheme() })
	sorted = next
}

// Lookup returns the provider of scheme, or nil.
func Lookup(scheme string) Provider {
	mu.RLock()
	defer mu.RUnlock()
	return providers[scheme]
}

// Providers returns the registered providers, by scheme. The caller must
// not change the slice.
func Providers() []Provider {
	mu.RLock()
	defer mu.RUnlock()
	return sorted
}

// Creator is a Provider that creates the bucket (container) of an opened
// blob.Bucket: backupstore.CreateBucket.
type Creator interface {
	// Create creates the bucket name that b is opened on, where o says
	// for the stores that need it; created says whether this call created
	// it. A bucket that already exists is not an error: created is false,
	// whoever made it (the store's own "already exists" answers, never
	// taken as the caller's).
	Create(ctx context.Context, b *blob.Bucket, name string, o CreateOptions) (created bool, err error)
}

// CreateOptions say where a Creator creates a bucket.
type CreateOptions struct {
	// Region is the URL's region= or the credentials' region: S3's
	// location constraint, GCS's location.
	Region string
	// Project is the GCS project: the URL's project=, or the project_id
	// of the credentials' service account key.
	Project string
}

// BucketDeleter is a Provider that deletes the bucket (container) of an
// opened blob.Bucket: backupstore.DeleteBucket.
type BucketDeleter interface {
	// BucketExists reports whether the bucket name that b is opened on
	// exists.
	BucketExists(ctx context.Context, b *blob.Bucket, name string) (bool, error)
	// DeleteBucket deletes the bucket name that b is opened on, emptied
	// by the caller; a bucket already gone is not an error.
	DeleteBucket(ctx context.Context, b *blob.Bucket, name string) error
}

// Putter is a Remover that writes objects of known size through its
// store's own API, with part buffers shared by every object and worker,
// where gocloud's writer allocates buffers for each object.
type Putter interface {
	// Put writes exactly size bytes read from body at raw, a key in the
	// store's spelling, after a listing through this Remover learned the
	// bucket, and never over an object there: the write is conditional on
	// raw not existing, and one that exists fails it with an error that
	// IsExists reports. md5 (nil: unknown) is the MD5 the bytes must have: a
	// mismatch, or a body of another size, fails the write and leaves
	// nothing at raw. Metadata keys are lower-case letters, digits and
	// dashes. ok is false when the Remover cannot write (it knows no
	// bucket), and nothing was read.
	Put(ctx context.Context, raw string, body io.Reader, size int64, contentType string, md5 []byte, metadata map[string]string) (ok bool, err error)
}
