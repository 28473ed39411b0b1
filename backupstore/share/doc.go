// Package share places the entries of many owners in shared buckets, one
// prefix per entry, as Gardener's backup infrastructure does: an entry
// resource (a BackupEntry) names a bucket resource (a BackupBucket), is
// admitted to it while the bucket has room for another prefix, and its
// data is deleted through a backupstore/collect finalizer when it goes; a
// bucket resource stays while entries name it.
//
// Pool places an entry that names no bucket in a pool of buckets (per
// provider and region, the quota's limit each) and grows the pool by one
// bucket object when every bucket is full. With a grace period
// (PoolConfig.DeleteEmptyAfter) it deletes a bucket whose last entry has
// been gone that long: the store's bucket with its data, then the bucket
// object. It deletes only the buckets it created (AnnotationCreatedBy),
// never one an administrator made, and keeps one bucket of each pool (the
// administrator's, or its first by name when the pool created them all),
// so that a pool that empties and fills again does not delete and create
// a bucket each time.
//
// Migration moves an entry's backups from a legacy bucket of its own into
// its prefix in a shared bucket, in the seed's sequence (create the
// prefix, copy with a manifest, pause the writer, copy the rest, switch,
// resume, delete the legacy bucket after a grace period), one step per
// call of Next, each recorded in a MigrationStatus that the caller keeps
// in the entry's status: a restarted controller resumes at the recorded
// step, and the downtime (writer paused) is reported.
//
// Grow is a Pool's growth for bucket objects that name their store by URL
// and Secret: the next bucket is made from the pool's first, and its
// store bucket created (backupstore.CreateBucket).
//
// Migrating runs each admitted entry's Migration in the entry's reconcile,
// after its Share or Pool, one step per reconcile, recorded in the
// entry's status; it opens the legacy and shared buckets through the
// entry's collect.Collector. An entry deleted while its migration has the
// writer paused gets its writer resumed before its deletion goes on. With
// MigratingConfig.Conditions, the entry's condition Migrated says where
// the migration is, and why nothing is done when the entry names another
// source than the one recorded (SourceChanged, AlreadyMigrated) or a
// shared bucket (SourceIsShared), or why the legacy location is kept
// (LegacyNotCopied). Quota is the seed's quota map as a flag
// ("aws=100,azure=50").
//
// Share is written against collect.Objects, so a client-go user wires it
// as well as a controller-runtime one; crt/backups.Share runs it on a
// manager.
//
// Guarantees:
//   - An entry gets a prefix only while its bucket, read from the API
//     server, is neither being deleted nor marked for deletion
//     (AnnotationDeleting) and holds fewer prefixes than its limit
//     (backupstore.Quota counts the prefixes in the store, not the
//     resources, so data written outside the controller counts too).
//   - With Marker, the prefix exists in the store before the entry is
//     admitted, so a second admission counts it.
//   - A bucket's finalizer is removed only when no entry, deleted or not,
//     names the bucket; the removal carries the resourceVersion read.
//   - An entry's data goes before its finalizer (collect.Collector.Finalize).
//   - Pool takes a place with a status write carrying the bucket's
//     resourceVersion, so two placers (two replicas) never take the last
//     place twice; a new bucket's name follows from its pool and its
//     number, so two placers that grow the pool at once create it once.
//   - A Migration never writes outside its target prefix in the shared
//     bucket (backupstore.CopyBackups, which also refuses a source and a
//     target that overlap in one bucket), repeats a step only when its
//     record was lost, and deletes the legacy bucket only after
//     GracePeriod from the recorded switch.
//   - A Migration deletes the legacy location (by default or through the
//     caller's Hooks.DeleteLegacy) only when a dry-run copy, made right
//     before, finds every legacy object the copy selects in the target:
//     objects written there after the copy steps (a writer the switch did
//     not reach) stop the deletion with ErrLegacyNotCopied naming them,
//     are copied, and are checked again at the retry. A whole legacy
//     bucket (no SourcePrefix) is deleted only when the copy left nothing
//     in it out: one that holds the target itself, or objects the copy's
//     filters excluded, is kept.
//   - Migrating never migrates from a shared bucket: the source is
//     compared, by bucket identity (backupstore.SameBucket, never the URL
//     string), with the entry's own location and the store's bucket of
//     every bucket object read from the API server
//     (MigratingConfig.LiveBuckets), before the first step, before the
//     copy and again before the legacy location's deletion; one that is,
//     or cannot be told from, one of them gets Migrated=False,
//     SourceIsShared, and no step.
//   - An entry that Pool cannot place (PoolConfig.Pool or NewBucket
//     refuses) gets Admitted=False, reason NoPool, with the refusal.
//   - A Migration with DryRun deletes nothing: it reports what the
//     legacy bucket's deletion would delete and stays at that step.
//   - Migrating records each step in the entry's status before it runs
//     the next, and never migrates an entry whose recorded step is
//     StepDone again. It records the source at the first step, and copies
//     from no other: an entry whose spec names another source later gets
//     no step, no hook call and no copy or deletion.
//   - Pool.Release frees the place of an entry only once the API server
//     says it is gone, not a cache.
//   - With DeleteEmptyAfter, a bucket is deleted only after it has been
//     empty (no claim, no entry naming it, deleted or not) since its
//     stamp (AnnotationEmptySince) plus the grace period, and each step
//     is decided again on a fresh read (the bucket's Get, and
//     PoolConfig.LiveEntries from the API server): before the mark
//     (AnnotationDeleting, written with the resourceVersion read, so a
//     place taken in between makes it fail), after the mark, and after
//     the store's deletion; an entry or a claim found then gives the
//     deletion up (the store's bucket is provisioned again). A marked
//     bucket takes no place (Place) and admits no entry (Share). The
//     store's bucket goes before the object, whose deletion carries the
//     UID and resourceVersion of the last read. Data under Object Lock
//     stops the deletion until it can go. A dry run (PoolConfig.DryRun)
//     marks and deletes nothing and reports what would go.
//
// Not guaranteed:
//   - A Migration's hooks must be idempotent: a step whose record was lost
//     runs again.
//   - An object written to the legacy location between the last dry-run
//     copy and the deletion is deleted with it: stop every writer of the
//     legacy location by the end of the grace period (a writer that
//     writes on is caught at each attempt before that one).
//   - A Migration used without Migrating knows its buckets only as
//     *blob.Bucket values: it cannot compare the source with the shared
//     buckets it does not open (the dry-run check above still keeps a
//     whole bucket that holds the target or data it did not copy), and
//     CopyBackups tells one bucket from another only when
//     backupstore.OpenBucket opened both.
//   - Pool does not create or delete the store's bucket behind a bucket
//     object by itself: the caller's Provision and Deprovision do (with
//     backupstore.CreateBucket and DeleteBucket), Provision before entries
//     are admitted to it. A bucket object deleted by someone else is not
//     deprovisioned: its store's bucket stays.
//   - An entry that names a pool's bucket itself (not placed by Place,
//     so it takes no place) and is created between the deletion's last
//     fresh read and the object's deletion names a bucket being deleted:
//     it is refused (BucketDeleting), and the object stays, without a
//     store's bucket, while the entry names it. Place's entries are not
//     exposed: the mark stops them.
//   - The grace period restarts when an entry or a claim is seen; an
//     entry of the first kind that came and went while no controller ran
//     is not seen.
//   - A bucket's number may be given again once its bucket is deleted
//     (a new bucket takes the first free number from the count up).
//   - Admissions are not serialized across workers or replicas: run one
//     worker on the one elected replica (crt/backups.Share does the first,
//     leader election the second).
//   - The entries are counted from a cache: a bucket's finalizer may be
//     removed for an entry created a moment before, which the API server
//     has not shown the cache yet. That entry is then refused
//     (BucketDeleting or BucketNotFound).
package share

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=.
