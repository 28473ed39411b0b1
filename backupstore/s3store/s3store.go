package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

func init() { driver.Register(provider{}) }

// provider is S3's: s3:// URLs, and every bucket whose As reaches an
// *s3.Client.
type provider struct{}

var _ driver.Provider = provider{}

func (provider) Scheme() string { return s3blob.Scheme }

// Open builds the client from the credentials alone; without them it is
// gocloud's URL opener (the environment's and the instance's credentials).
func (provider) Open(ctx context.Context, u *url.URL, c *driver.Credentials) (*blob.Bucket, error) {
	if c == nil {
		return openAmbient(ctx, u)
	}
	bucket := u.Host
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return nil, fmt.Errorf("%w: open s3 bucket %q: credentials lack %s or %s", backupstore.ErrInvalidConfig, bucket, backupstore.SecretKeyAccessKeyID, backupstore.SecretKeySecretAccessKey)
	}
	o := s3.Options{
		Region:       c.Region,
		UsePathStyle: c.S3PathStyle,
		Credentials:  awscreds.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, ""),
		// An object without an additional checksum (one written by another
		// tool, or by CopyBackups' stream, which the store checks by MD5)
		// is read without a warning for each read.
		DisableLogOutputChecksumValidationSkipped: true,
	}
	if c.Endpoint != "" {
		o.BaseEndpoint = aws.String(c.Endpoint)
	}
	for k, vs := range u.Query() {
		v := vs[0]
		switch k {
		case "region":
			o.Region = v
		case "endpoint":
			o.BaseEndpoint = aws.String(v)
		case "use_path_style", "disable_https":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%w: open s3 bucket %q: URL parameter %s=%q: not a boolean", backupstore.ErrInvalidConfig, bucket, k, v)
			}
			if k == "use_path_style" {
				o.UsePathStyle = b
			} else {
				o.EndpointOptions.DisableHTTPS = b
			}
		default:
			return nil, fmt.Errorf("%w: open s3 bucket %q: URL parameter %q is not supported with explicit credentials", backupstore.ErrInvalidConfig, bucket, k)
		}
	}
	if o.Region == "" {
		return nil, fmt.Errorf("%w: open s3 bucket %q: no region (URL parameter region= or secret key %s)", backupstore.ErrInvalidConfig, bucket, backupstore.SecretKeyRegion)
	}
	b, err := s3blob.OpenBucket(ctx, s3.New(o), bucket, nil)
	if err != nil {
		return nil, fmt.Errorf("backupstore: open s3 bucket %q: %w", bucket, err)
	}
	return b, nil
}

// openAmbient opens the bucket by gocloud's URL opener, then again on a
// copy of its client that does not log, for every read of an object
// stored without an additional checksum (one written by another tool, by
// an older SDK, or by CopyBackups' stream, which the store checks by
// MD5), the SDK's warning "Response has no supported checksum": an
// operator reading markers on every pass would log it for each. The
// opener's own options (ssetype, kmskeyid, the checksum calculation) are
// kept.
func openAmbient(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	b, err := driver.OpenAmbient(ctx, u)
	if err != nil {
		return nil, err
	}
	var c *s3.Client
	if !b.As(&c) {
		return b, nil
	}
	o := c.Options()
	q := u.Query()
	opts := &s3blob.Options{KMSEncryptionID: q.Get("kmskeyid"), RequestChecksumCalculation: o.RequestChecksumCalculation}
	if v := q.Get("ssetype"); v != "" {
		for _, t := range s3types.ServerSideEncryptionAes256.Values() {
			if strings.EqualFold(string(t), v) {
				opts.EncryptionType = t
			}
		}
	}
	if err := b.Close(); err != nil {
		return nil, fmt.Errorf("backupstore: open s3 bucket %q: %w", u.Host, err)
	}
	quiet := s3.New(o, func(o *s3.Options) { o.DisableLogOutputChecksumValidationSkipped = true })
	b, err = s3blob.OpenBucket(ctx, quiet, u.Host, opts)
	if err != nil {
		return nil, fmt.Errorf("backupstore: open s3 bucket %q: %w", u.Host, err)
	}
	return b, nil
}

func (provider) Owns(b *blob.Bucket) bool {
	var c *s3.Client
	return b.As(&c)
}

func (provider) Remover(b *blob.Bucket, opts driver.RemoverOptions) driver.Remover {
	r := &remover{bypassGovernance: opts.BypassGovernance}
	b.As(&r.client)
	return r
}

// Transient judges the per-key error codes of DeleteObjects and the HTTP
// status of a response.
func (provider) Transient(err error) (transient, known bool) {
	var ke *keyError
	if errors.As(err, &ke) {
		switch ke.Code {
		case "InternalError", "SlowDown", "ServiceUnavailable", "RequestTimeout", "OperationAborted":
			return true, true
		}
		return false, true
	}
	var se *smithyhttp.ResponseError
	if errors.As(err, &se) && se.Response != nil {
		return driver.TransientStatus(se.Response.StatusCode), true
	}
	return false, false
}

// NotFound trusts only S3's own not-found codes for an operation error:
// gocloud's s3blob reports every operation error whose text contains "301"
// as NotFound.
func (provider) NotFound(err error) (notFound, known bool) {
	var oe *smithy.OperationError
	if !errors.As(err, &oe) {
		return false, false
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false, true
	}
	switch ae.ErrorCode() {
	case "NoSuchKey", "NotFound", "NoSuchBucket":
		return true, true
	}
	return false, true
}
