package azurestore

import (
	"context"
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

var _ driver.Creator = provider{}

// Create creates the container (Azure has no region per container).
// ContainerAlreadyExists is reported as not created: the account is
// shared by whoever holds its key.
func (provider) Create(ctx context.Context, b *blob.Bucket, _ string, _ driver.CreateOptions) (bool, error) {
	var c *container.Client
	if !b.As(&c) {
		return false, errors.New("not an azblob container")
	}
	_, err := c.Create(ctx, nil)
	if bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return false, nil
	}
	return err == nil, err
}

var _ driver.BucketDeleter = provider{}

// BucketExists reads the container's properties: ContainerNotFound is a
// container that does not exist.
func (provider) BucketExists(ctx context.Context, b *blob.Bucket, _ string) (bool, error) {
	var c *container.Client
	if !b.As(&c) {
		return false, errors.New("not an azblob container")
	}
	_, err := c.GetProperties(ctx, nil)
	if bloberror.HasCode(err, bloberror.ContainerNotFound) {
		return false, nil
	}
	return err == nil, err
}

// DeleteBucket deletes the container (with any blob written after the
// caller emptied it); ContainerNotFound and ContainerBeingDeleted are
// success.
func (provider) DeleteBucket(ctx context.Context, b *blob.Bucket, _ string) error {
	var c *container.Client
	if !b.As(&c) {
		return errors.New("not an azblob container")
	}
	_, err := c.Delete(ctx, nil)
	if bloberror.HasCode(err, bloberror.ContainerNotFound, bloberror.ContainerBeingDeleted) {
		return nil
	}
	return err
}
