// Package share places the entries of many owners in shared buckets, one
// prefix per entry, as Gardener's backup infrastructure does: an entry
// resource (a BackupEntry) names a bucket resource (a BackupBucket), is
// admitted to it while the bucket has room for another prefix, and its
// data is deleted through a backupstore/collect finalizer when it goes; a
// bucket resource stays while entries name it.
//
// Start with [New], then call [Share.ReconcileEntry] and [Share.ReconcileBucket]
// from the entries' and the buckets' reconcilers (crt/backups.Sharing runs
// them on a controller-runtime manager; a [Pool] places entries that name no
// bucket). An entry's data goes before its finalizer, a bucket's finalizer
// only when no entry names the bucket, and an entry is admitted into a
// prefix only while it is empty or its marker names the entry. Run one
// worker on one elected replica; never change an admitted entry's bucket.
//
// # Pools
//
// Pool places an entry that names no bucket in a pool of buckets (per
// provider and region, the quota's limit each) and grows the pool by one
// bucket object when every bucket is full. With a grace period
// (PoolConfig.DeleteEmptyAfter) it deletes a bucket whose last entry has
// been gone that long: the store's bucket (with Grow's Deprovision, only
// when it holds nothing but its owner marker), then the bucket object. It
// deletes only the buckets it created (AnnotationCreatedBy), never one an administrator made, and keeps one bucket of each pool (the
// administrator's, or its first by name when the pool created them all),
// so that a pool that empties and fills again does not delete and create
// a bucket each time. "Already exists" is never "mine": a store bucket
// counts as the pool's only when the pool proves it the bucket object's
// (PoolConfig.Provision and Deprovision; Grow records it with an owner
// marker in the store bucket when it creates it), and one that is not is
// marked (AnnotationStoreNotOwned), takes no entry and is never deleted.
//
// Grow is a Pool's growth for bucket objects that name their store by URL
// and Secret: the next bucket is made from the pool's first, its store
// bucket named for the installation (Grow.Installation) so that pools of
// one name in two clusters sharing a store's account never pick one
// name, and created (backupstore.CreateBucket) with an owner marker
// (BucketOwnerKey) naming the bucket object's UID; a store bucket that
// existed is the object's only if its marker says so.
//
// Quota is the seed's quota map as a flag ("aws=100,azure=50").
//
// Package backupstore/share/migrate moves an entry's backups from a legacy
// bucket of its own into its prefix in a shared bucket.
//
// # An admitted entry's bucket never changes
//
// The bucket an entry names must not change once the entry is admitted:
// its prefix, and the marker proving it the entry's, are in that bucket,
// and nothing records it elsewhere. Make the field immutable with a CRD
// validation rule, as the example's BackupEntry does ("bucketName is
// immutable once set"); move an entry with
// backupstore/share/migrate instead. An edited
// bucket loses nothing: the entry's deletion finds no marker of its own
// there and keeps it (collect's NotOwner), its data where it was.
//
// # Clients
//
// Share is written against collect.Objects, so a client-go user wires it
// as well as a controller-runtime one; crt/backups.Sharing runs it on a
// manager.
//
// # Guarantees
//
//   - An entry gets a prefix only while its bucket, read from the API
//     server, is neither being deleted nor marked for deletion
//     (AnnotationDeleting) and holds fewer prefixes than its limit
//     (backupstore.Quota counts the prefixes in the store, not the
//     resources, so data written outside the controller counts too).
//   - Whose a prefix is, is proven, never assumed: an entry's prefix comes
//     from its whole identity (PrefixOf: "<namespace>.<name>/", so two
//     namespaces' "db" never share one); when it is admitted, a marker
//     object (MarkerKey) naming the entry's UID is written under it
//     (backupstore.WriteMarker), which also makes the prefix exist before
//     the first backup, so that a second admission counts it; and a prefix
//     whose marker names another owner, or none, or that holds objects and
//     no marker, is never admitted into (Admitted=False, PrefixTaken). A
//     collector whose Location sets Owner and Marker (as the example
//     does) deletes an entry's data only when the marker names the entry;
//     with NoDataUnlessOwner for an entry whose prefix is not recorded on
//     it (refused, or an admission whose status update was lost), a
//     prefix marked by another is no data of the entry's, and it goes.
//   - A bucket's finalizer is removed only when no entry, deleted or not,
//     names the bucket; the removal carries the resourceVersion read.
//   - An entry's data goes before its finalizer (collect.Collector.Finalize).
//   - Pool takes a place with a status write carrying the bucket's
//     resourceVersion, so two placers (two replicas) never take the last
//     place twice; a new bucket's name follows from its pool and its
//     number, so two placers that grow the pool at once create it once.
//     An object of that name that is not a member of the pool (another
//     pool's, or no pool's) is never taken for the pool's growth: the
//     pool grows by the next number.
//   - With Provision, an entry is admitted to a bucket only after
//     Provision, on a fresh read of the bucket, succeeded: with Grow, the
//     store bucket of a bucket the pool created holds the owner marker
//     of that object's UID, written when the store bucket was created
//     (backupstore.CreateBucket said created) and never over another's.
//     A store bucket that existed without the object's marker (another
//     installation's, or one a pool created before owner markers), unless
//     it bears the name Grow gives the object in this installation or an
//     administrator adopted it (AnnotationAdoptStore), makes Provision
//     fail with ErrNotOwned: the entry is refused
//     (StoreNotOwned), the bucket marked (AnnotationStoreNotOwned, a
//     Warning event), Place puts no entry there and grows past it, and the
//     Pool never deletes it. Place proves a bucket the same way before it
//     takes a place in it.
//   - Deprovision (Grow's) deletes a store bucket only if the pool created
//     its object and the marker, read right before the deletion, names
//     the object's UID (without a marker: by the same name or adoption
//     as Provision, so that a deletion interrupted after the marker went
//     is finished); ErrNotOwned gives the deletion up for good and marks
//     the bucket. It deletes nothing a store bucket holds besides the
//     marker: listed right before the deletion, any other object (or
//     version) refuses it (ErrStoreNotEmpty), and the Pool gives the
//     deletion up (StoreNotEmpty) and tries again after another grace
//     period. The entries' own data went with their prefixes (their
//     collectors delete it before their finalizers go), so what is left
//     is no entry's of the pool: another installation's entries admitted
//     to the same store bucket, or a writer's late backup.
//   - An entry that Pool cannot place (PoolConfig.Pool or NewBucket
//     refuses) gets Admitted=False, reason NoPool, with the refusal.
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
// # What it does not guarantee
//
//   - That an object written into a store bucket between Deprovision's
//     listing and its deletion is kept: the window is one listing (S3
//     and GCS refuse to delete a bucket that holds an object written
//     after the deletion's own listing; see backupstore.DeleteBucket for
//     Azure).
//   - Pool does not create or delete the store's bucket behind a bucket
//     object by itself, nor read its owner marker: the caller's Provision
//     and Deprovision do (Grow's, with backupstore.CreateBucket and
//     DeleteBucket and the owner marker), Provision before entries are
//     admitted to it. A bucket object deleted by someone else is not
//     deprovisioned: its store's bucket stays, and a bucket object made
//     again under its name (a new UID) does not own it.
//   - That a pool's store bucket is ever deleted when it was created
//     before owner markers (no marker; its name has no installation
//     hash): it takes no new entry and stays, until an administrator
//     vouches for it with AnnotationAdoptStore (the object's UID).
//   - That an entry placed in a bucket before the bucket was found not
//     the owner of its store's bucket is placed again: it names that
//     bucket and is refused (StoreNotOwned) until the store bucket is
//     adopted. Place proves a bucket before it places an entry there, so
//     only a bucket whose store bucket changed hands since can do this.
//   - That a store bucket Grow created and whose marker it did not write
//     (a restart between the two requests) is recognized after
//     Installation changed: it is recognized by its name, the one Grow
//     gives the object in this installation, and with another
//     Installation it is refused like another's, and stays. Two
//     installations given one Installation value are told apart only
//     by the markers.
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
//     worker on the one elected replica (crt/backups.Sharing does the first,
//     leader election the second).
//   - The entries are counted from a cache: a bucket's finalizer may be
//     removed for an entry created a moment before, which the API server
//     has not shown the cache yet. That entry is then refused
//     (BucketDeleting or BucketNotFound).
package share
