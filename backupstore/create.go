package backupstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// CreateBucket creates the bucket (container) that rawURL names, with the
// credentials creds as OpenBucket takes them, through the provider's API:
// a pool of shared buckets grows by one (backupstore/share/pool.Pool). created
// says whether this call created it: a bucket that exists already is not
// an error (a retried creation succeeds), and is reported with created
// false, whoever made it. "Already exists" is not "mine": backupstore
// cannot tell whose an existing bucket is (two clusters of one cloud
// account may pick one name), so a caller that will later delete the
// bucket records its ownership where the data is when created is true
// (backupstore/share/pool.Grow writes an owner marker) and refuses a bucket it
// did not create.
//
// file:// creates the directory (its parents as needed) and reports
// created false when the directory exists; mem:// has nothing to create
// and reports created true (every mem:// bucket is new when opened).
// Providers: s3 (region from the URL's region parameter or the
// credentials; an existing bucket is found with HeadBucket before the
// creation, since S3 answers a creation in us-east-1 of a bucket the
// account owns with success), azblob, and gs, which needs a project (the
// URL's project parameter, or the project_id of the credentials' service
// account key) and a location (the URL's region parameter or the
// credentials' region: a bucket is never put in GCS's default location
// unasked).
func CreateBucket(ctx context.Context, rawURL string, creds *Credentials) (created bool, err error) {
	scheme, err := Scheme(rawURL)
	if err != nil {
		return false, err
	}
	switch scheme {
	case "mem":
		return true, nil
	case "file":
		u, _ := url.Parse(rawURL)
		created, err := createDir(u.Path)
		if err != nil {
			return false, fmt.Errorf("backupstore: create bucket %s: %w", rawURL, err)
		}
		return created, nil
	}
	p := driver.Lookup(scheme)
	c, ok := p.(driver.Creator)
	if !ok {
		return false, fmt.Errorf("%w: create bucket %s: the %s provider cannot create buckets", ErrInvalidConfig, rawURL, scheme)
	}
	b, err := OpenBucket(ctx, rawURL, creds)
	if err != nil {
		return false, err
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
	created, err = c.Create(ctx, b, u.Host, o)
	if err != nil {
		return false, fmt.Errorf("backupstore: create bucket %s: %w", rawURL, err)
	}
	return created, nil
}

// createDir creates directory dir, its parents as needed; created is false
// when dir exists. The last element is made with Mkdir, which fails when
// it exists, so that of two callers only one is told it created it.
func createDir(dir string) (created bool, err error) {
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, err
	}
	err = os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		fi, serr := os.Stat(dir)
		if serr == nil && !fi.IsDir() {
			return false, fmt.Errorf("%s exists and is not a directory", dir)
		}
		return false, serr
	}
	return err == nil, err
}

// BucketURL is rawURL with its bucket (container) named name instead,
// its parameters kept: the URL of a pool's next bucket, made from its
// first (backupstore/share/pool.Grow). file:// names the directory's last
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
