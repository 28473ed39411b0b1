package backupstore

import (
	"fmt"
	"net/url"
	"path"
	"strings"
)

// BucketID is a bucket's identity in its store: the scheme, the endpoint
// that serves it, and the bucket (container, directory) name. It holds
// nothing that changes how a bucket is reached but not which bucket it is:
// no region, no credentials, no prefix, no other URL option. Two URLs of
// one bucket ("s3://b" and "s3://b?region=eu-west-1&use_path_style=true")
// have one BucketID; ParseURL makes it, once per URL, and every
// check that asks "same bucket?" compares BucketIDs with SameBucket.
type BucketID struct {
	// Scheme is "s3", "gs", "azblob", "file" or "mem".
	Scheme string
	// Endpoint is the store that serves the bucket, normalized: host and
	// port in lower case, with the path the store's URL has, without the
	// URL scheme (http and https of one host are one store) and without a
	// trailing slash. Empty is the provider's default store (AWS, Google
	// Cloud Storage). For azblob it is the storage account, and its
	// domain or emulator when the URL names one; empty when the URL names
	// no account (the credentials then choose it).
	Endpoint string
	// Name is the bucket or container name, in lower case for the cloud
	// stores (whose names are lower case); for file, the directory's
	// cleaned path; for mem, the URL's host and path.
	Name string
}

// String is the identity for people: "s3://b", or "s3://b@127.0.0.1:9000"
// with an endpoint.
func (id BucketID) String() string {
	s := id.Scheme + "://" + id.Name
	if id.Scheme == "file" {
		s = "file://" + id.Name
	}
	if id.Endpoint != "" {
		s += " at " + id.Endpoint
	}
	return s
}

// SameBucket reports whether a and b are, or cannot be told apart from,
// one bucket. It errs towards "the same": an azblob identity without a
// storage account is the same as any other of that container name, since
// the credentials may name the same account. A caller that refuses to
// delete what may be another's data asks SameBucket.
func SameBucket(a, b BucketID) bool {
	if a.Scheme != b.Scheme || a.Name != b.Name {
		return false
	}
	if a.Endpoint == b.Endpoint {
		return true
	}
	return a.Scheme == "azblob" && (a.Endpoint == "" || b.Endpoint == "")
}

// URL is a bucket URL parsed once: its identity, the prefix= it
// names (blob.PrefixedBucket's) and the URL itself.
type URL struct {
	// ID is the bucket's identity.
	ID BucketID
	// Prefix is the URL's prefix= parameter ("" for none): every key
	// through this URL is under it.
	Prefix string
	raw    string
	u      *url.URL // without prefix=
}

// String is the URL as it was given.
func (b URL) String() string { return b.raw }

// withoutPrefix is the URL without its prefix= parameter, as a provider
// opens it.
func (b URL) withoutPrefix() *url.URL {
	u := *b.u
	return &u
}

// Overlap reports whether the keys of prefix p through b and the keys of
// prefix q through c may meet: the same bucket (SameBucket), and one full
// prefix (the URL's prefix= followed by the key prefix) starting with the
// other. Two prefixes that may meet must not be deleted one for the other.
func Overlap(b URL, p string, c URL, q string) bool {
	if !SameBucket(b.ID, c.ID) {
		return false
	}
	x, y := b.Prefix+p, c.Prefix+q
	return strings.HasPrefix(x, y) || strings.HasPrefix(y, x)
}

// ParseURL parses a bucket URL as OpenBucket takes it (s3://, gs://,
// azblob://, file://, mem://) into its identity and prefix. An URL it
// cannot parse, of another scheme, or without a bucket name is an error
// that is ErrInvalidConfig and names the URL.
func ParseURL(rawURL string) (URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return URL{}, fmt.Errorf("%w: bucket URL: %w", ErrInvalidConfig, err)
	}
	switch u.Scheme {
	case "s3", "gs", "azblob", "file", "mem":
	default:
		return URL{}, fmt.Errorf("%w: bucket URL %q: %w %q", ErrInvalidConfig, rawURL, ErrUnsupportedScheme, u.Scheme)
	}
	q := u.Query()
	prefix := q.Get("prefix")
	q.Del("prefix")
	u.RawQuery = q.Encode()
	id := BucketID{Scheme: u.Scheme}
	switch u.Scheme {
	case "file":
		p := u.Path
		if p == "" {
			p = u.Opaque
		}
		if p == "" {
			return URL{}, fmt.Errorf("%w: bucket URL %q names no directory", ErrInvalidConfig, rawURL)
		}
		id.Name = path.Clean(p)
	case "mem":
		id.Name = strings.TrimSuffix(u.Host+u.Path, "/")
	default:
		if u.Host == "" {
			return URL{}, fmt.Errorf("%w: bucket URL %q names no bucket", ErrInvalidConfig, rawURL)
		}
		id.Name = strings.ToLower(u.Host)
		id.Endpoint = endpointOf(u.Scheme, q)
	}
	return URL{ID: id, Prefix: prefix, raw: rawURL, u: u}, nil
}

// endpointOf normalizes the store a cloud URL's parameters name.
func endpointOf(scheme string, q url.Values) string {
	if scheme == "azblob" {
		account := strings.ToLower(q.Get("storage_account"))
		if account == "" {
			return ""
		}
		if d := normalEndpoint(q.Get("domain")); d != "" && d != "blob.core.windows.net" {
			return account + "@" + d
		}
		if q.Get("localemu") == "true" {
			return account + "@localemu"
		}
		return account
	}
	e := normalEndpoint(q.Get("endpoint"))
	switch {
	case scheme == "s3" && (e == "s3.amazonaws.com" || strings.HasSuffix(e, ".amazonaws.com") && strings.HasPrefix(e, "s3.")):
		return "" // AWS's own endpoints: the default store
	case scheme == "gs" && (e == "storage.googleapis.com" || e == "storage.googleapis.com/storage/v1"):
		return ""
	}
	return e
}

// normalEndpoint is an endpoint without its URL scheme and trailing
// slashes, in lower case, with the default ports of http and https left
// out.
func normalEndpoint(e string) string {
	e = strings.ToLower(strings.TrimSpace(e))
	for _, s := range []string{"https://", "http://"} {
		e = strings.TrimPrefix(e, s)
	}
	host, rest, _ := strings.Cut(e, "/")
	host = strings.TrimSuffix(strings.TrimSuffix(host, ":443"), ":80")
	e = host
	if rest = strings.Trim(rest, "/"); rest != "" {
		e += "/" + rest
	}
	return e
}
