package s3store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithy "github.com/aws/smithy-go"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// maxLifecycleRules is S3's limit of rules in one configuration.
const maxLifecycleRules = 1000

// Lifecycle: see driver.Expirer.
func (r *remover) Lifecycle(ctx context.Context, run driver.Run) (driver.Lifecycle, error) {
	if err := r.learn(ctx, run); err != nil {
		return nil, err
	}
	listed, _ := r.ListedPrefix()
	return &lifecycle{client: r.client, bucket: aws.ToString(r.bucket.Load()), prefix: listed, run: run}, nil
}

// lifecycle is the S3 lifecycle configuration of one bucket, seen through
// one prefix.
type lifecycle struct {
	client *s3.Client
	bucket string
	prefix string // the effective prefix, as S3 spells it
	run    driver.Run
}

func (lc *lifecycle) Bucket() string { return lc.bucket }
func (lc *lifecycle) Prefix() string { return lc.prefix }
func (lc *lifecycle) MaxRules() int  { return maxLifecycleRules }

func (lc *lifecycle) Versioned(ctx context.Context) (bool, error) {
	var out *s3.GetBucketVersioningOutput
	err := lc.run.Retry(ctx, func() error {
		var err error
		out, err = lc.client.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(lc.bucket)})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("backupstore: expiry: GetBucketVersioning of bucket %q: %w", lc.bucket, err)
	}
	return out.Status != "", nil
}

func (lc *lifecycle) Rules(ctx context.Context) ([]driver.Rule, error) {
	var out *s3.GetBucketLifecycleConfigurationOutput
	err := lc.run.Retry(ctx, func() error {
		var err error
		out, err = lc.client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(lc.bucket)})
		return err
	})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchLifecycleConfiguration" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backupstore: expiry: GetBucketLifecycleConfiguration of bucket %q: %w", lc.bucket, err)
	}
	if len(out.Rules) == 0 {
		return nil, nil
	}
	rules := make([]driver.Rule, len(out.Rules))
	for i, r := range out.Rules {
		rules[i] = rule{r}
	}
	return rules, nil
}

// Write sends the request once, with the SDK's own retries off: a write
// whose answer was lost may have been applied, and sending the same
// configuration again would erase whatever another writer did in between.
// S3 refuses a configuration without rules: none deletes it.
func (lc *lifecycle) Write(ctx context.Context, rules []driver.Rule) error {
	var err error
	if len(rules) == 0 {
		_, err = lc.client.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: aws.String(lc.bucket)}, sendOnce)
	} else {
		rs := make([]s3types.LifecycleRule, len(rules))
		for i, r := range rules {
			rs[i] = r.(rule).LifecycleRule
		}
		_, err = lc.client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
			Bucket:                 aws.String(lc.bucket),
			LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: rs},
		}, sendOnce)
	}
	if err != nil {
		return fmt.Errorf("backupstore: expiry: write the lifecycle configuration of bucket %q: %w", lc.bucket, err)
	}
	return nil
}

// sendOnce turns the SDK's retries off for one operation.
func sendOnce(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

func (lc *lifecycle) IsEmpty(ctx context.Context, prefix string) (bool, error) {
	var out *s3.ListObjectVersionsOutput
	err := lc.run.Retry(ctx, func() error {
		var err error
		out, err = lc.client.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(lc.bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(1)})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("backupstore: expiry: list prefix %q of bucket %q: %w", prefix, lc.bucket, err)
	}
	return len(out.Versions) == 0 && len(out.DeleteMarkers) == 0, nil
}

func (lc *lifecycle) NewRules(expireID, markersID, prefix string, date time.Time, versioned bool) []driver.Rule {
	r := s3types.LifecycleRule{
		ID:         aws.String(expireID),
		Status:     s3types.ExpirationStatusEnabled,
		Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String(prefix)},
		Expiration: &s3types.LifecycleExpiration{Date: aws.Time(date)},
	}
	if !versioned {
		return []driver.Rule{rule{r}}
	}
	r.NoncurrentVersionExpiration = &s3types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}
	// S3 takes ExpiredObjectDeleteMarker only in a rule without a date.
	markers := s3types.LifecycleRule{
		ID:         aws.String(markersID),
		Status:     s3types.ExpirationStatusEnabled,
		Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String(prefix)},
		Expiration: &s3types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)},
	}
	return []driver.Rule{rule{r}, rule{markers}}
}

// rule is one S3 lifecycle rule, every field of it as read.
type rule struct{ s3types.LifecycleRule }

func (r rule) ID() string { return aws.ToString(r.LifecycleRule.ID) }

// Prefix is the prefix the rule filters on: in the filter, or in the
// deprecated Prefix of the rule.
func (r rule) Prefix() string {
	if f := r.Filter; f != nil {
		if f.Prefix != nil {
			return *f.Prefix
		}
		if f.And != nil {
			return aws.ToString(f.And.Prefix)
		}
	}
	//lint:ignore SA1019 foreign rules may still use it
	return aws.ToString(r.LifecycleRule.Prefix) //nolint:staticcheck
}

func (r rule) Date() time.Time {
	if e := r.Expiration; e != nil && e.Date != nil {
		return e.Date.UTC()
	}
	return time.Time{}
}

func (r rule) NoncurrentDays() int32 {
	if n := r.NoncurrentVersionExpiration; n != nil {
		return aws.ToInt32(n.NoncurrentDays)
	}
	return 0
}

func (r rule) ExpiredDeleteMarkers() bool {
	return r.Expiration != nil && aws.ToBool(r.Expiration.ExpiredObjectDeleteMarker)
}
