// Package pool places the entries of backupstore/share that name no bucket
// in a pool of buckets (per provider and region, the quota's limit each),
// grows the pool by one bucket object when every bucket is full and, with
// a grace period, deletes a bucket left empty that long.
//
// Start with [New], over a share.Share, with a [Grow] as its [Grower];
// its [Pool] is a share.Reconciler that crt/backups.Sharing runs. A place
// is taken by a status write carrying the bucket's resourceVersion, so two
// replicas never take the last place twice; with Grow, an entry is
// admitted to a bucket only once the bucket's store bucket is proven the
// bucket object's ("already exists" is never "mine"), and a store bucket
// is deleted only when it holds nothing but its owner marker; the pool
// deletes only the buckets it created, and keeps one of each pool.
//
// Pool places an entry that names no bucket in a pool of buckets (per
// provider and region, the quota's limit each) and grows the pool by one
// bucket object when every bucket is full. With a grace period
// (Config.DeleteEmptyAfter) it deletes a bucket whose last entry has
// been gone that long: the store's bucket (with Grow's Deprovision, only
// when it holds nothing but its owner marker), then the bucket object. It
// deletes only the buckets it created (AnnotationCreatedBy), never one an
// administrator made, and keeps one bucket of each pool (the
// administrator's, or its first by name when the pool created them all),
// so that a pool that empties and fills again does not delete and create
// a bucket each time. "Already exists" is never "mine": a store bucket
// counts as the pool's only when the pool proves it the bucket object's
// (the Grower's Provision and Deprovision; Grow records it with an owner
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
// Limits is the seed's quota map as a flag ("aws=100,azure=50").
//
// # Guarantees
//
//   - Pool takes a place with a status write carrying the bucket's
//     resourceVersion, so two placers (two replicas) never take the last
//     place twice; a new bucket's name follows from its pool and its
//     number, so two placers that grow the pool at once create it once.
//     An object of that name that is not a member of the pool (another
//     pool's, or no pool's) is never taken for the pool's growth: the
//     pool grows by the next number.
//   - With a Grower that has Provision, an entry is admitted to a bucket
//     only after Provision, on a fresh read of the bucket, succeeded: with Grow, the
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
//   - An entry that Pool cannot place (Config.Pool or the Grower's NewBucket
//     refuses) gets Admitted=False, reason NoPool, with the refusal.
//   - Pool.Release frees the place of an entry only once the API server
//     says it is gone, not a cache.
//   - With DeleteEmptyAfter, a bucket is deleted only after it has been
//     empty (no claim, no entry naming it, deleted or not) since its
//     stamp (AnnotationEmptySince) plus the grace period, and each step
//     is decided again on a fresh read (the bucket's Get, and
//     Config.LiveEntries from the API server): before the mark
//     (share.AnnotationDeleting, written with the resourceVersion read, so a
//     place taken in between makes it fail), after the mark, and after
//     the store's deletion; an entry or a claim found then gives the
//     deletion up (the store's bucket is provisioned again). A marked
//     bucket takes no place (Place) and admits no entry (share.Share). The
//     store's bucket goes before the object, whose deletion carries the
//     UID and resourceVersion of the last read. Data under Object Lock
//     stops the deletion until it can go. A dry run (Config.DryRun)
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
package pool
