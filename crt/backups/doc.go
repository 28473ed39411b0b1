// Package backups wires a backup collector (backupstore/collect) on a
// controller-runtime manager: Objects adapts the manager's client to
// collect.Objects, and a Collection is the controller that runs the
// collector's passes and, with a finalizer, prepares and finalizes each
// backup. A Sharing runs a backupstore/share.Share (entries placed in shared
// buckets), or a pool.Pool over one (entries placed in a pool that
// grows), as two controllers. DeploymentWriter is a migration's writer
// (migrate.Hooks): a Deployment scaled to 0 and back.
//
//	c, err := collect.New(collect.Config[*v1.Backup]{
//		Objects: backups.Objects[*v1.Backup](mgr.GetClient(), mgr.GetAPIReader()),
//		Secrets: crt.Secrets(mgr.GetAPIReader()),
//		...
//	})
//	err = backups.Collection[*v1.Backup]{Name: "backup-gc", Collector: c}.SetupWithManager(mgr)
//
// # Guarantees
//
//   - Objects lists from the manager's cache and reads (Get) from the API
//     reader given, so every deletion is decided on a fresh read, and so is
//     every admission of a share.Share (whose Config.Buckets and Entries
//     must both be Objects with mgr.GetAPIReader()); Delete sends the UID
//     and resourceVersion preconditions it is given.
//   - LiveList lists with the API reader, never the cache: a pool.Pool
//     deletes an empty bucket only when it finds no entry naming it there
//     (pool.Config.LiveEntries).
//   - A Collection's passes of one namespace never overlap (one request per
//     namespace), and a pass is requeued when its report says the next
//     decision is due; errors end as crt.Result maps them.
//   - A Sharing reconciles entries with one worker and buckets with another,
//     so two admissions never race in one process (run one active
//     replica); the entries waiting for a place in a bucket are reconciled
//     when the bucket changes and when an entry of it is gone.
//   - The backup type must be registered in the manager's scheme with its
//     list type named <Kind>List, as generated API types are.
//
// It is a package of its own, beside crt, so that an operator that uses
// crt without backup collection links neither backupstore nor gocloud.
package backups
