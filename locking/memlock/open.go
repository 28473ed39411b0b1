package memlock

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// Open is the locking.Opener of mem:// URLs: a new, empty Store, shared by
// nothing outside this process. The URL may have nothing after the scheme.
func Open(_ context.Context, u *url.URL) (locking.Backend, io.Closer, error) {
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Opaque != "" {
		return nil, nil, fmt.Errorf("%w: memory lock URL %q: want mem:// and nothing after it", locking.ErrInvalidConfig, u.Redacted())
	}
	return New(), io.NopCloser(nil), nil
}
