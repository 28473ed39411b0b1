package kubelock

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// Opener returns the locking.Opener of configmap:// URLs, whose backends
// read and write through c:
//
//	configmap://NAMESPACE/NAME
//
// keeps the lock in the ConfigMap NAME of NAMESPACE (see Config). The
// Closer it returns does nothing: c is the caller's.
func Opener(c Client) locking.Opener {
	return func(_ context.Context, u *url.URL) (locking.Backend, io.Closer, error) {
		name := strings.TrimPrefix(u.Path, "/")
		if u.Host == "" || name == "" || strings.Contains(name, "/") || u.RawQuery != "" || u.User != nil {
			return nil, nil, fmt.Errorf("%w: ConfigMap lock URL %q: want configmap://namespace/name",
				locking.ErrInvalidConfig, u.Redacted())
		}
		b, err := New(Config{Client: c, Namespace: u.Host, Name: name})
		if err != nil {
			return nil, nil, err
		}
		return b, io.NopCloser(nil), nil
	}
}
