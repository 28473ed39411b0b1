// Package collect is the backup collection job every operator with a
// backup resource writes around retention's decisions and backupstore's
// deletion: the retention pass over the backups of a namespace, a backup's
// data deleted before the resource that records where it is, and why a
// backup is kept, on its status and in events. Start with New: a Config
// says how to read your backup type (Location, Time), what to keep (Keep:
// a GroupPolicy per group, a BackupPolicy per backup such as TTLField, or
// Combined, kept while either keeps) and, with a Finalizer, that a backup
// deleted by anyone loses its data first, after a grace period. A backup
// type that implements ConditionSetter gets the condition. Guaranteed:
// data before the resource, never a key outside the backup's prefix, every
// deletion decided again on a fresh read, a dry run that writes nothing,
// and the next instant a decision changes (below). Package crt/backups
// runs a Collector on a controller-runtime manager; a client-go user
// implements Objects over their own client.
//
// Guarantees:
//
//   - Data before the resource: a backup's resource is deleted only after
//     every key under its prefix is gone; with a Finalizer, a backup deleted
//     by anyone keeps its finalizer until then. A failure, a missing
//     Secret or data under Object Lock keeps the resource, with the
//     condition (default DataDeleted=False) and a Warning event naming the
//     reason, and the next attempt waits RetryAfter, or until the lock's
//     retain-until time (backupstore.RetainedError.RetryAt).
//   - Never outside the prefix: only keys under Location.Prefix, which must
//     end in "/" (backupstore.CheckPrefix), are deleted; a backup whose
//     prefix in the same bucket nests with another backup's (one lies
//     under the other), of any namespace, is kept with ReasonNestedPrefix,
//     and neither's data is touched. "The same bucket" is one
//     backupstore.BucketID, whatever options, region or credentials the
//     URLs name (backupstore.SameBucket); a backup whose location cannot
//     be read keeps every other's data too, since its own may be anywhere.
//   - Fresh decisions: each deletion is decided again on a fresh read of
//     the backup (Objects.Get), and the resource is deleted with UID and
//     resourceVersion preconditions, so that a backup changed or recreated
//     since the decision is decided again, never deleted on a stale view.
//   - Dry run: Config.DryRun decides and lists exactly the keys that would
//     be deleted (Outcome.Keys) and why (Outcome.Message), and writes
//     nothing: no data, no resource, no condition, no event, no finalizer.
//   - When: Report.RequeueAfter is the next instant a decision changes by
//     time alone (a backup expires, a retry is due).
//   - Modes in the types: a group's Group, Outcome and Tags are fields of
//     GroupPolicy, a grace period, Force, OnGrace and Backstop fields of
//     Finalizer, so that neither can be written without the other; Keep
//     is one of GroupPolicy, BackupPolicy and Combined. New refuses a
//     Config with neither a Keep nor a Finalizer, and a GroupPolicy
//     without an Outcome.
//
// Not guaranteed: the nesting guard sees the backups that Objects lists
// in all namespaces (Objects.List with ""; a cache scoped to some
// namespaces sees those); data written under a prefix by something that is
// not a backup resource is not known to it. The Collector keeps retry
// times in memory: a restarted process retries at once. A backup type that
// does not implement ConditionSetter (an *unstructured.Unstructured) gets
// events only.
//
// # Unknown outcomes
//
// New refuses a GroupPolicy without an Outcome mapping, and a backup whose
// Outcome is retention.OutcomeUnspecified is left out of its group's
// evaluation: it is neither deleted nor counted. Reading an unknown
// outcome as a success (retention's default) would let a failed or
// unfinished newest backup take the place of the last good one among the
// newest N, and the guard would protect it instead of the good one; reading
// it as a failure would let the policy delete a good backup whose status is
// late. Leaving it out is the only reading that can delete nothing good.
// A BackupPolicy judges each backup alone with the guard off, so it needs
// no outcome; in Combined, a backup of unknown outcome is kept whatever its
// own policy says.
//
// # Errors
//
// New returns errors that are ErrInvalidConfig and name the field. Pass
// returns an error only for what stopped the whole pass (a failed List);
// what concerns one backup is in its Outcome, condition and event.
package collect
