package backupstore

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"weak"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// URLs
	_ "gocloud.dev/blob/memblob"  // mem:// URLs

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
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
// azblob://, file://, mem://). The cloud schemes need their provider
// package imported (see Providers in the package doc): without it,
// OpenBucket returns an error that is ErrUnsupportedScheme and names the
// import. With nil creds it is blob.OpenBucket: the provider's ambient
// credentials (environment, instance metadata) are used. With creds, the
// provider client is built from them alone and no process environment
// variable is read or written, so buckets of different tenants can be
// open at once.
//
// The URL parameter prefix (as blob.PrefixedBucket: every key is under it)
// is understood with every scheme; OpenBucket remembers it, and DeletePrefix
// refuses to delete through a bucket whose prefix does not end in Separator.
// Other URL parameters understood with creds: for s3, region, endpoint,
// use_path_style and disable_https; for azblob, domain, protocol, localemu,
// cdn and storage_account. For gs, with or without creds: endpoint (the
// base URL of the JSON API, e.g. an emulator's "http://127.0.0.1:4443"; the
// client sends every request there, reads included, which go by the JSON
// API rather than the XML API) and anonymous (true: an
// unauthenticated client, for emulators). Without endpoint, the emulator
// named by STORAGE_EMULATOR_HOST is used when set, as gocloud does.
func OpenBucket(ctx context.Context, rawURL string, creds *Credentials) (*blob.Bucket, error) {
	bu, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return openURL(ctx, bu, creds)
}

// openURL opens the bucket of a parsed URL, as OpenBucket does.
func openURL(ctx context.Context, bu URL, creds *Credentials) (*blob.Bucket, error) {
	scheme, u := bu.ID.Scheme, bu.withoutPrefix()
	var b *blob.Bucket
	var err error
	if scheme == "file" || scheme == "mem" {
		b, err = blob.OpenBucket(ctx, u.String())
		if err != nil {
			return nil, fmt.Errorf("backupstore: open %s bucket: %w", scheme, err)
		}
	} else {
		p := driver.Lookup(scheme)
		if p == nil {
			return nil, fmt.Errorf("%w: %w %q: no provider of it is linked into this program: add import _ %q", ErrInvalidConfig, ErrUnsupportedScheme, scheme, providerPackages[scheme])
		}
		b, err = p.Open(ctx, u, creds.driver())
		if err != nil {
			return nil, err
		}
	}
	if bu.Prefix != "" {
		b = blob.PrefixedBucket(b, bu.Prefix)
	}
	rememberURL(b, bu)
	return b, nil
}

// providerPackages are the packages that provide the cloud schemes.
var providerPackages = map[string]string{
	"s3":     "github.com/groundskeeper-io/groundskeeper/backupstore/s3store",
	"gs":     "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore",
	"azblob": "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore",
}

// driver returns c for a provider (nil for nil).
func (c *Credentials) driver() *driver.Credentials {
	if c == nil {
		return nil
	}
	return &driver.Credentials{
		AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey,
		Region: c.Region, Endpoint: c.Endpoint, S3PathStyle: c.S3PathStyle,
		ServiceAccountJSON: c.ServiceAccountJSON,
		StorageAccount:     c.StorageAccount, StorageKey: c.StorageKey,
	}
}

// openedURLs holds the parsed URL of the buckets OpenBucket opened (its
// identity and its prefix=), keyed by a weak pointer so that a closed and
// collected bucket leaves no entry. DeletePrefix needs the prefix where
// the store's listing requests do not show it (fileblob, memblob),
// storeOf to know a bucket OpenBucket opened, and CopyBackups the
// identity, to refuse a copy of a bucket into itself.
var openedURLs sync.Map // weak.Pointer[blob.Bucket] -> URL

func rememberURL(b *blob.Bucket, bu URL) {
	wp := weak.Make(b)
	openedURLs.Store(wp, bu)
	runtime.AddCleanup(b, func(wp weak.Pointer[blob.Bucket]) { openedURLs.Delete(wp) }, wp)
}

// openedURL returns the URL with which OpenBucket opened b; ok is false
// for a bucket OpenBucket did not open.
func openedURL(b *blob.Bucket) (URL, bool) {
	v, ok := openedURLs.Load(weak.Make(b))
	if !ok {
		return URL{}, false
	}
	return v.(URL), true
}

// openedPrefix returns the prefix= with which OpenBucket opened b; ok is
// false for a bucket OpenBucket did not open.
func openedPrefix(b *blob.Bucket) (string, bool) {
	u, ok := openedURL(b)
	return u.Prefix, ok
}

// storeOf returns the provider that owns b, or nil for a bucket that no
// provider owns (fileblob, memblob, a driver of someone else's). It refuses
// a bucket it cannot tell from one of a cloud store whose provider is not
// linked: where gocloud's driver for that store is linked into the
// program (its URL scheme is registered) and b is neither a bucket
// OpenBucket opened nor a fileblob one. Deleting such a bucket without
// its provider would lose what the package doc promises there (S3 versions
// and Object Lock, GCS generations, S3's own not-found codes).
func storeOf(b *blob.Bucket) (driver.Provider, error) {
	for _, p := range driver.Providers() {
		if p.Owns(b) {
			return p, nil
		}
	}
	if _, ok := openedPrefix(b); ok {
		return nil, nil // file or mem: OpenBucket opens the others through their provider
	}
	var fi os.FileInfo
	if b.As(&fi) {
		return nil, nil // fileblob
	}
	var missing []string
	for scheme := range providerPackages {
		if driver.Lookup(scheme) == nil && blob.DefaultURLMux().ValidBucketScheme(scheme) {
			missing = append(missing, scheme)
		}
	}
	if len(missing) == 0 {
		return nil, nil
	}
	sort.Strings(missing)
	var imports []string
	for _, s := range missing {
		imports = append(imports, fmt.Sprintf("import _ %q", providerPackages[s]))
	}
	return nil, fmt.Errorf("%w: the bucket's store is not known: gocloud's driver for %s is linked into this program, but not backupstore's provider, without which such a bucket would be handled as a plain one (no versions, no batches, no Object Lock): add %s",
		ErrInvalidConfig, strings.Join(missing, " and "), strings.Join(imports, " and "))
}
