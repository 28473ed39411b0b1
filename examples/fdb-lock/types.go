package main

import (
	"github.com/groundskeeper-io/groundskeeper/examples/fdb-lock/api"
	"github.com/groundskeeper-io/groundskeeper/locking"
)

// The custom resource this example reconciles is api.Database; these names
// keep the controller's code short.
type (
	Database       = api.Database
	DatabaseSpec   = api.DatabaseSpec
	DatabaseStatus = api.DatabaseStatus
	LockOptions    = api.LockOptions
	DenyListEntry  = locking.DenyListEntry
)

func denyList(d *Database) []locking.DenyListEntry { return d.Spec.LockOptions.DenyList }
