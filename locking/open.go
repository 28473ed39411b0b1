package locking

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// An Opener opens the Backend that a URL names, for Open. The Closer it
// returns releases what the opener made (a client and its connections),
// never the lock's data. memlock.Open, etcdlock.Open and kubelock.Opener
// are openers.
type Opener func(ctx context.Context, u *url.URL) (Backend, io.Closer, error)

// Open opens the backend that rawURL names, with the opener of the URL's
// scheme in openers. There is no registry of schemes: the program lists
// the backends it links, so that a flag such as --lock-url can choose
// among them:
//
//	backend, closer, err := locking.Open(ctx, lockURL, map[string]locking.Opener{
//		"mem":       memlock.Open,                                                         // mem://
//		"etcd":      etcdlock.Open,                                                        // etcd://host:2379,host2:2379/prefix/
//		"configmap": kubelock.Opener(locks.ConfigMaps(mgr.GetClient(), mgr.GetAPIReader())), // configmap://namespace/name
//	})
//	if err != nil {
//		return err
//	}
//	defer closer.Close()
//
// A URL that does not parse, or whose scheme has no opener, is an
// ErrInvalidConfig that names it and the schemes there are. An opener's
// error is returned wrapped with the URL.
func Open(ctx context.Context, rawURL string, openers map[string]Opener) (Backend, io.Closer, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, nil, fmt.Errorf("%w: lock URL %q: want scheme://..., with a scheme of %s", ErrInvalidConfig, rawURL, schemes(openers))
	}
	open, ok := openers[u.Scheme]
	if !ok {
		return nil, nil, fmt.Errorf("%w: lock URL %q: scheme %q: want one of %s", ErrInvalidConfig, rawURL, u.Scheme, schemes(openers))
	}
	b, closer, err := open(ctx, u)
	if err != nil {
		return nil, nil, fmt.Errorf("lock URL %q: %w", rawURL, err)
	}
	if closer == nil {
		closer = io.NopCloser(nil)
	}
	return b, closer, nil
}

func schemes(openers map[string]Opener) string {
	if len(openers) == 0 {
		return "(none: no openers given)"
	}
	return strings.Join(slices.Sorted(maps.Keys(openers)), ", ")
}
