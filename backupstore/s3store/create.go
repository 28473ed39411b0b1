package s3store

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

var _ driver.Creator = provider{}

// Create creates the bucket; us-east-1 (and no region) takes no location
// constraint, as S3 requires. BucketAlreadyOwnedByYou is success.
func (provider) Create(ctx context.Context, b *blob.Bucket, name, region string) error {
	var c *s3.Client
	if !b.As(&c) {
		return errors.New("not an s3 bucket")
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(name)}
	if region != "" && region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(region)}
	}
	_, err := c.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	if errors.As(err, &owned) {
		return nil
	}
	return err
}
