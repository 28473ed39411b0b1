// Package collect is the backup collection job that every operator with a
// backup resource writes around retention's decisions and backupstore's
// deletion: the retention pass over the backups of a namespace, the
// deletion of a backup's data before the resource that records where the
// data is, and the reasons a backup is kept, on its status and in events.
// It works for any backup resource type: the user says how to read a
// backup (Config: Location, Time, Group, Outcome, Tags) and what to keep
// (Policy per group, ObjectPolicy for a time-to-live field on each backup
// — TTLField reads one in retention.ParseDuration's notation — or both: a
// backup is then kept while either keeps it).
//
// The core is here, with no controller-runtime import, so that client-go
// users implement Objects over their own client; package crt/backups wires
// a Collector on a controller-runtime manager in a few lines (Objects,
// Collect, and PolicyOf for a policy kept on the database's resource).
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
//   - Dry run: Config.DryRun decides and lists exactly the keys that would be
//     deleted (Outcome.Keys) and why (Outcome.Message), and writes nothing:
//     no data, no resource, no condition, no event, no finalizer.
//   - When: Report.RequeueAfter is the next instant a decision changes by
//     time alone (a backup expires, a retry is due).
//
// Not guaranteed: the nesting guard sees the backups that Objects lists
// in all namespaces (Objects.List with ""; a cache scoped to some
// namespaces sees those); data written under a prefix by something that is not a
// backup resource is not known to it. The Collector keeps retry times in
// memory: a restarted process retries at once.
//
// # Unknown outcomes
//
// With a group Policy, New refuses a Config without an Outcome mapping,
// and a backup whose Outcome is retention.OutcomeUnspecified is left out of
// the evaluation: it is neither deleted nor counted. Reading an unknown
// outcome as a success (retention's default) would let a failed or
// unfinished newest backup take the place of the last good one among the
// newest N, and the guard would protect it instead of the good one; reading
// it as a failure would let the policy delete a good backup whose status is
// late. Leaving it out is the only reading that can delete nothing good.
// ObjectPolicy judges each backup alone with the guard off, so it needs no
// outcome; with a group Policy too, a backup of unknown outcome is kept
// whatever its own policy says.
//
// # Errors
//
// New returns errors that are ErrInvalidConfig and name the field. Pass
// returns an error only for what stopped the whole pass (a failed List);
// what concerns one backup is in its Outcome, condition and event.
package collect
