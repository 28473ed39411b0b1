package pool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/internal/keys"
)

// Grow is a Config's NewBucket, Provision and Deprovision for bucket
// objects that name their store's bucket by a URL and its credentials by a
// Secret: a pool's next bucket is made from its first member (by name,
// the one an administrator made), named "<pool>-<n>" ('/' in the pool's
// name as '-'), its URL naming a store bucket of that name and a hash of
// Installation (backupstore.BucketURL), so that pools of one name in two
// installations that share a store's account never pick one store bucket.
//
// Provision creates a member's store bucket (backupstore.CreateBucket)
// and, for a bucket the pool created (AnnotationCreatedBy), proves it the
// object's: a store bucket the call created gets an owner marker
// (BucketOwnerKey) naming the installation, the pool and the bucket
// object with its UID, written where the data is and only if no marker is
// there; one that existed is the object's only if its marker names the
// object's UID. Deprovision deletes a store bucket
// (backupstore.DeleteBucket) only if the pool created its object and its
// marker names the object's UID, checked right before the deletion.
// Otherwise both refuse with an error wrapping ErrNotOwned: "already
// exists" is not "mine", and a bucket the pool cannot prove it made is
// never admitted into nor deleted.
//
// A store bucket that existed without a marker is taken as the object's
// in two cases only: its name is the one Grow derives from the object's
// name and Installation, a name no other installation gives (the pool's
// own creation whose marker was not written yet: a restart between the
// two requests, another replica's creation a moment before; or a deletion
// that was interrupted after the marker went); or the object carries
// AnnotationAdoptStore with its UID (an administrator vouches for it, as
// for a pool's bucket created before owner markers, whose store name has
// no installation hash). A marker, when there is one, always decides.
type Grow[B collect.Object] struct {
	// Buckets lists the pool's members (a cache). Required.
	Buckets collect.Objects[B]
	// Member names the pool a bucket belongs to (Config.Member).
	// Required.
	Member func(B) string
	// Store is a bucket's URL and the namespace and name of its Secret
	// ("" for none: file://, mem://). Required.
	Store func(B) (url, secretNamespace, secretName string)
	// New builds the bucket object name with url, in the pool of first
	// (its spec, without first's metadata and status). Required.
	New func(first B, name, url string) B
	// Secrets reads the Secrets. Required.
	Secrets backupstore.SecretGetter
	// Installation names this installation of the controller, unique
	// among the installations whose pools may share a store's account
	// (a cluster's identity, such as the UID of its kube-system
	// namespace). The store names of the buckets a pool grows end in a
	// hash of it, and the owner marker records it. Required by NewBucket
	// and by Provision of a bucket the pool created; keep it unchanged
	// (a bucket's marker names its UID, so a changed Installation loses
	// no bucket, but a creation whose marker was not written is then no
	// longer recognized by its name).
	Installation string
	// Open, if set, opens a store's bucket to read and write its owner
	// marker and returns the function that releases it (collect.Config's
	// Open); default backupstore.OpenBucket and Bucket.Close.
	Open func(ctx context.Context, url string, creds *backupstore.Credentials) (*blob.Bucket, func() error, error)
}

// BucketOwnerKey is the key of the owner marker that Grow.Provision writes
// at the top of a store bucket it created: JSON with the installation
// (Grow.Installation), the pool, the bucket object ("namespace/name", or
// the name of a cluster-scoped one) and its UID. No entry's prefix holds
// it: a prefix ends in '/'.
const BucketOwnerKey = "groundskeeper-bucket-owner.json"

// AnnotationAdoptStore, set by an administrator on a pool's bucket object
// to the object's UID, makes Grow.Provision write the owner marker into
// the object's store bucket that exists without one: the administrator
// vouches that it is this object's (a bucket a pool created before owner
// markers). A marker naming another owner is never replaced. The UID,
// not "true", so that the annotation copied to another object adopts
// nothing.
const AnnotationAdoptStore = "backupstore.groundskeeper.io/adopt-store"

// bucketOwner is the content of the owner marker.
type bucketOwner struct {
	Installation string `json:"installation"`
	Pool         string `json:"pool"`
	Bucket       string `json:"bucket"`
	UID          string `json:"uid"`
}

// NewBucket is Grower.NewBucket: the n-th bucket of pool, made from
// its first. A pool without a member, or whose first's URL names no
// bucket, cannot grow: the error says so; nor can a Grow without
// Installation.
func (g Grow[B]) NewBucket(pool string, n int) (B, error) {
	var zero B
	if g.Installation == "" {
		return zero, errNoInstallation
	}
	// Grower.NewBucket takes no context: the list is a cache read.
	all, err := g.Buckets.List(context.Background(), "")
	if err != nil {
		return zero, err
	}
	var members []B
	for _, b := range all {
		if g.Member(b) == pool {
			members = append(members, b)
		}
	}
	if len(members) == 0 {
		return zero, fmt.Errorf("no bucket of the pool to make its next from: create the pool's first")
	}
	first := slices.MinFunc(members, func(a, b B) int { return strings.Compare(a.GetName(), b.GetName()) })
	name := fmt.Sprintf("%s-%d", strings.ReplaceAll(strings.Trim(pool, "/"), "/", "-"), n)
	rawURL, _, _ := g.Store(first)
	u, err := backupstore.BucketURL(rawURL, g.storeName(name))
	if err != nil {
		return zero, fmt.Errorf("the pool's first bucket %s: %w", first.GetName(), err)
	}
	return g.New(first, name, u), nil
}

var errNoInstallation = fmt.Errorf("%w: share: Grow.Installation is required: it makes the store names of a pool's buckets unique to this installation and is recorded in their owner markers", backupstore.ErrInvalidConfig)

// storeName is the name of the store bucket of the pool's bucket object
// named object: object and the first 8 hex digits of the SHA-256 of
// Installation, within the 63 characters that S3, GCS and Azure allow
// (object is cut, a name that is cut may be another's too: the marker
// tells them apart).
func (g Grow[B]) storeName(object string) string {
	sum := sha256.Sum256([]byte(g.Installation))
	suffix := "-" + hex.EncodeToString(sum[:4])
	if limit := 63 - len(suffix); len(object) > limit {
		object = strings.TrimRight(object[:limit], "-.")
	}
	return object + suffix
}

// Provision is Grower.Provision: it creates the store's bucket of a
// pool's member, with the credentials of its Secret, and proves the store
// bucket of a member the pool created the object's (see Grow): an error
// wrapping ErrNotOwned when it is not. A bucket outside any pool is the
// administrator's to create; an administrator's member is created when
// missing and gets no marker (the pool never deletes it).
func (g Grow[B]) Provision(ctx context.Context, b B) error {
	pool := g.Member(b)
	if pool == "" {
		return nil
	}
	rawURL, creds, err := g.store(ctx, b)
	if err != nil {
		return err
	}
	created, err := backupstore.CreateBucket(ctx, rawURL, creds)
	if err != nil || !createdBy(b, pool) {
		return err
	}
	if g.Installation == "" {
		return errNoInstallation
	}
	store, done, err := g.open(ctx, rawURL, creds)
	if err != nil {
		return err
	}
	defer done()
	want := g.owner(b)
	have, err := readOwner(ctx, store)
	if err != nil {
		return fmt.Errorf("bucket %s: %w", b.GetName(), err)
	}
	if have == nil {
		why := g.unmarked(b, rawURL, created)
		if why == "" {
			return fmt.Errorf("%w: the store's bucket %s of bucket %s existed before the pool created it and holds no owner marker (%s): it may be another installation's, so no entry is admitted to it and the pool never deletes it; if it is this bucket's, annotate the bucket %s=%s",
				ErrNotOwned, rawURL, b.GetName(), BucketOwnerKey, AnnotationAdoptStore, b.GetUID())
		}
		if have, err = writeOwner(ctx, store, want); err != nil {
			return fmt.Errorf("bucket %s: %w", b.GetName(), err)
		}
		if *have == want {
			logr.FromContextOrDiscard(ctx).Info("owner marker written", "bucket", b.GetName(), "store", rawURL, "why", why)
		}
	}
	return checkOwner(b, rawURL, have)
}

// unmarked says why a store bucket without an owner marker is b's, ""
// when it is not (see Grow).
func (g Grow[B]) unmarked(b B, rawURL string, created bool) string {
	switch {
	case created:
		return "created"
	case b.GetUID() != "" && b.GetAnnotations()[AnnotationAdoptStore] == string(b.GetUID()):
		return "adopted (" + AnnotationAdoptStore + ")"
	case g.Installation == "":
		return ""
	}
	if own, err := backupstore.BucketURL(rawURL, g.storeName(b.GetName())); err == nil && own == rawURL {
		return "named by this installation for this bucket"
	}
	return ""
}

// Deprovision is Grower.Deprovision: it deletes the store's bucket of a
// bucket the pool created (backupstore.DeleteBucket, with opts), with the
// credentials of its Secret, if its owner marker, read right before,
// names the object's UID (without a marker: if it is the object's all the
// same, see Grow: a deletion interrupted after the marker went is
// finished), and if it holds nothing else; a store bucket that is gone is
// nothing to delete. A bucket outside any pool, and a member the pool did
// not create, are refused (ErrInvalidConfig): they are the
// administrator's; a store bucket without the object's marker is refused
// with an error wrapping ErrNotOwned; one that holds any object (or
// version) besides the marker, listed right before the deletion, with an
// error wrapping ErrStoreNotEmpty that names the keys: the marker proves
// the bucket the pool's, not what others wrote into it, and the pool's
// own entries took their data with them (their collectors delete it
// before their finalizers go). A dry run checks the same.
func (g Grow[B]) Deprovision(ctx context.Context, b B, opts *backupstore.DeleteOptions) (*backupstore.DeleteResult, error) {
	pool := g.Member(b)
	if pool == "" {
		return nil, fmt.Errorf("%w: bucket %s belongs to no pool: not deleted", backupstore.ErrInvalidConfig, b.GetName())
	}
	if !createdBy(b, pool) {
		return nil, fmt.Errorf("%w: bucket %s was not created by pool %q (annotation %s): the administrator's, not deleted", backupstore.ErrInvalidConfig, b.GetName(), pool, AnnotationCreatedBy)
	}
	rawURL, creds, err := g.store(ctx, b)
	if err != nil {
		return nil, err
	}
	store, done, err := g.open(ctx, rawURL, creds)
	if errors.Is(err, fs.ErrNotExist) { // file://: the directory is gone
		return &backupstore.DeleteResult{Method: "none"}, nil
	}
	if err != nil {
		return nil, err
	}
	defer done()
	if ok, err := store.IsAccessible(ctx); err != nil || !ok {
		if err != nil {
			return nil, fmt.Errorf("bucket %s: does the store's bucket %s exist: %w", b.GetName(), rawURL, err)
		}
		return &backupstore.DeleteResult{Method: "none"}, nil
	}
	have, err := readOwner(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", b.GetName(), err)
	}
	switch {
	case have == nil && g.unmarked(b, rawURL, false) == "":
		return nil, fmt.Errorf("%w: the store's bucket %s of bucket %s holds no owner marker (%s): the pool cannot prove it created it, not deleted",
			ErrNotOwned, rawURL, b.GetName(), BucketOwnerKey)
	case have != nil:
		if err := checkOwner(b, rawURL, have); err != nil {
			return nil, err
		}
	}
	// What the deletion would take, listed right before it: the marker
	// alone, or nothing (a deletion interrupted after the marker went).
	dry := backupstore.DeleteOptions{}
	if opts != nil {
		dry = *opts
	}
	dry.DryRun = true
	check, err := backupstore.DeleteBucket(ctx, rawURL, creds, &dry)
	if err != nil {
		return check, fmt.Errorf("bucket %s: list the store's bucket %s: %w", b.GetName(), rawURL, err)
	}
	if others := slices.DeleteFunc(slices.Clone(check.Keys), func(k string) bool { return k == BucketOwnerKey }); len(others) > 0 {
		return check, fmt.Errorf("%w: the store's bucket %s of bucket %s holds %d objects besides its owner marker (%s), which no entry of the pool owns now: they may be another's, not deleted",
			ErrStoreNotEmpty, rawURL, b.GetName(), len(others), keys.Named(others))
	}
	if opts != nil && opts.DryRun {
		return check, nil
	}
	return backupstore.DeleteBucket(ctx, rawURL, creds, opts)
}

// createdBy reports whether pool created bucket b (AnnotationCreatedBy).
func createdBy(b collect.Object, pool string) bool {
	return pool != "" && b.GetAnnotations()[AnnotationCreatedBy] == pool
}

// owner is the owner marker of bucket b.
func (g Grow[B]) owner(b B) bucketOwner {
	return bucketOwner{Installation: g.Installation, Pool: g.Member(b), Bucket: objectKey(b), UID: string(b.GetUID())}
}

// checkOwner is nil if marker have names bucket b's UID, and an error
// wrapping ErrNotOwned otherwise.
func checkOwner(b collect.Object, rawURL string, have *bucketOwner) error {
	if b.GetUID() == "" {
		return fmt.Errorf("bucket %s has no UID: read it from the API server", b.GetName())
	}
	if have.UID != string(b.GetUID()) {
		return fmt.Errorf("%w: the store's bucket %s of bucket %s (UID %s) holds the owner marker of bucket %s (UID %s) of pool %q in installation %q: not this bucket's",
			ErrNotOwned, rawURL, b.GetName(), b.GetUID(), have.Bucket, have.UID, have.Pool, have.Installation)
	}
	return nil
}

// objectKey is how an owner marker names a bucket object: namespace/name,
// or the name of a cluster-scoped one.
func objectKey(b collect.Object) string { return claimKey(b) }

// readOwner reads the owner marker of store; nil when there is none.
func readOwner(ctx context.Context, store *blob.Bucket) (*bucketOwner, error) {
	data, err := store.ReadAll(ctx, BucketOwnerKey)
	if driver.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the owner marker %s: %w", BucketOwnerKey, err)
	}
	var o bucketOwner
	if err := json.Unmarshal(data, &o); err != nil || o.UID == "" {
		// Whoever wrote it, it names no owner the pool could prove.
		return nil, fmt.Errorf("%w: the owner marker %s names no owner's UID (%d bytes)", ErrNotOwned, BucketOwnerKey, len(data))
	}
	return &o, nil
}

// writeOwner writes marker o into store unless a marker is there, and
// returns the marker that is there then: o, or the one another writer
// wrote first.
func writeOwner(ctx context.Context, store *blob.Bucket, o bucketOwner) (*bucketOwner, error) {
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	err = store.WriteAll(ctx, BucketOwnerKey, data, &blob.WriterOptions{ContentType: "application/json", IfNotExist: true})
	if err == nil {
		return &o, nil
	}
	if !driver.IsExists(err) {
		return nil, fmt.Errorf("write the owner marker %s: %w", BucketOwnerKey, err)
	}
	have, err := readOwner(ctx, store)
	if err == nil && have == nil {
		err = fmt.Errorf("the owner marker %s was there when written and is gone when read", BucketOwnerKey)
	}
	return have, err
}

// open opens the store's bucket rawURL (Open, or backupstore.OpenBucket).
func (g Grow[B]) open(ctx context.Context, rawURL string, creds *backupstore.Credentials) (*blob.Bucket, func(), error) {
	if g.Open != nil {
		b, done, err := g.Open(ctx, rawURL, creds)
		if err != nil {
			return nil, nil, err
		}
		return b, func() { _ = done() }, nil
	}
	b, err := backupstore.OpenBucket(ctx, rawURL, creds)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = b.Close() }, nil
}

// store returns the URL of b's store bucket and the credentials of its
// Secret (nil without one).
func (g Grow[B]) store(ctx context.Context, b B) (string, *backupstore.Credentials, error) {
	rawURL, ns, name := g.Store(b)
	if name == "" {
		return rawURL, nil, nil
	}
	scheme, err := backupstore.Scheme(rawURL)
	if err != nil {
		return "", nil, err
	}
	creds, err := backupstore.LoadCredentials(ctx, g.Secrets, ns, name, scheme)
	return rawURL, creds, err
}
