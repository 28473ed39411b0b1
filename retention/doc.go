// Package retention decides, for a set of things that have timestamps
// (backups, claims, finished tasks, backup entries), which may be deleted now,
// which must be kept and why, and when the next one becomes deletable. It is
// pure: no clients, no I/O, and the current time is always passed in.
//
// A caller turns its objects into Items (an ID, the Time a policy measures
// from, and Hold and Force flags), picks a Policy and calls Evaluate:
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
//   - Calendar: restic's "forget" buckets (keep-last, -hourly, -daily,
//     -weekly, -monthly, -yearly, -within).
//   - Exponential: etcd-backup-restore's thinning of full snapshots.
//   - Any (keep wins) and All (delete wins) combine policies; Newest inside
//     Any is the guard "always keep the newest N".
//
// Durations come from ParseDuration ("30d", "2w", "1d12h", "720h0m0s"),
// Seconds and Days; Format prints the canonical form.
//
// Each seed's fields map onto the policies as follows: aerospike-operator's
// backup .spec.ttl is TTL from the creation timestamp with ZeroMeansForever,
// and its PVC TTL is TTL from the last-unmounted-on annotation (a claim
// without the annotation has the zero Time and is kept); etcd-druid's ttlSecondsAfterFinished is
// TTL{After: Seconds(n)} from the finish time, and the copy-backups filter
// maxBackupAge/maxBackups is All{TTL{After: Days(age)}, Newest{N: max}};
// Gardener's deletionGracePeriod is TTL from the deletion timestamp, with
// Force for a forced deletion.
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
//     equal Times are ordered by ID.
//   - Decisions are stable: evaluating again, at the same instant, over the
//     items that were kept keeps all of them.
//   - Calendar and Exponential bucket in UTC: no daylight saving time, a day
//     is 24 hours, leap days are ordinary days.
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
// that names the input and unwraps to ErrInvalidDuration. Evaluate rejects a
// nil or misconfigured policy (a negative count or duration, an empty Any or
// All) with an error that wraps ErrInvalidPolicy and names the field and its
// value, e.g. "retention: invalid policy: Any[1].Newest.N = -1: must not be
// negative". Items are never rejected.
package retention
