// Package share places the entries of many owners in shared buckets, one
// prefix per entry, as Gardener's backup infrastructure does: an entry
// resource (a BackupEntry) names a bucket resource (a BackupBucket), is
// admitted to it while the bucket has room for another prefix, and its
// data is deleted through a backupstore/collect finalizer when it goes; a
// bucket resource stays while entries name it.
//
// Start with [New], then call [Share.ReconcileEntry] and [Share.ReconcileBucket]
// from the entries' and the buckets' reconcilers (crt/backups.Sharing runs
// them on a controller-runtime manager; a pool.Pool places entries that
// name no bucket). An entry's data goes before its finalizer, a bucket's finalizer
// only when no entry names the bucket, and an entry is admitted into a
// prefix only while it is empty or its marker names the entry. Run one
// worker on one elected replica; never change an admitted entry's bucket.
//
// Package backupstore/share/pool places entries that name no bucket in
// a pool of buckets, which it grows and shrinks.
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
// manager. An entry or bucket type that implements
// collect.ConditionSetter gets the Admitted or InUse condition; one that
// does not (an *unstructured.Unstructured) gets events only.
//
// # Guarantees
//
//   - An entry gets a prefix only while its bucket, read from the API
//     server, is neither being deleted nor marked for deletion
//     (AnnotationDeleting) and holds fewer prefixes than its limit
//     (Quota counts the prefixes in the store, not the
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
//
// # What it does not guarantee
//
//   - Admissions are not serialized across workers or replicas: run one
//     worker on the one elected replica (crt/backups.Sharing does the first,
//     leader election the second).
//   - The entries are counted from a cache: a bucket's finalizer may be
//     removed for an entry created a moment before, which the API server
//     has not shown the cache yet. That entry is then refused
//     (BucketDeleting or BucketNotFound).
package share
