// Package gcsstore gives backupstore Google Cloud Storage: import it,
// usually for its side effect alone,
//
//	import _ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"
//
// and backupstore.OpenBucket opens gs:// URLs, DeletePrefix deletes every
// generation of every object under a prefix on a bucket with object
// versioning, whoever opened the bucket, and CreateBucket and DeleteBucket
// create and delete buckets. Forgetting the import is an error that names
// it, before any request. GCS has no server-side expiry here
// (backupstore.ErrExpiryUnsupported); see backupstore's documentation for
// what its functions guarantee.
//
// # Opening and creating buckets
//
// A gs:// URL opens with a service account key from a Secret, the
// environment's credentials, or an emulator's endpoint= and anonymous=true.
// A bucket is created in a project at a location, which the URL parameters
// project= and region= give (opening ignores both), or the credentials:
// the service account key's project_id and the Secret's region.
//
// It links cloud.google.com/go/storage (with its gRPC and OpenTelemetry
// dependencies) and gocloud.dev/blob/gcsblob, whose URL opener it
// registers too. Without this package, backupstore.OpenBucket refuses gs://
// URLs, and DeletePrefix and CopyBackups refuse buckets they cannot tell
// from GCS ones while gocloud's GCS driver is linked, each with an error
// that names this import.
//
// # As
//
// A bucket opened here is gocloud's gcsblob bucket: its As reaches the
// *storage.Client.
package gcsstore
