package gcsstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"google.golang.org/api/googleapi"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

var (
	_ driver.Creator       = provider{}
	_ driver.BucketDeleter = provider{}
)

func client(b *blob.Bucket) (*storage.Client, error) {
	var c *storage.Client
	if !b.As(&c) {
		return nil, errors.New("not a gs bucket")
	}
	return c, nil
}

// Create creates the bucket in o.Project at location o.Region. Both are
// required: a bucket URL names no project, and a bucket created without a
// location lands in GCS's default (the US multi-region), which an operator
// of another region would not expect. A name that is taken (409, by this
// project or another one) is reported as not created.
func (provider) Create(ctx context.Context, b *blob.Bucket, name string, o driver.CreateOptions) (bool, error) {
	if o.Project == "" {
		return false, fmt.Errorf("%w: a gs bucket is created in a project: give the URL parameter project= or credentials whose %s has a project_id",
			backupstore.ErrInvalidConfig, backupstore.SecretKeyServiceAccountJSON)
	}
	if o.Region == "" {
		return false, fmt.Errorf("%w: a gs bucket is created at a location: give the URL parameter region= (\"europe-west1\", \"EU\") or the credentials' %s",
			backupstore.ErrInvalidConfig, backupstore.SecretKeyRegion)
	}
	c, err := client(b)
	if err != nil {
		return false, err
	}
	err = c.Bucket(name).Create(ctx, o.Project, &storage.BucketAttrs{Location: o.Region})
	if apiCode(err) == http.StatusConflict {
		return false, nil
	}
	return err == nil, err
}

// BucketExists asks for the bucket's attributes: ErrBucketNotExist is a
// bucket that does not exist; every other error (403: someone else's) is
// an error.
func (provider) BucketExists(ctx context.Context, b *blob.Bucket, name string) (bool, error) {
	c, err := client(b)
	if err != nil {
		return false, err
	}
	_, err = c.Bucket(name).Attrs(ctx)
	if errors.Is(err, storage.ErrBucketNotExist) {
		return false, nil
	}
	return err == nil, err
}

// DeleteBucket deletes the emptied bucket; one already gone is success. GCS
// refuses a bucket that still holds an object or a noncurrent generation
// (409), which is returned.
func (provider) DeleteBucket(ctx context.Context, b *blob.Bucket, name string) error {
	c, err := client(b)
	if err != nil {
		return err
	}
	err = c.Bucket(name).Delete(ctx)
	if errors.Is(err, storage.ErrBucketNotExist) || apiCode(err) == http.StatusNotFound {
		return nil
	}
	return err
}

// apiCode is the HTTP status of a JSON API error, 0 for any other.
func apiCode(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}
