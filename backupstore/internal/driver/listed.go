package driver

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"

	"gocloud.dev/blob"
)

// Listed remembers the prefix of a listing request as the store's SDK sent
// it (a bucket opened with prefix= has added it), for a Remover's
// ListedPrefix: embed it and Store what a BeforeList hook sees. The zero
// value has seen none. Safe for concurrent use.
type Listed struct{ p atomic.Pointer[string] }

// Store records the listed prefix; nil means the request carried none.
func (l *Listed) Store(prefix *string) { l.p.Store(prefix) }

// ListedPrefix returns the prefix last stored, and whether one was.
func (l *Listed) ListedPrefix() (string, bool) {
	p := l.p.Load()
	if p == nil {
		return "", false
	}
	return *p, true
}

// OpenAmbient opens u with gocloud's URL opener, which takes the store's
// credentials from the environment (variables, instance metadata): a
// Provider's Open without credentials.
func OpenAmbient(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("backupstore: open %s bucket: %w", u.Scheme, err)
	}
	return b, nil
}
