package s3store

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

var _ driver.Creator = provider{}

// Create creates the bucket; us-east-1 (and no region) takes no location
// constraint, as S3 requires. A bucket that exists is reported as not
// created: HeadBucket finds it first, since a creation in us-east-1 of a
// bucket the account owns answers success (S3's legacy behaviour), and
// BucketAlreadyOwnedByYou (another caller of this account was first) and
// BucketAlreadyExists (another account's) say so after. A HeadBucket that
// is refused (403: another account's bucket) is an error.
func (p provider) Create(ctx context.Context, b *blob.Bucket, name string, o driver.CreateOptions) (bool, error) {
	region := o.Region
	var c *s3.Client
	if !b.As(&c) {
		return false, errors.New("not an s3 bucket")
	}
	if exists, err := p.BucketExists(ctx, b, name); err != nil || exists {
		return false, err
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(name)}
	if region != "" && region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(region)}
	}
	_, err := c.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	var taken *types.BucketAlreadyExists
	if errors.As(err, &owned) || errors.As(err, &taken) {
		return false, nil
	}
	return err == nil, err
}

var _ driver.BucketDeleter = provider{}

// BucketExists asks HeadBucket: NotFound (404) is a bucket that does not
// exist; every other error (403: someone else's) is an error.
func (provider) BucketExists(ctx context.Context, b *blob.Bucket, name string) (bool, error) {
	var c *s3.Client
	if !b.As(&c) {
		return false, errors.New("not an s3 bucket")
	}
	_, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)})
	var nf *types.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	return err == nil, err
}

// DeleteBucket deletes the empty bucket; NoSuchBucket is success.
func (provider) DeleteBucket(ctx context.Context, b *blob.Bucket, name string) error {
	var c *s3.Client
	if !b.As(&c) {
		return errors.New("not an s3 bucket")
	}
	_, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket" {
		return nil
	}
	return err
}
