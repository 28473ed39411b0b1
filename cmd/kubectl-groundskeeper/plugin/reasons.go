package plugin

import (
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// The meaning of each reason collect, share, share/pool, share/migrate and
// lifecycle write on a condition or an event, and what would unblock the object. A
// reason these packages gain without an entry here fails
// TestEveryReasonIsExplained.

var collectReasons = map[string]string{
	collect.ReasonCollected:          "Its data was deleted, then the resource (or its finalizer). A backup still shown with this reason had no finalizer and changed after its data went: it is decided again, and its data is gone.",
	collect.ReasonSecretNotFound:     "The Secret with the store's credentials does not exist, so nothing was deleted. Create the Secret the message names (or correct the backup's reference to it); the collector retries.",
	collect.ReasonInvalidCredentials: "The credentials Secret lacks a key the store needs, so nothing was deleted. Add the key the message names to the Secret; the collector retries.",
	collect.ReasonDeletionFailed:     "The store could not be opened or reached, or refused or failed the deletion; some data may be left. The collector retries after its retry delay; the message says what the store answered.",
	collect.ReasonNestedPrefix:       "Another backup's prefix in the same bucket lies inside this one's, or this one's inside it: deleting this data would delete some of the other's, so neither is touched. Move one of the two backups' data (the message names the other) to unblock it.",
	collect.ReasonNotOwner:           "The prefix's owner marker names another owner, or none, or the prefix holds objects and no marker: the data is not proven this backup's, and nothing was deleted. Kept until a person sees whose it is.",
	collect.ReasonRetained:           "The store keeps some of the data under S3 Object Lock; the rest was deleted. The backup is collected when the retention ends (the retain-until time is in the message).",
	collect.ReasonInvalidPolicy:      "The backup's policy, time or outcome cannot be read, so it is kept. Correct the field the message names.",
	collect.ReasonInvalidLocation:    "The backup's location cannot be read, so it is kept, and so is every backup's data in stores it might share. Correct the location the message names.",
	collect.ReasonGracePeriod:        "The backup was deleted; its data is kept until its grace period ends (the time is in the message), then deleted, then the finalizer removed.",
	collect.ReasonDryRun:             "A dry run of the collector: the message says what it would delete. Nothing was deleted.",
}

var shareReasons = map[string]string{
	share.ReasonAdmitted:        "The entry has its prefix in its bucket.",
	share.ReasonBucketNotFound:  "The bucket the entry names does not exist, so it has no prefix. Create the bucket object, or name an existing one.",
	share.ReasonBucketDeleting:  "The bucket the entry names is being deleted, so no entry is admitted to it. Name another bucket.",
	share.ReasonBucketFull:      "The bucket the entry names has as many entries as it may hold. Name another bucket, or raise its quota.",
	share.ReasonInvalidName:     "The entry's name cannot make a prefix. Recreate it with a valid name.",
	share.ReasonStoreError:      "The store could not be read or written; the message says what it answered. Retried.",
	share.ReasonEntriesExist:    "Entries name the bucket: it is in use, and is not deleted.",
	share.ReasonNoEntries:       "No entry names the bucket.",
	share.ReasonDeletionBlocked: "The bucket was deleted while entries still name it: it is kept until they are gone.",
	share.ReasonBucketInUse:     "The bucket was deleted while entries still name it: it is kept until they are gone.",
	share.ReasonNoPool:          "The entry names no bucket and has no pool to be placed in, or its pool cannot grow. Name a bucket, or fix the pool the message names.",
	share.ReasonPrefixTaken:     "The entry's prefix in its bucket holds another owner's marker, or objects and no marker of the entry: another's data, never admitted into. A person must see whose it is.",
}

var poolReasons = map[string]string{
	pool.ReasonEmptyBucketDeleted: "The store's bucket is deleted and the bucket object is being deleted.",
	pool.ReasonDeletionCancelled:  "The bucket was marked for deletion, then found in use: it stays.",
	pool.ReasonDeletionRetained:   "The store keeps data under Object Lock: the bucket's deletion goes on when the retention ends.",
	pool.ReasonDryRun:             "A dry run of the pool: the message says what it would delete. Nothing was deleted.",
	pool.ReasonStoreNotOwned:      "The store's bucket is not proven this bucket object's: no entry is placed there and the pool never deletes it. Adopt it (annotation " + pool.AnnotationAdoptStore + ") if it is yours.",
	pool.ReasonStoreOwned:         "The store's bucket is now proven this bucket object's.",
	pool.ReasonStoreNotEmpty:      "The store's bucket holds objects besides its owner marker: they are kept, and the deletion given up until the bucket has been empty for the grace period again.",
}

var migrateReasons = map[string]string{
	migrate.ReasonMigrationStep:      "A step of the entry's migration is done; the migration goes on.",
	migrate.ReasonMigrationFailed:    "A step of the migration failed (the message has the error); it is retried with backoff.",
	migrate.ReasonMigrated:           "The migration is done.",
	migrate.ReasonMigrationAbandoned: "The entry is being deleted while its migration had the writer paused: the writer was resumed.",
	migrate.ReasonMigrationDryRun:    "A dry run: the message says what the deletion of the legacy bucket's objects would delete. Nothing was deleted.",
	migrate.ReasonAlreadyMigrated:    "The migration is done, and the spec now names another source, which is not migrated.",
	migrate.ReasonSourceChanged:      "The spec names another source than the one the migration copies from: nothing is done until the spec names that source again.",
	migrate.ReasonSourceIsShared:     "The source is, or cannot be told from, a shared bucket whose deletion would take every entry's data: nothing is done until that changes.",
	migrate.ReasonLegacyNotCopied:    "The legacy location holds objects the target lacks: it is kept, and the step retried.",
	migrate.ReasonLegacyInUse:        "Another entry's migration copies from the same legacy location and has not copied it yet: it is kept, and the step retried.",
}

var lifecycleReasons = map[string]string{
	lifecycle.ReasonCreated:               "The owner's controller created the pod or claim the message names.",
	lifecycle.ReasonDeleted:               "The owner's controller deleted the pod or claim the message names.",
	lifecycle.ReasonClaimReused:           "An existing claim of the same name was reused for a new pod.",
	lifecycle.ReasonWaitingForClaim:       "A claim of the name the pod needs is terminating: the pod waits until it is gone before a new one is created.",
	lifecycle.ReasonDryRun:                "A dry run of the claim set: the message says what it would do. Nothing was changed.",
	lifecycle.ReasonReconciled:            "The claims' owner references match the owner's policy.",
	lifecycle.ReasonStaleOwnerReference:   "A claim carries an owner reference to an owner that no longer exists (another UID): it is corrected.",
	lifecycle.ReasonConflictingController: "Another controller manages these claims' owner references: this one leaves them alone.",
	lifecycle.ReasonClaimOwnersUpdated:    "The claims' owner references were updated to the owner's policy.",
	lifecycle.ReasonClaimOwnersFailed:     "Updating the claims' owner references failed (the message has the error); retried.",
	lifecycle.ReasonExpiredClaimDeleted:   "An unmounted claim outlived its TTL and was deleted.",
	lifecycle.ReasonClaimCollected:        "An unmounted claim outlived its TTL and was collected.",
}

// meaning returns what reason means on a condition of type condType (or
// an event, condType ""): collect's, share's, share/pool's, share/migrate's or lifecycle's, by the
// condition type when it names one, else the first that knows it.
func meaning(condType, reason string) string {
	switch condType {
	case share.ConditionAdmitted, share.ConditionInUse:
		for _, t := range []map[string]string{shareReasons, poolReasons} {
			if m, ok := t[reason]; ok {
				return m
			}
		}
	case migrate.ConditionMigrated:
		if m, ok := migrateReasons[reason]; ok {
			return m
		}
	}
	for _, t := range []map[string]string{collectReasons, shareReasons, poolReasons, migrateReasons, lifecycleReasons} {
		if m, ok := t[reason]; ok {
			return m
		}
	}
	return ""
}
