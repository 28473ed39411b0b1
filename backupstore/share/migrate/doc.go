// Package migrate moves an entry's backups from a legacy bucket of its own
// into its prefix in a shared bucket (backupstore/share), in the seed's
// sequence: create the prefix, copy with a manifest, pause the writer, copy
// the rest, switch, resume, delete the legacy bucket after a grace period.
//
// Start with [New]: its [Controller] runs each admitted entry's
// [Migration] in the entry's reconcile, after its share.Share or
// pool.Pool, one step per reconcile, each recorded in a [Status] that
// the entry's status keeps: a restarted controller resumes at the recorded
// step, and the downtime (writer paused) is reported. Its legacy location
// is deleted only after a dry-run copy, made right before, finds every
// legacy object in the target, never while it is a shared bucket or
// another entry's migration has not copied it yet, and never in a dry run.
// A Migration's hooks must be idempotent: a step whose record was lost
// runs again.
//
// A Migration alone moves one entry, one step per call of
// [Migration.Next]. The Controller opens the legacy and shared buckets
// through the entry's collect.Collector. An entry deleted while its
// migration has the writer paused gets its writer resumed before its
// deletion goes on. On an entry whose type implements
// collect.ConditionSetter, the condition
// Migrated ([ConditionMigrated]) says where the migration is, and why
// nothing is done when the entry names another source than the one
// recorded (SourceChanged, AlreadyMigrated) or a shared bucket
// (SourceIsShared), or why the legacy location is kept (LegacyNotCopied,
// or LegacyInUse while another entry's migration from that location has
// not copied it yet).
//
// # Guarantees
//
//   - A Migration never writes outside its target prefix in the shared
//     bucket (backupstore.CopyBackups, which also refuses a source and a
//     target that overlap in one bucket), never replaces a marker there
//     (StepCreatePrefix writes its own with backupstore.WriteMarker,
//     naming the entry's UID under a Controller, keeps the admission's,
//     and fails on one that names another owner), repeats a step only
//     when its record was lost, and deletes the legacy bucket only after
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
//   - A Controller never migrates from a shared bucket: the source is
//     compared, by bucket identity (backupstore.SameBucket, never the URL
//     string), with the entry's own location and the store's bucket of
//     every bucket object read from the API server (Config.LiveBuckets),
//     before the first step, before the copy and again before the legacy
//     location's deletion; one that is, or cannot be told from, one of
//     them gets Migrated=False, SourceIsShared, and no step.
//   - A Controller deletes no legacy location that another entry's
//     migration copies from and has not copied yet: right before the
//     deletion, the entries are listed (Config.LiveEntries), and one whose
//     source overlaps (backupstore.Overlap, by bucket identity and
//     prefix) and whose migration is not at StepDeleteLegacy or done
//     keeps it (ErrLegacyInUse, Migrated=False, LegacyInUse, naming it).
//   - A Migration with DryRun deletes nothing: it reports what the
//     legacy bucket's deletion would delete and stays at that step.
//   - A Controller records each step in the entry's status before it
//     runs the next, and never migrates an entry whose recorded step is
//     StepDone again. It records the source at the first step, and copies
//     from no other: an entry whose spec names another source later gets
//     no step, no hook call and no copy or deletion.
//
// # What it does not guarantee
//
//   - A Migration's hooks must be idempotent: a step whose record was lost
//     runs again.
//   - Without Config.LiveEntries, the entries are listed with
//     Entries.List, which may be a cache: an entry created, or given its
//     source, a moment before the legacy location's deletion may be
//     missed. An entry whose source changed since its migration started
//     (SourceChanged) holds it only when its recorded source is spelled
//     as this one's (Status.Source is a string for people).
//   - An object written to the legacy location between the last dry-run
//     copy and the deletion is deleted with it: stop every writer of the
//     legacy location by the end of the grace period (a writer that
//     writes on is caught at each attempt before that one).
//   - A Migration used without a Controller knows its buckets only as
//     *blob.Bucket values: it cannot compare the source with the shared
//     buckets it does not open (the dry-run check above still keeps a
//     whole bucket that holds the target or data it did not copy), and
//     CopyBackups tells one bucket from another only when
//     backupstore.OpenBucket opened both.
package migrate

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object paths=.
