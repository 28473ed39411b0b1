//go:build ignore

// This file is not compiled: locking/fdblock is a Go module of its own,
// which this module does not require (see its documentation). To run the
// example with --lock-url=fdb:///..., where the FoundationDB client is
// installed, require github.com/groundskeeper-io/groundskeeper/locking/fdblock
// and build this file along with the others (remove the line above).

package main

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/fdblock"
)

// --lock-url=fdb:///PATH/TO/fdb.cluster keeps the lock in FoundationDB
// itself, at the FoundationDB operator's own keys. Like locking/fdblock,
// this file has not been compiled here (no FoundationDB client on these
// machines).
func init() {
	openers["fdb"] = func(_ context.Context, u *url.URL) (locking.Backend, io.Closer, error) {
		if u.Host != "" || u.Path == "" {
			return nil, nil, fmt.Errorf("%w: want fdb:///path/to/fdb.cluster", locking.ErrInvalidConfig)
		}
		if err := fdb.APIVersion(710); err != nil {
			return nil, nil, err
		}
		db, err := fdb.OpenDatabase(u.Path)
		if err != nil {
			return nil, nil, err
		}
		return fdblock.New(db), io.NopCloser(nil), nil
	}
}
