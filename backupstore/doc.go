// Package backupstore manages backup data in object stores through
// gocloud.dev/blob: it opens a bucket from a URL and a Kubernetes Secret's
// credentials, deletes everything under a prefix fast and never outside it,
// copies backups between stores, and writes the owner markers by which
// shared buckets (package share) prove whose a prefix is. A cloud store (s3://, gs://, azblob://) needs its provider imported (Providers).
//
// Start with [DeletePrefix], on a bucket [OpenBucket] opened:
//
//	res, err := backupstore.DeletePrefix(ctx, b, "backups/db-1/", nil)
//
// It deletes only keys under the prefix (by default one ending in "/"),
// each counted only once the store confirms it gone, nothing S3 Object Lock
// retains unless told to bypass governance mode, and it finishes the job
// when run again after a failure: keep the owning resource until it
// returns nil. Guarantees lists the rest.
//
// # Uses
//
// A garbage collector (aerospike-operator's backup collector, Gardener's
// BackupEntry controller) does:
//
//	creds, err := backupstore.LoadCredentials(ctx, backupstore.SecretsFrom(client.CoreV1()), ns, secretName, scheme)
//	if errors.Is(err, backupstore.ErrSecretNotFound) {
//		// warn, delete nothing, keep the finalizer
//	}
//	b, err := backupstore.OpenBucket(ctx, url, creds)
//	res, err := backupstore.DeletePrefix(ctx, b, prefix, &backupstore.DeleteOptions{Progress: publish})
//	// only when err == nil: remove the finalizer, delete the custom resource
//
// and a migration (etcd-druid's copy-backups task) does
//
//	res, err := backupstore.CopyBackups(ctx, src, dst, &backupstore.CopyOptions{
//		MaxBackupAge: age, MaxBackups: n, ManifestKey: "migration.json"})
//
// and a controller that wants data gone even if it is uninstalled installs
// a backstop with the store's own lifecycle engine:
//
//	_, err := backupstore.ExpirePrefix(ctx, b, prefix, entry.ExpiresAt, nil)
//	// later, once the prefix is empty and the date past:
//	_, err = backupstore.PruneExpiry(ctx, b, nil)
//
// # Providers
//
// This package is the portable core: it links gocloud.dev/blob with its
// fileblob and memblob drivers, and no cloud SDK. Each cloud store has a
// package of its own that a program links by importing it, usually for its
// side effect alone:
//
//	import (
//		"github.com/groundskeeper-io/groundskeeper/backupstore"
//		_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore" // gs://
//	)
//
// The providers are:
//
//   - s3store: s3:// and every S3 bucket (AWS SDK for Go v2): DeleteObjects
//     batches, versions and Object Lock, lifecycle rules (ExpirePrefix);
//   - gcsstore: gs:// and every GCS bucket (cloud.google.com/go/storage):
//     generations of versioned buckets;
//   - azurestore: azblob:// and every Azure Blob container (Azure SDK for
//     Go): Blob Batch.
//
// A provider registers the client it builds from Credentials for
// OpenBucket, and its store's fast paths, which this package uses on every
// bucket of that store, whoever opened it.
//
// This is go-cloud's own answer (gocloud.dev/blob and its drivers, which a
// program links by importing them), taken for what it saves. A program
// that opens one GCS bucket and dry-runs a deletion compiled 818 packages
// of 108 modules into a 94 MB binary (66 MB stripped) when this package
// linked all three SDKs; with gcsstore alone it compiles 653 packages of 80
// modules into 79 MB (55 MB), and its go.mod requires 80 modules instead
// of 109, none of AWS's or Azure's (Go 1.26, linux/amd64, this module's
// go.mod versions). With s3store alone: 473 packages, 63 MB (45 MB); with
// azurestore alone: 510 packages, 56 MB (40 MB). What it costs is
// an import line per store and the mistake of forgetting it, which this
// package turns into errors that name the import to add:
//
//   - OpenBucket refuses a cloud scheme without its provider
//     (ErrUnsupportedScheme), before any request;
//   - DeletePrefix, CopyBackups, ExpirePrefix, RemoveExpiry and
//     PruneExpiry refuse (ErrInvalidConfig) a bucket they cannot tell from
//     a cloud store's while gocloud's driver for that store is linked into
//     the program without its provider, before any request, rather than
//     delete an S3 bucket's keys one by one and leave its versions and
//     locks behind, or call S3 expiry unsupported. A bucket is told apart
//     when a linked provider owns it, when OpenBucket opened it, or when it
//     is a fileblob one; so a memblob bucket made with memblob.OpenBucket
//     is refused in a program that links gocloud's S3 driver without
//     s3store: open it with OpenBucket(ctx, "mem://", nil).
//
// The providers are packages of this module, not modules of their own:
// their SDKs are plain Go, and a user's build selects only the modules of
// the packages it imports.
//
// # Credentials
//
// Scheme, Secret keys (Gardener's provider extensions use the same):
//
//   - s3: accessKeyID, secretAccessKey (required); region, endpoint,
//     s3ForcePathStyle (optional; the URL's region= and endpoint= win);
//   - gs: serviceaccount.json (required);
//   - azblob: storageAccount, storageKey (required);
//   - file, mem: none.
//
// OpenBucket builds the provider client from the credentials alone (for S3,
// an aws-sdk-go-v2 client passed to s3blob.OpenBucket); when credentials are
// given it sets no process environment variable and reads none, with one
// exception: for gs without endpoint=, the GCS client follows
// STORAGE_EMULATOR_HOST when it is set (and then sends no credentials), as
// gocloud and cloud.google.com/go/storage do.
//
// # Guarantees
//
//   - DeletePrefix deletes only keys that start with the prefix: the prefix
//     is checked (CheckPrefix) before anything is listed, and every listed key
//     is checked again, in gocloud's spelling and in the store's own, right
//     before it is sent to the store. By default the prefix must end in "/",
//     so "backups/a/" never touches "backups/ab/". The same rules apply to
//     the effective prefix the store lists when the bucket has a prefix of
//     its own (prefix= in the URL, blob.PrefixedBucket): a bucket opened
//     with prefix=tenant-a holds "tenant-ab/" too, and DeletePrefix refuses
//     it before deleting anything. Where the bucket's own prefix cannot be
//     seen (a blob.PrefixedBucket over fileblob or memblob not opened by
//     OpenBucket), the empty prefix is refused unless the caller states the
//     bucket's prefix (DeleteOptions.BucketPrefix, then checked the same
//     way) or opts out (DeleteOptions.AllowUnknownBucketPrefix).
//   - Concurrency is bounded (at most MaxConcurrency, checked before any
//     request), and goroutines are started as work appears: deleting one
//     object starts one worker, whatever Concurrency says.
//   - A dry run lists exactly the keys and bytes a deletion would remove,
//     and deletes nothing. On a versioned S3 bucket it lists every version
//     and delete marker (DeleteResult.Versions) with its bytes, and on a
//     bucket with Object Lock enabled marks each version the lock would
//     keep with its Retention (one HeadObject a version).
//   - On a versioned S3 bucket (versioning Enabled or Suspended),
//     DeletePrefix deletes every version and every delete marker under the
//     prefix (ListObjectVersions, then DeleteObjects naming each version,
//     1,000 a request, pipelined like the plain path), so that a deleted
//     backup stops being stored and billed. It asks whether the bucket is
//     versioned once per call (one GetBucketVersioning request; the
//     bucket's name and effective prefix come from gocloud without a
//     request); on a bucket that is not versioned it then deletes exactly
//     as before. A version counts as deleted only when the DeleteObjects
//     response names its key and version. KeepNoncurrentVersions deletes
//     only the current versions (the store writes delete markers and keeps
//     the rest) and skips the question.
//   - On a GCS bucket with object versioning enabled, likewise: every
//     generation under the prefix, live or noncurrent, is listed
//     (Versions) and deleted by generation, one request each with bounded
//     concurrency; the question costs one bucket attributes request per
//     call (none on fileblob and memblob, which have no versions).
//   - Nothing under S3 Object Lock is deleted by default: a version under
//     retention (governance or compliance mode) or a legal hold stays, and
//     DeletePrefix deletes everything else it may and returns an error that
//     is ErrRetained, naming each retained version with its retain-until
//     time or legal hold, and the earliest time a rerun can make progress
//     (RetainedError.RetryAt). Versions in governance mode are deleted
//     only with the explicit BypassGovernanceRetention (which needs the
//     s3:BypassGovernanceRetention permission); compliance mode and legal
//     holds are never bypassed. A version is identified as retained from
//     the store's refusal (AccessDenied on AWS, InvalidRequest on MinIO)
//     followed by one HeadObject of that version, and only on a bucket
//     with Object Lock enabled (one GetObjectLockConfiguration per call,
//     at the first refusal).
//   - An object counts as deleted only when the store confirms it (on S3,
//     a Deleted entry of the DeleteObjects response for its key; an error
//     entry that names no key of the request never lets a key pass) or
//     says it is already gone. Objects already gone count as deleted. A
//     failed or interrupted DeletePrefix can be run again and finishes the
//     job; its *DeleteError names exactly the keys whose deletion was not
//     confirmed, up to MaxFailedKeys of them, and counts the others, so
//     that memory stays bounded by the batches in flight whatever the
//     number of keys. (The keys of a request in flight when the context ends are
//     named, with the context's error, although the store may still carry
//     the request out: a rerun counts them as already gone.)
//   - DeletePrefix lists the prefix again when it is done, and deletes what
//     the first listing missed (fileblob's paging can skip keys) or what was
//     written meanwhile; it gives up with an error after five passes.
//   - Listing and deletion are pipelined. S3 is deleted with DeleteObjects
//     (1,000 keys a request, never gocloud's HEAD+DELETE per key), Azure with
//     Blob Batch (256 a request), other stores one request per object with
//     bounded concurrency.
//   - Transient errors (5xx, 429, timeouts, reset connections) are retried
//     with exponential backoff timed by the injected clock; permanent ones
//     (403, 400) are not. Context cancellation stops the work promptly.
//   - CopyBackups streams each object, several at once, through buffers
//     shared by all objects and workers (to S3 with the store's own API: an
//     object whose MD5 was listed, up to 256 MiB, in one PutObject read
//     straight from the source with no buffer, which the store checks
//     against that MD5; others in one PutObject up to 16 MiB, and in parts
//     of 8 MiB, 4 at a time, above, their MD5 checked before the upload
//     completes; a manifest of an earlier copy found in an S3 source is
//     recognised from the read of the object itself when no filter needs
//     to know beforehand, which saves a request an object), skips objects the
//     target already has with the same size and MD5 (fallback: size and the
//     source modification time recorded in the target's metadata), writes
//     with the source MD5 as an integrity check, and keeps a Manifest with a
//     status per object (None, Copied, NotFound) from which a rerun resumes.
//     The effective prefixes of both buckets are checked as for
//     DeletePrefix where they can be seen (a bucket opened with
//     prefix=tenant-a is refused, since its keys include tenant-ab's).
//     A copy whose source and target are one bucket with one prefix under
//     the other (or both the whole bucket) is refused before anything is
//     read or written: it would read what it writes. One bucket is one
//     *blob.Bucket, or two that OpenBucket opened with URLs of one identity
//     (SameBucket: "s3://b" and "s3://b?region=eu-west-1" are one), their
//     prefix= counted (Overlap).
//     A manifest in the source (a chained migration: A to B, then B to C)
//     is never copied or counted as a backup, whatever its key: every
//     manifest carries MetadataManifest, and a JSON object holding a
//     Manifest and nothing else is recognised too. Telling costs one
//     attributes request per object the filters would select.
//     CopyBackups never writes over data in the target: a target object
//     that holds other content than its source is not written, and its
//     key fails the copy (ErrTargetDiffers, CopyResult.Overwrites); every
//     write is conditional on the key not existing (IfNotExist,
//     If-None-Match on S3), so an object written at a key after the
//     target was listed is not written over either, and a write whose
//     answer was lost finds its own object at the retry. A dry run
//     (CopyOptions.DryRun) writes nothing and names the target keys a copy
//     would refuse (CopyResult.Overwrites).
//     It works against an S3 target with Object Lock (and a default
//     retention): objects already there are skipped, retained or not, and a
//     key whose retained version differs is refused like any other.
//   - ExpirePrefix installs S3 lifecycle rules that expire everything under
//     a prefix from the first midnight UTC at or after the given time (S3
//     date rules are whole days at midnight UTC), with no request per
//     object; on versioned buckets also noncurrent versions (one day after
//     they become noncurrent) and expired delete markers. It reads, changes
//     and writes the bucket's configuration: rules whose ID does not start
//     with "groundskeeper/" are written back as read, its own are found by
//     ID, and the rule limit (1,000) is checked before writing. The write
//     is never retried as a write: it goes out once (the SDK's retries off
//     for it), and a transient failure starts over from the read, because
//     the store may have applied it. The prefix is checked as for
//     DeletePrefix. RemoveExpiry removes the rules of a
//     prefix; PruneExpiry removes those whose date has passed and whose
//     prefix holds nothing, and keeps the others. Each has a dry run.
//     "Holds nothing" is asked with ListObjectVersions, which on MinIO
//     still lists the objects that a due rule already hides from
//     ListObjectsV2 until its scanner deletes them: a rule removed before
//     then would bring them back, so PruneExpiry keeps it until the data
//     is gone (tested against MinIO; on AWS listings show expired objects
//     until the store removes them).
//   - CreateBucket and DeleteBucket create and delete a bucket (S3) or
//     container (Azure) itself, each idempotent (an existing bucket is
//     created, a missing one deleted, with success). CreateBucket says
//     whether it created the bucket or found it there: "already exists"
//     is never reported as created (on S3 a HeadBucket comes first, since
//     S3 answers the creation of an owned bucket in us-east-1 with
//     success), so a caller that will delete what it created can tell
//     another's bucket from its own (backupstore/share/pool.Grow records its
//     own with an owner marker). DeleteBucket deletes
//     the data first with DeletePrefix's guarantees (versions, Object Lock
//     never forced, a dry run), and the bucket only once that succeeded
//     and only while it is empty (an object written meanwhile keeps it:
//     the store refuses on S3 and GCS; on Azure, which has no such
//     condition, a listing right before, so one written in that last
//     request's window is the exception); it refuses a URL with prefix=,
//     which names part of a bucket.
//   - WriteMarker never replaces a marker, nor the owner it names: its
//     write is conditional (IfNotExist), and on file:// it writes nothing
//     where the marker exists (fileblob writes an object's metadata before
//     it checks IfNotExist).
//   - Credentials never appear in logs or errors; Credentials print redacted.
//   - No function reads the wall clock except through the injected
//     clock.WithTicker (k8s.io/utils/clock). Logging goes to the logr.Logger
//     in the context.
//
// It does not guarantee:
//
//   - that a non-empty prefix on a blob.PrefixedBucket made by the caller
//     over fileblob or memblob stays within one owner: its listing requests
//     do not show the bucket's prefix, so "b/" under a view of "tenant-a"
//     is "tenant-ab/" and cannot be told apart. Open such buckets with
//     OpenBucket and prefix=, which remembers it, or state it in
//     DeleteOptions.BucketPrefix. (The empty prefix is refused there, see
//     above.) Nor, for CopyBackups, any prefix on such a bucket, the empty
//     one included.
//   - that CopyBackups tells one bucket from another when either was not
//     opened by OpenBucket (and they are not one *blob.Bucket): such
//     buckets are taken to be two, so a copy of a bucket into itself
//     through two handles made elsewhere is not refused. Every mem://
//     OpenBucket is a bucket of its own.
//   - preconditions on objects: DeletePrefix deletes every key under the
//     prefix whatever its content, so on an unversioned bucket a key
//     rewritten after it was listed is deleted with its new content (the
//     intent is that nothing under the prefix stays); on a versioned
//     bucket each request names the version listed.
//   - that two CopyBackups writes of one key on file:// at the same moment
//     cannot both land (fileblob's conditional write is a check before a
//     rename; see WriteMarker).
//   - that nothing is written under the prefix after DeletePrefix returns:
//     stop the writers first (for etcd, the backup sidecar).
//   - atomicity: a deletion that fails part-way leaves part of the data.
//     Keep the owning resource (and its finalizer) until DeletePrefix returns
//     nil.
//   - that empty directories are removed on file:// stores.
//   - whose a bucket is: CreateBucket's created false says only that the
//     bucket was there, not who made it. On S3 in us-east-1, a bucket of
//     the same account created by another caller between CreateBucket's
//     HeadBucket and its creation is reported created (a window of one
//     request): a caller that records ownership checks that no one's
//     marker is there before writing its own (backupstore/share/pool.Grow).
//   - that two WriteMarker calls of one key at the same moment on file://
//     cannot both succeed: fileblob's conditional write is a check before
//     a rename, not one request (every other store's is).
//   - that user metadata is copied: CopyBackups copies content and content
//     type, and adds MetadataSourceModTime.
//   - the Azure batch API against Azurite by default: Azurite deletes a
//     batch more slowly than the same blobs one by one, so DeletePrefix
//     deletes one by one there (account devstoreaccount1) unless
//     DeleteOptions.AzureBatch is BatchAlways.
//   - that noncurrent versions are deleted on Azure: DeletePrefix deletes
//     the current blob of each name there, and a container with blob
//     versioning keeps the older versions (Azurite 3.37 does not support
//     blob versions, so no code path for them is shipped untested). Nor
//     that noncurrent generations are deleted on a GCS bucket whose
//     versioning was turned off after it kept some.
//   - that GCS retention policies and holds or Azure immutability policies
//     and legal holds are reported as ErrRetained: their refusals are
//     plain per-key failures in the *DeleteError. The emulators cannot show
//     them: fake-gcs-server (1.56) accepts a bucket retention policy and a
//     temporary hold but neither returns nor enforces them, and Azurite
//     lists blob immutability policies and legal holds as unsupported.
//   - that a dry run tells versions under GCS retention or holds apart: it
//     marks the versions S3 Object Lock would keep (ObjectVersion.Retention)
//     and no others.
//   - when the store acts on an expiry rule: AWS evaluates lifecycle rules
//     about once a day, so data outlives the time given to ExpirePrefix by
//     up to about two days (MinIO hides due objects from listings at once
//     and deletes them in its scanner). Use it as a backstop ("no data
//     outlives its TTL by more than a day or two, even with the operator
//     gone") and as the fast path for huge prefixes, not for deletion now.
//   - that a concurrent change to the lifecycle configuration is never
//     lost: S3 has no conditional write of it. ExpirePrefix, RemoveExpiry
//     and PruneExpiry read it again right before writing and start over
//     when it changed, and read it after writing: when a rule of theirs is
//     gone they start over, and the rules they read and wrote back that
//     are gone are named in ExpiryResult.Vanished. That leaves a window of
//     one PUT request (and a write the store applies only after the client
//     gave up on it). Fields of foreign rules that the
//     aws-sdk-go-v2 version in use does not know are not written back.
//   - server-side expiry on GCS or Azure: they return ErrExpiryUnsupported.
//     Their lifecycle APIs exist, but fake-gcs-server has no lifecycle
//     engine and Azurite no lifecycle management, so no code path that
//     cannot be run here is shipped.
//   - that a version a listing found is not replaced meanwhile: a version
//     written after the last listing of the last pass stays.
//
// # Errors
//
// Options and arguments the package cannot work with (a Concurrency above
// MaxConcurrency or below zero, an unknown BatchMode, negative copy
// filters, a zero expiry time, a URL parameter or scheme OpenBucket does
// not understand, credentials that lack a key) are ErrInvalidConfig,
// before any request, and the message names the field and its value; an
// unknown scheme is ErrUnsupportedScheme as well, and so is a cloud scheme
// whose provider is not imported (the message names the import); a bucket
// of a store whose provider is not imported, where it cannot be told from
// another (see Providers), is ErrInvalidConfig for every function that
// takes a bucket. The manifest conflicts of
// CopyBackups (a backup whose target key is ManifestKey, a manifest there
// of a copy with other prefixes) are ErrInvalidConfig too, and so is a
// copy whose source and target overlap in one bucket; the message names
// both.
//
// DeletePrefix refuses an unsafe prefix with a *PrefixError that is
// ErrUnsafePrefix before anything is deleted: the prefix given before any
// request, an effective prefix (the bucket's own followed by it) after at
// most the first listing request, which is what shows it on Azure and on
// buckets whose prefix cannot be seen. A deletion that did not finish returns
// a *DeleteError that is ErrIncomplete, names the failed keys (Keys), and also
// matches the cause that stopped it (context.Canceled, a listing error).
// Versions the store keeps under Object Lock make that *DeleteError also
// ErrRetained: errors.As gives a *RetainedError listing each retained
// version (key, version, mode, retain-until, legal hold) and RetryAt, the
// earliest retain-until of a version not under a legal hold (zero when all
// are held: waiting does not help); each such version's KeyError.Err is a
// *Retention. A bucket whose versioning cannot be read (GetBucketVersioning
// refused) fails with a *DeleteError naming that request, before anything
// is deleted.
// CopyBackups returns a *CopyError that is ErrIncomplete likewise, also
// ErrTargetDiffers when a key was not written because the target holds
// other content there (named among its Failed keys), and a
// *PrefixError for an unsafe prefix or effective prefix (naming
// SourcePrefix or TargetPrefix) before anything is written.
// ExpirePrefix, RemoveExpiry and PruneExpiry return ErrExpiryUnsupported for
// stores other than S3, ErrTooManyRules (naming the bucket, the count and
// the limit) when the configuration would pass the store's rule limit, and
// a *PrefixError for an unsafe prefix, each before anything is written. A
// write of the lifecycle configuration that failed transiently is not an
// error unless the call, started over from the read, fails too.
// CreateBucket on gs without a project (URL parameter project=, or the
// project_id of the credentials' service account key) or a location (URL
// parameter region=, or the credentials' region) is ErrInvalidConfig,
// before any request.
// LoadCredentials returns a *SecretError that is ErrSecretNotFound or
// ErrSecretKeyMissing (naming the key), never quoting a value; an unknown
// scheme is ErrUnsupportedScheme.
//
// # As
//
// This package adds no wrapper around *blob.Bucket: reach the provider's
// client with gocloud's Bucket.As, which the providers themselves use:
// *s3.Client (aws-sdk-go-v2) for s3blob (s3store), *container.Client
// (azblob) for azureblob (azurestore), *storage.Client for gcsblob
// (gcsstore). Per-key errors in a *DeleteError
// or *CopyError are the providers' own: use errors.As with
// *smithyhttp.ResponseError or *azcore.ResponseError, or gcerrors.Code.
// Beware gcerrors.NotFound on S3: gocloud's s3blob (v0.46) reports any
// operation error whose text contains "301" as NotFound, so a 403 or 500
// with such a request ID reads as a missing object. This package decides
// "missing" on S3's own codes (NoSuchKey, NotFound, NoSuchBucket) instead.
package backupstore
