package backupstore

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// CreateBucket creates the bucket (container) that rawURL names, with the
// credentials creds as OpenBucket takes them, through the provider's API:
// a pool of shared buckets grows by one (backupstore/share.Pool). A bucket
// that exists and is the caller's already is not an error, so a retried
// creation succeeds. file:// creates the directory; mem:// has nothing to
// create. Providers: s3 (region from the URL's region parameter or the
// credentials), azblob, and gs, which needs a project (the URL's project
// parameter, or the project_id of the credentials' service account key)
// and a location (the URL's region parameter or the credentials' region:
// a bucket is never put in GCS's default location unasked).
func CreateBucket(ctx context.Context, rawURL string, creds *Credentials) error {
	scheme, err := Scheme(rawURL)
	if err != nil {
		return err
	}
	switch scheme {
	case "mem":
		return nil
	case "file":
		u, _ := url.Parse(rawURL)
		if err := os.MkdirAll(u.Path, 0o755); err != nil {
			return fmt.Errorf("backupstore: create bucket %s: %w", rawURL, err)
		}
		return nil
	}
	p := driver.Lookup(scheme)
	c, ok := p.(driver.Creator)
	if !ok {
		return fmt.Errorf("%w: create bucket %s: the %s provider cannot create buckets", ErrInvalidConfig, rawURL, scheme)
	}
	b, err := OpenBucket(ctx, rawURL, creds)
	if err != nil {
		return err
	}
	defer b.Close()
	u, _ := url.Parse(rawURL)
	o := driver.CreateOptions{Region: u.Query().Get("region"), Project: u.Query().Get("project")}
	if o.Region == "" && creds != nil {
		o.Region = creds.Region
	}
	if o.Project == "" && creds != nil && len(creds.ServiceAccountJSON) > 0 {
		var key struct {
			ProjectID string `json:"project_id"`
		}
		// A key that does not parse has no project; OpenBucket has
		// refused it already.
		_ = json.Unmarshal(creds.ServiceAccountJSON, &key)
		o.Project = key.ProjectID
	}
	if err := c.Create(ctx, b, u.Host, o); err != nil {
		return fmt.Errorf("backupstore: create bucket %s: %w", rawURL, err)
	}
	return nil
}

// BucketURL is rawURL with its bucket (container) named name instead,
// its parameters kept: the URL of a pool's next bucket, made from its
// first (backupstore/share.Grow). file:// names the directory's last
// element; mem:// takes the name as its host (an in-memory bucket has
// none). name is not checked against the provider's naming rules:
// CreateBucket's provider does that.
func BucketURL(rawURL, name string) (string, error) {
	scheme, err := Scheme(rawURL)
	if err != nil {
		return "", err
	}
	if name == "" || strings.ContainsAny(name, "/?#") {
		return "", fmt.Errorf("%w: bucket name %q", ErrInvalidConfig, name)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("%w: bucket URL %q: %v", ErrInvalidConfig, rawURL, err)
	}
	switch {
	case scheme == "file":
		if strings.Trim(u.Path, "/") == "" {
			return "", fmt.Errorf("%w: bucket URL %q names no directory", ErrInvalidConfig, rawURL)
		}
		u.Path = path.Join(path.Dir(strings.TrimSuffix(u.Path, "/")), name)
	case u.Host == "" && scheme != "mem":
		return "", fmt.Errorf("%w: bucket URL %q names no bucket", ErrInvalidConfig, rawURL)
	default:
		u.Host = name
	}
	return u.String(), nil
}
