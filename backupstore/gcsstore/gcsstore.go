package gcsstore

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

func init() { driver.Register(provider{}) }

// provider is Google Cloud Storage's: gs:// URLs, and every bucket whose
// As reaches a *storage.Client.
type provider struct{}

var _ driver.Provider = provider{}

func (provider) Scheme() string { return gcsblob.Scheme }

// Open builds the client from the credentials, or from the URL's endpoint=
// and anonymous=; with none of them it is gocloud's URL opener (ambient
// credentials, and STORAGE_EMULATOR_HOST when set).
func (provider) Open(ctx context.Context, u *url.URL, c *driver.Credentials) (*blob.Bucket, error) {
	q := u.Query()
	if c == nil && !q.Has("endpoint") && !q.Has("anonymous") {
		// gocloud's opener knows neither of CreateBucket's parameters.
		ambient := *u
		q.Del("project")
		q.Del("region")
		ambient.RawQuery = q.Encode()
		return driver.OpenAmbient(ctx, &ambient)
	}
	bucket := u.Host
	endpoint, anonymous, err := parseQuery(bucket, q)
	if err != nil {
		return nil, err
	}
	ts, err := tokenSource(ctx, bucket, c, anonymous)
	if err != nil {
		return nil, err
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
		// Reads by the JSON API too: the XML API's reads go to a host
		// the client derives, which an emulator or a proxy in front of
		// the endpoint may not answer for (fake-gcs-server serves
		// path-style XML reads only to requests naming its own host, and
		// a read through a proxy then finds no object).
		opts = append(opts, option.WithEndpoint(endpoint), storage.WithJSONReads())
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

// parseQuery reads the URL parameters Open takes: endpoint= (the JSON API's
// base URL) and anonymous=; project= and region= are CreateBucket's.
func parseQuery(bucket string, q url.Values) (endpoint string, anonymous bool, err error) {
	for k, vs := range q {
		v := vs[0]
		switch k {
		case "endpoint":
			if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
				return "", false, fmt.Errorf("%w: open gs bucket %q: URL parameter endpoint=%q: not an absolute URL", backupstore.ErrInvalidConfig, bucket, v)
			}
			endpoint = strings.TrimSuffix(v, "/") + "/storage/v1/"
		case "anonymous":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return "", false, fmt.Errorf("%w: open gs bucket %q: URL parameter %s=%q: not a boolean", backupstore.ErrInvalidConfig, bucket, k, v)
			}
			anonymous = b
		case "project", "region":
			// Where CreateBucket creates the bucket; opening ignores them.
		default:
			return "", false, fmt.Errorf("%w: open gs bucket %q: URL parameter %q is not supported here", backupstore.ErrInvalidConfig, bucket, k)
		}
	}
	return endpoint, anonymous, nil
}

// tokenSource returns the credentials' token source: none when anonymous,
// the service account key of c, or the ambient credentials.
func tokenSource(ctx context.Context, bucket string, c *driver.Credentials, anonymous bool) (oauth2.TokenSource, error) {
	switch {
	case anonymous:
		return nil, nil
	case c != nil:
		if len(c.ServiceAccountJSON) == 0 {
			return nil, fmt.Errorf("%w: open gs bucket %q: credentials lack %s", backupstore.ErrInvalidConfig, bucket, backupstore.SecretKeyServiceAccountJSON)
		}
		gc, err := google.CredentialsFromJSONWithType(ctx, c.ServiceAccountJSON, google.ServiceAccount, "https://www.googleapis.com/auth/devstorage.read_write")
		if err != nil {
			// The parser's message may quote the key file: do not pass it on.
			return nil, fmt.Errorf("%w: open gs bucket %q: %s is not a valid service account key", backupstore.ErrInvalidConfig, bucket, backupstore.SecretKeyServiceAccountJSON)
		}
		return gcp.CredentialsTokenSource(gc), nil
	default:
		gc, err := gcp.DefaultCredentials(ctx)
		if err != nil {
			return nil, fmt.Errorf("backupstore: open gs bucket %q: ambient credentials: %w", bucket, err)
		}
		return gcp.CredentialsTokenSource(gc), nil
	}
}

func (provider) Owns(b *blob.Bucket) bool {
	var c *storage.Client
	return b.As(&c)
}

func (provider) Remover(b *blob.Bucket, _ driver.RemoverOptions) driver.Remover {
	r := &remover{bucket: b}
	b.As(&r.client)
	return r
}

// Transient: GCS errors are judged as every other store's (their HTTP
// status, gcerrors).
func (provider) Transient(error) (transient, known bool) { return false, false }

// NotFound: gocloud's reading of GCS errors is trusted.
func (provider) NotFound(error) (notFound, known bool) { return false, false }
