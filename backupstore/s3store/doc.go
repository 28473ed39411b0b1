// Package s3store gives backupstore Amazon S3 and S3-compatible stores
// (MinIO and others): import it, usually for its side effect alone,
//
//	import _ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"
//
// and backupstore.OpenBucket opens s3:// URLs (with credentials from a
// Secret, or the environment's), and backupstore's functions use S3's own
// API on every S3 bucket, whoever opened it (What it adds). Forgetting the
// import is an error that names it, before any request.
//
// See backupstore's documentation for what these functions guarantee.
//
// # What it adds
//
//   - DeletePrefix deletes with DeleteObjects, 1,000 keys a request, and on
//     a versioned bucket every version and delete marker, reporting the
//     versions S3 Object Lock keeps (backupstore.ErrRetained);
//   - ExpirePrefix, RemoveExpiry and PruneExpiry install and remove S3
//     lifecycle rules;
//   - a missing object is told from an access-denied or server error by
//     S3's own error codes, not by gocloud's reading of the message.
//
// It links the AWS SDK for Go v2 (github.com/aws/aws-sdk-go-v2) and
// gocloud.dev/blob/s3blob, whose URL opener it registers too. Without
// this package, backupstore.OpenBucket refuses s3:// URLs, and
// DeletePrefix, CopyBackups and the expiry functions refuse buckets they
// cannot tell from S3 ones while gocloud's S3 driver is linked, each with
// an error that names this import.
//
// # As
//
// A bucket opened here is gocloud's s3blob bucket: its As reaches the
// *s3.Client (aws-sdk-go-v2), and per-key errors are *smithyhttp.ResponseError
// (github.com/aws/smithy-go/transport/http) and smithy.APIError.
package s3store
