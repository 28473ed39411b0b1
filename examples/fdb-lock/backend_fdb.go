//go:build ignore

// This file is not compiled: locking/fdblock is a Go module of its own,
// which this module does not require (see its documentation). To run the
// example with --lock-backend=fdb, where the FoundationDB client is
// installed, require github.com/groundskeeper-io/groundskeeper/locking/fdblock
// and build this file along with the others (remove the line above).

package main

import (
	"context"
	"io"

	"github.com/apple/foundationdb/bindings/go/src/fdb"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/fdblock"
)

// --lock-backend=fdb keeps the lock in FoundationDB itself, at the
// FoundationDB operator's own keys. Like locking/fdblock, this file has not
// been compiled here (no FoundationDB client on these machines).
func init() {
	backends["fdb"] = func(_ context.Context, o controllerOptions, _ *rest.Config, _ string) (locking.Backend, io.Closer, error) {
		if err := fdb.APIVersion(710); err != nil {
			return nil, nil, err
		}
		db, err := fdb.OpenDatabase(o.fdbClusterFile)
		if err != nil {
			return nil, nil, err
		}
		return fdblock.New(db), io.NopCloser(nil), nil
	}
}
