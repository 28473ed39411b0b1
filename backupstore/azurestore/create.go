package azurestore

import (
	"context"
	"errors"
	"fmt"

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

// DeleteBucket deletes the container only if it holds no blob: Azure
// deletes a container with whatever it holds and has no condition on its
// contents (a container's Last-Modified and its lease do not change with
// its blobs' writes), so the container is listed right before the
// deletion, and one that holds a blob (written after the caller emptied
// it) is not deleted. A blob written between that listing and the
// deletion still goes with the container: one request's window, where S3
// and GCS refuse to delete a bucket that is not empty.
// ContainerNotFound and ContainerBeingDeleted are success.
func (provider) DeleteBucket(ctx context.Context, b *blob.Bucket, _ string) error {
	var c *container.Client
	if !b.As(&c) {
		return errors.New("not an azblob container")
	}
	one := int32(1)
	page, err := c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{MaxResults: &one}).NextPage(ctx)
	if bloberror.HasCode(err, bloberror.ContainerNotFound, bloberror.ContainerBeingDeleted) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the container before its deletion: %w", err)
	}
	if page.Segment != nil && len(page.Segment.BlobItems) > 0 && page.Segment.BlobItems[0].Name != nil {
		return fmt.Errorf("the container holds %q, written after it was emptied: not deleted (run again)", *page.Segment.BlobItems[0].Name)
	}
	_, err = c.Delete(ctx, nil)
	if bloberror.HasCode(err, bloberror.ContainerNotFound, bloberror.ContainerBeingDeleted) {
		return nil
	}
	return err
}
