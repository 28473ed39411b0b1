// Package azurestore gives backupstore Azure Blob Storage: import it,
// usually for its side effect alone,
//
//	import _ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore"
//
// and backupstore.OpenBucket opens azblob:// URLs (with a storage account
// and its shared key from a Secret, or the environment's credentials), and
// DeletePrefix deletes with Blob Batch, 256 blobs a request (one by one
// against Azurite unless DeleteOptions.AzureBatch says otherwise), whoever
// opened the bucket. Forgetting the import is an error that names it,
// before any request. Azure has no server-side expiry here
// (backupstore.ErrExpiryUnsupported); see backupstore's documentation for
// what its functions guarantee.
//
// # What it links
//
// It links the Azure SDK for Go (github.com/Azure/azure-sdk-for-go/sdk)
// and gocloud.dev/blob/azureblob, whose URL opener it registers too.
// Without this package, backupstore.OpenBucket refuses azblob:// URLs, and
// DeletePrefix and CopyBackups refuse buckets they cannot tell from Azure
// ones while gocloud's Azure driver is linked, each with an error that
// names this import.
//
// # As
//
// A bucket opened here is gocloud's azureblob bucket: its As reaches the
// *container.Client (azblob), and per-key errors are *azcore.ResponseError.
package azurestore
