package azurestore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

func init() { driver.Register(provider{}) }

// provider is Azure Blob Storage's: azblob:// URLs, and every bucket whose
// As reaches a *container.Client.
type provider struct{}

var _ driver.Provider = provider{}

func (provider) Scheme() string { return azureblob.Scheme }

// Open builds the client from the storage account and its shared key;
// without credentials it is gocloud's URL opener (the environment's).
func (provider) Open(ctx context.Context, u *url.URL, c *driver.Credentials) (*blob.Bucket, error) {
	if c == nil {
		return driver.OpenAmbient(ctx, u)
	}
	containerName := u.Host
	if c.StorageAccount == "" || c.StorageKey == "" {
		return nil, fmt.Errorf("%w: open azblob container %q: credentials lack %s or %s", backupstore.ErrInvalidConfig, containerName, backupstore.SecretKeyStorageAccount, backupstore.SecretKeyStorageKey)
	}
	so := azureblob.ServiceURLOptions{AccountName: c.StorageAccount}
	for k, vs := range u.Query() {
		v := vs[0]
		switch k {
		case "domain":
			so.StorageDomain = v
		case "protocol":
			so.Protocol = v
		case "storage_account":
			so.AccountName = v
		case "localemu", "cdn":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%w: open azblob container %q: URL parameter %s=%q: not a boolean", backupstore.ErrInvalidConfig, containerName, k, v)
			}
			if k == "localemu" {
				so.IsLocalEmulator = b
			} else {
				so.IsCDN = b
			}
		default:
			return nil, fmt.Errorf("%w: open azblob container %q: URL parameter %q is not supported with explicit credentials", backupstore.ErrInvalidConfig, containerName, k)
		}
	}
	svc, err := azureblob.NewServiceURL(&so)
	if err != nil {
		return nil, fmt.Errorf("backupstore: open azblob container %q: %w", containerName, err)
	}
	cred, err := azblob.NewSharedKeyCredential(c.StorageAccount, c.StorageKey)
	if err != nil {
		// The message may quote the key: do not pass it on.
		return nil, fmt.Errorf("%w: open azblob container %q: %s is not a valid shared key", backupstore.ErrInvalidConfig, containerName, backupstore.SecretKeyStorageKey)
	}
	client, err := container.NewClientWithSharedKeyCredential(string(svc)+"/"+containerName, cred, nil)
	if err != nil {
		return nil, fmt.Errorf("backupstore: open azblob container %q: %w", containerName, err)
	}
	b, err := azureblob.OpenBucket(ctx, client, nil)
	if err != nil {
		return nil, fmt.Errorf("backupstore: open azblob container %q: %w", containerName, err)
	}
	return b, nil
}

func (provider) Owns(b *blob.Bucket) bool {
	var c *container.Client
	return b.As(&c)
}

func (provider) Remover(b *blob.Bucket, opts driver.RemoverOptions) driver.Remover {
	var cc *container.Client
	b.As(&cc)
	// Single deletes go 16 at a time within each batch, so that
	// Concurrency bounds the requests in flight to 16 times it.
	r := &remover{client: cc, perObject: 16}
	switch opts.AzureBatch {
	case driver.BatchNever:
		r.fallback.Store(true)
	case driver.BatchAuto:
		// Azurite (whose account is always devstoreaccount1) takes longer
		// for a batch of n deletes than for n deletes 16 at a time.
		r.fallback.Store(strings.Contains(cc.URL(), "/"+azuriteAccount+"/"))
	}
	return r
}

// azuriteAccount is the account of the Azure Storage emulator.
const azuriteAccount = "devstoreaccount1"

// Transient judges the HTTP status of a response.
func (provider) Transient(err error) (transient, known bool) {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return driver.TransientStatus(re.StatusCode), true
	}
	return false, false
}

// NotFound: gocloud's reading of Azure errors is trusted.
func (provider) NotFound(error) (notFound, known bool) { return false, false }
