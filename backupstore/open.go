package backupstore

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"weak"

	"cloud.google.com/go/storage"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob" // file:// URLs
	"gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob" // mem:// URLs
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"
)

// Scheme returns the scheme of a bucket URL ("s3", "gs", "azblob", "file",
// "mem"), the argument LoadCredentials needs.
func Scheme(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%w: bucket URL: %w", ErrInvalidConfig, err)
	}
	switch u.Scheme {
	case "s3", "gs", "azblob", "file", "mem":
		return u.Scheme, nil
	}
	return "", fmt.Errorf("%w: %w %q", ErrInvalidConfig, ErrUnsupportedScheme, u.Scheme)
}

// OpenBucket opens the bucket at rawURL, a gocloud URL (s3://, gs://,
// azblob://, file://, mem://). With nil creds it is blob.OpenBucket: the
// provider's ambient credentials (environment, instance metadata) are used.
// With creds, the provider client is built from them alone and no process
// environment variable is read or written, so buckets of different tenants
// can be open at once.
//
// The URL parameter prefix (as blob.PrefixedBucket: every key is under it)
// is understood with every scheme; OpenBucket remembers it, and DeletePrefix
// refuses to delete through a bucket whose prefix does not end in Separator.
// Other URL parameters understood with creds: for s3, region, endpoint,
// use_path_style and disable_https; for azblob, domain, protocol, localemu,
// cdn and storage_account. For gs, with or without creds: endpoint (the
// base URL of the JSON API, e.g. an emulator's "http://127.0.0.1:4443"; the
// client sends every request there) and anonymous (true: an
// unauthenticated client, for emulators). Without endpoint, the emulator
// named by STORAGE_EMULATOR_HOST is used when set, as gocloud does.
func OpenBucket(ctx context.Context, rawURL string, creds *Credentials) (*blob.Bucket, error) {
	scheme, err := Scheme(rawURL)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(rawURL) // parsed by Scheme
	q := u.Query()
	prefix := q.Get("prefix")
	q.Del("prefix")
	var b *blob.Bucket
	switch {
	case scheme == "gs" && (creds != nil || q.Has("endpoint") || q.Has("anonymous")):
		b, err = openGCS(ctx, u.Host, q, creds)
	case creds == nil || scheme == "file" || scheme == "mem":
		u.RawQuery = q.Encode()
		b, err = blob.OpenBucket(ctx, u.String())
		if err != nil {
			return nil, fmt.Errorf("backupstore: open %s bucket: %w", scheme, err)
		}
	case scheme == "s3":
		b, err = openS3(ctx, u.Host, q, creds)
	default: // azblob
		b, err = openAzure(ctx, u.Host, q, creds)
	}
	if err != nil {
		return b, err
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix)
	}
	rememberPrefix(b, prefix)
	return b, nil
}

// bucketPrefixes holds the prefix= of the buckets OpenBucket opened ("" for
// none), keyed
// by a weak pointer so that a closed and collected bucket leaves no entry.
// DeletePrefix needs it where the store's listing requests do not show the
// prefix (fileblob, memblob).
var bucketPrefixes sync.Map // weak.Pointer[blob.Bucket] -> string

func rememberPrefix(b *blob.Bucket, prefix string) {
	wp := weak.Make(b)
	bucketPrefixes.Store(wp, prefix)
	runtime.AddCleanup(b, func(wp weak.Pointer[blob.Bucket]) { bucketPrefixes.Delete(wp) }, wp)
}

// openedPrefix returns the prefix= with which OpenBucket opened b.
func openedPrefix(b *blob.Bucket) (string, bool) {
	v, ok := bucketPrefixes.Load(weak.Make(b))
	if !ok {
		return "", false
	}
	return v.(string), true
}

func openS3(ctx context.Context, bucket string, q url.Values, c *Credentials) (*blob.Bucket, error) {
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return nil, fmt.Errorf("%w: open s3 bucket %q: credentials lack %s or %s", ErrInvalidConfig, bucket, SecretKeyAccessKeyID, SecretKeySecretAccessKey)
	}
	o := s3.Options{
		Region:       c.Region,
		UsePathStyle: c.S3PathStyle,
		Credentials:  awscreds.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, ""),
	}
	if c.Endpoint != "" {
		o.BaseEndpoint = aws.String(c.Endpoint)
	}
	for k, vs := range q {
		v := vs[0]
		switch k {
		case "region":
			o.Region = v
		case "endpoint":
			o.BaseEndpoint = aws.String(v)
		case "use_path_style", "disable_https":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%w: open s3 bucket %q: URL parameter %s=%q: not a boolean", ErrInvalidConfig, bucket, k, v)
			}
			if k == "use_path_style" {
				o.UsePathStyle = b
			} else {
				o.EndpointOptions.DisableHTTPS = b
			}
		default:
			return nil, fmt.Errorf("%w: open s3 bucket %q: URL parameter %q is not supported with explicit credentials", ErrInvalidConfig, bucket, k)
		}
	}
	if o.Region == "" {
		return nil, fmt.Errorf("%w: open s3 bucket %q: no region (URL parameter region= or secret key %s)", ErrInvalidConfig, bucket, SecretKeyRegion)
	}
	b, err := s3blob.OpenBucket(ctx, s3.New(o), bucket, nil)
	if err != nil {
		return nil, fmt.Errorf("backupstore: open s3 bucket %q: %w", bucket, err)
	}
	return b, nil
}

func openGCS(ctx context.Context, bucket string, q url.Values, c *Credentials) (*blob.Bucket, error) {
	var endpoint string
	var anonymous bool
	for k, vs := range q {
		v := vs[0]
		switch k {
		case "endpoint":
			if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
				return nil, fmt.Errorf("%w: open gs bucket %q: URL parameter endpoint=%q: not an absolute URL", ErrInvalidConfig, bucket, v)
			}
			endpoint = strings.TrimSuffix(v, "/") + "/storage/v1/"
		case "anonymous":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%w: open gs bucket %q: URL parameter %s=%q: not a boolean", ErrInvalidConfig, bucket, k, v)
			}
			anonymous = b
		default:
			return nil, fmt.Errorf("%w: open gs bucket %q: URL parameter %q is not supported here", ErrInvalidConfig, bucket, k)
		}
	}
	var ts oauth2.TokenSource
	switch {
	case anonymous:
	case c != nil:
		if len(c.ServiceAccountJSON) == 0 {
			return nil, fmt.Errorf("%w: open gs bucket %q: credentials lack %s", ErrInvalidConfig, bucket, SecretKeyServiceAccountJSON)
		}
		gc, err := google.CredentialsFromJSONWithType(ctx, c.ServiceAccountJSON, google.ServiceAccount, "https://www.googleapis.com/auth/devstorage.read_write")
		if err != nil {
			// The parser's message may quote the key file: do not pass it on.
			return nil, fmt.Errorf("%w: open gs bucket %q: %s is not a valid service account key", ErrInvalidConfig, bucket, SecretKeyServiceAccountJSON)
		}
		ts = gcp.CredentialsTokenSource(gc)
	default:
		gc, err := gcp.DefaultCredentials(ctx)
		if err != nil {
			return nil, fmt.Errorf("backupstore: open gs bucket %q: ambient credentials: %w", bucket, err)
		}
		ts = gcp.CredentialsTokenSource(gc)
	}
	if endpoint == "" && !anonymous {
		// gocloud's own client: it follows STORAGE_EMULATOR_HOST.
		client, err := gcp.NewHTTPClient(gcp.DefaultTransport(), ts)
		if err != nil {
			return nil, fmt.Errorf("backupstore: open gs bucket %q: %w", bucket, err)
		}
		b, err := gcsblob.OpenBucket(ctx, client, bucket, nil)
		if err != nil {
			return nil, fmt.Errorf("backupstore: open gs bucket %q: %w", bucket, err)
		}
		return b, nil
	}
	// An explicit client: its endpoint and HTTP client win over
	// STORAGE_EMULATOR_HOST, so a test can put a proxy in front of an
	// emulator.
	hc := &http.Client{Transport: gcp.DefaultTransport()}
	if ts != nil {
		hc = &http.Client{Transport: &oauth2.Transport{Base: gcp.DefaultTransport(), Source: ts}}
	}
	opts := []option.ClientOption{option.WithHTTPClient(hc)}
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(endpoint))
	}
	sc, err := storage.NewClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("backupstore: open gs bucket %q: %w", bucket, err)
	}
	b, err := gcsblob.OpenBucket(ctx, nil, bucket, &gcsblob.Options{Client: sc})
	if err != nil {
		return nil, fmt.Errorf("backupstore: open gs bucket %q: %w", bucket, err)
	}
	return b, nil
}

func openAzure(ctx context.Context, containerName string, q url.Values, c *Credentials) (*blob.Bucket, error) {
	if c.StorageAccount == "" || c.StorageKey == "" {
		return nil, fmt.Errorf("%w: open azblob container %q: credentials lack %s or %s", ErrInvalidConfig, containerName, SecretKeyStorageAccount, SecretKeyStorageKey)
	}
	so := azureblob.ServiceURLOptions{AccountName: c.StorageAccount}
	for k, vs := range q {
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
				return nil, fmt.Errorf("%w: open azblob container %q: URL parameter %s=%q: not a boolean", ErrInvalidConfig, containerName, k, v)
			}
			if k == "localemu" {
				so.IsLocalEmulator = b
			} else {
				so.IsCDN = b
			}
		default:
			return nil, fmt.Errorf("%w: open azblob container %q: URL parameter %q is not supported with explicit credentials", ErrInvalidConfig, containerName, k)
		}
	}
	svc, err := azureblob.NewServiceURL(&so)
	if err != nil {
		return nil, fmt.Errorf("backupstore: open azblob container %q: %w", containerName, err)
	}
	cred, err := azblob.NewSharedKeyCredential(c.StorageAccount, c.StorageKey)
	if err != nil {
		// The message may quote the key: do not pass it on.
		return nil, fmt.Errorf("%w: open azblob container %q: %s is not a valid shared key", ErrInvalidConfig, containerName, SecretKeyStorageKey)
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
