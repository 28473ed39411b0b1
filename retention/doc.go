// Package retention decides, for a set of things that have timestamps
// (backups, claims, finished tasks, backup entries), which may be deleted now,
// which must be kept and why, and when the next one becomes deletable. It is
// pure: no clients, no I/O, and the current time is always passed in.
//
// Start with [Evaluate]: one Decision per item, in input order:
//
//	err := retention.Evaluate(retention.TTL{After: 30 * retention.Day}, clock.Now(), items, &res)
//
// Evaluate deletes nothing: it is the dry run. Hold keeps an item whatever
// the policy says. Unless forced ([Item.Force]), no item goes before Time +
// After under TTL, nor when it has no Time or a future one, nor when it is
// the newest of its group that did not fail (the guard; off with
// [Options.AllowDeleteNewest]). Re-read an object and delete it with a UID
// precondition: a decision is about the items as they were passed.
//
// # Using it
//
// A caller turns its objects into Items (an ID, the Time a policy measures
// from, Hold and Force flags, and for backups a Group, Tags and an Outcome),
// picks a Policy and calls Evaluate:
//
//	var res retention.Result // reuse across reconciles
//	err := retention.Evaluate(retention.Any{
//		retention.TTL{After: 30 * retention.Day},
//		retention.Newest{N: 1},
//	}, clock.Now(), items, &res)
//	for i, d := range res.Decisions {
//		if !d.Keep {
//			// delete items[i], with a precondition on its UID
//		}
//	}
//	return reconcile.Result{RequeueAfter: res.RequeueAfter(clock.Now())}, err
//
// The policies:
//
//   - TTL: an item expires when now >= Time + After. Item.Time says what the
//     time-to-live counts from (creation, finish, an annotation, a deletion
//     timestamp); a maximum age is a TTL from creation.
//   - Newest: keep the newest N (a maximum count).
//   - Calendar: everything restic's "forget" keeps (keep-last, -hourly,
//     -daily, -weekly, -monthly, -yearly, -within, -within-hourly ...
//     -within-yearly, -tag), plus a count of failed items to keep. Its
//     string form ("last=3,daily=7,weekly=4,within=1y") comes from
//     ParsePolicy and Calendar.String, for a custom resource field.
//   - Exponential: etcd-backup-restore's thinning of full snapshots.
//   - Any (keep wins) and All (delete wins) combine policies; Newest inside
//     Any is the guard "always keep the newest N".
//
// Durations come from ParseDuration ("30d", "2w", "1d12h", "720h0m0s"),
// Seconds and Days; Format prints the canonical form. Calendar spans, where
// "m" is a month, come from ParseSpan ("1y6m", "30d"): a separate type and
// parser, so that a month is never read as a minute.
//
// Options.Evaluate adds the safety rails and restic's tie-break: the guard
// that keeps the newest item of each group that did not fail (on unless
// AllowDeleteNewest), MaxDeletions, and TieByInput.
//
// The guard reads an unset Outcome as success. An Outcome the caller never
// set cannot tell a backup that completed from one whose caller did not
// say, and the two ways to be wrong are not alike: guarding an item that
// needed no guard keeps one item too many, visibly (ReasonGuard,
// GroupResult.Guarded, "newest successful (guard)" in Explain); not
// guarding a backup that needed it deletes the last good backup, silently.
// So the guard is off only when the caller says so, with AllowDeleteNewest:
// for things that are not attempts (claims, finished tasks, backup entries
// of a deleted owner) and for items judged one at a time (a backup with a
// TTL of its own), where the guard would keep every item. Explain turns a Result
// into what `restic forget --dry-run --json` prints: per group, the kept and
// removed items and, for each kept one, the rules it matched and the counters
// left.
//
// # restic's forget options
//
//	restic                         here
//	--keep-last n                  Calendar.Last, "last=n"
//	--keep-hourly n                Calendar.Hourly, "hourly=n"
//	--keep-daily n                 Calendar.Daily, "daily=n"
//	--keep-weekly n                Calendar.Weekly, "weekly=n"
//	--keep-monthly n               Calendar.Monthly, "monthly=n"
//	--keep-yearly n                Calendar.Yearly, "yearly=n"
//	unlimited (-1)                 Unlimited, "unlimited"
//	--keep-within 1y2m3d4h         Calendar.WithinSpan (ParseSpan), "within=1y2m3d4h"
//	--keep-within-hourly span      Calendar.WithinHourly, "within-hourly=span"
//	  ... -daily/-weekly/-monthly  Calendar.WithinDaily/Weekly/Monthly
//	--keep-within-yearly span      Calendar.WithinYearly, "within-yearly=span"
//	--keep-tag a,b (repeatable)    Calendar.Tags = [][]string{{"a", "b"}}, "tag=a+b"
//	--keep-tag ''                  Calendar.Tags = [][]string{{""}}, "tag="
//	--group-by host,paths,tags     Item.Group: the caller builds the key
//	--host, --tag, --path filters  the caller passes only those items
//	--dry-run, --json              Evaluate deletes nothing; Explain, encoding/json
//	snapshot time in its own zone  Calendar.ItemZone, "tz=item"
//	stable sort of equal times     Options{TieBreak: TieByInput}
//	"oldest daily snapshot"        ReasonOldest with Decision.Oldest = ReasonDaily
//	--prune, --max-unused, ...     none: pruning is I/O, not policy
//
// Deliberate differences from restic, each with its reason:
//
//   - Buckets and spans are in UTC by default, where restic uses the zone
//     each snapshot was recorded in: the recorded offset depends on the
//     machine that made the backup, and UTC days cannot be merged or split by
//     daylight saving time. Calendar.ItemZone gives restic's behaviour and
//     Calendar.Location a fixed zone.
//   - Equal Times are ranked by ID by default, where restic keeps the input
//     order: a Kubernetes list has no stable order, and decisions should not
//     change with it. TieByInput gives restic's order.
//   - Items whose Time is after now, forced items, items without a Time and
//     failed items take no part in counting, where restic counts every
//     snapshot (future ones included, though its spans start from the newest
//     snapshot not in the future): a wrong clock or a run of failed attempts
//     must not push a good item out. restic's "oldest" rule applies to the
//     oldest counted item.
//   - ParseSpan is stricter than restic's duration parser: no spaces, no
//     sign, no unit twice, units in the order y, m, d, h, and "m" after "d"
//     or "h" ("1h30m") is rejected, because there it almost certainly meant
//     minutes; restic would read months. Each field is at most 1,000,000.
//   - An empty tag list is rejected, where restic's would match every
//     snapshot: it is almost certainly a mistake in a policy string.
//   - restic fails a group whose tag-only policy would remove everything;
//     here the guard keeps the newest item of each group that did not fail,
//     whatever the policy (and MaxDeletions turns any mass deletion into an
//     error).
//   - Failed items, their separate count (Calendar.Failed, Newest.Failed),
//     the guard, the deletion cap, a fixed-duration Within and a fixed
//     Location are extensions restic does not have.
//
// Each seed's fields map onto the policies as follows: aerospike-operator's
// backup .spec.ttl is TTL from the creation timestamp with ZeroMeansForever,
// each backup judged alone, and its PVC TTL is TTL from the
// last-unmounted-on annotation (a claim without the annotation has the zero
// Time and is kept); etcd-druid's ttlSecondsAfterFinished is
// TTL{After: Seconds(n)} from the finish time, and the copy-backups filter
// maxBackupAge/maxBackups is All{TTL{After: Days(age)}, Newest{N: max}};
// Gardener's deletionGracePeriod is TTL from the deletion timestamp, with
// Force for a forced deletion. All of these are evaluated with
// AllowDeleteNewest: none of them keeps the newest item whatever its age.
//
// Evaluate deletes nothing: it is the dry run, returning exactly what may be
// deleted and why.
//
// # Guarantees
//
//   - Evaluate returns exactly one Decision per Item, in input order: every
//     item is either kept or deleted, never both, never neither.
//   - An item is deleted only when its policy lets it go, or when Force is
//     set; Hold keeps an item whatever Force and the policy say. A forced
//     item takes no place among the newest, so Newest{N: 1} inside Any still
//     keeps one item when the newest is forced out.
//   - Under TTL, nothing is deleted before now >= Time + After: an item is
//     kept at Time + After - 1ns and may be deleted at Time + After.
//   - A Time in the future (clock skew) never makes an item deletable early:
//     under TTL it is kept until Time + After; ranking policies keep it
//     (ReasonFuture) and do not let it take a place among the newest, so it
//     cannot push another item out. The decision has Skew set.
//   - An item with the zero Time (a missing annotation, say) is kept
//     (ReasonNoTime) unless forced: an unknown age is never taken as old.
//   - Every kept item says why (Decision.Reasons) and, where time alone will
//     let it go, when (Decision.DeletableAt). Result.Next, the earliest of
//     those instants, is never later than the first instant at which a
//     decision changes if the items do not change: requeue then, not by
//     polling.
//   - Decisions do not depend on the order of the input when IDs are unique:
//     equal Times are ordered by ID (unless Options.TieBreak is TieByInput,
//     restic's order).
//   - Ranking policies (Newest, Calendar, Exponential) and the guard judge
//     each Item.Group on its own: one group's items never push another's
//     out, and Result.Groups reports each group.
//   - No failed item (OutcomeFailed) takes a keep slot, a bucket or the
//     place of the newest item that spans count from: failed items are kept
//     only by their own counts, tags, TTL, Hold or an empty Calendar.
//   - With the guard on (the default), the newest item of each group that
//     did not fail, OutcomeSucceeded or an unset Outcome alike, is kept
//     (ReasonGuard) unless it is forced: a caller who never sets Outcome
//     keeps its newest item rather than losing the guard without a word.
//   - With Options.MaxDeletions set, a policy never deletes more than that
//     many items in one evaluation: above it, it deletes none
//     (ReasonMaxDeletions) and Evaluate returns ErrTooManyDeletions.
//   - Decisions are stable: evaluating again, at the same instant, over the
//     items that were kept keeps all of them.
//   - Exponential, and Calendar unless given a Location or ItemZone, bucket
//     in UTC: no daylight saving time, a day is 24 hours, leap days are
//     ordinary days. In a Location, buckets follow its wall clock: the hour
//     repeated when daylight saving time ends is one hourly bucket, as in
//     restic, and a day-long span may be 23 or 25 hours.
//   - Evaluate reads no clock, does no I/O, does not modify its input and is
//     safe for concurrent use with distinct Results. With a reused Result it
//     allocates nothing in steady state.
//
// It does not guarantee:
//
//   - that a deletion is safe when it happens: the decision is a pure function
//     of (items, now). Re-read the object before deleting it and delete with a
//     UID precondition, as Kubernetes' ttlafterfinished controller does.
//   - exact DeletableAt values when some Time is in the future, or when
//     Exponential is combined with other policies in Any: then DeletableAt
//     may be earlier than needed (never later), and re-evaluating at that
//     instant gives the right answer.
//   - the same decisions as restic or etcd-backup-restore in every corner:
//     Calendar and Exponential list their differences.
//
// # Errors
//
// ParseDuration, Seconds and Days reject bad input with a *DurationError
// that names the input and unwraps to ErrInvalidDuration. ParseSpan rejects
// with a *SpanError (ErrInvalidSpan), ParsePolicy with a *PolicyError that
// names the bad token and unwraps to ErrInvalidPolicy. An evaluation above
// Options.MaxDeletions returns an error wrapping ErrTooManyDeletions that
// names the cap and the count; its Result keeps every item the policy would
// have deleted. Evaluate rejects a
// nil or misconfigured policy (a negative count or duration, an empty Any or
// All) with an error that wraps ErrInvalidPolicy and names the field and its
// value, e.g. "retention: invalid policy: Any[1].Newest.N = -1: must not be
// negative"; invalid Options (a negative MaxDeletions, an unknown TieBreak)
// with one that wraps ErrInvalidConfig, named the same way. Items are never
// rejected.
package retention
