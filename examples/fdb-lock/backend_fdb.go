//go:build fdb

package main

import (
	"context"
	"io"

	"github.com/apple/foundationdb/bindings/go/src/fdb"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/fdblock"
)

// With -tags fdb, --lock-backend=fdb keeps the lock in FoundationDB itself,
// at the FoundationDB operator's own keys. Like locking/fdblock, this file
// has not been compiled here (no FoundationDB client on these machines).
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
