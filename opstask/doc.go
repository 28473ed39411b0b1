// Package opstask runs out-of-band operator tasks (on-demand snapshots,
// compactions, copies of backups) as a state machine, Pending → InProgress →
// Succeeded or Failed, or Pending → Rejected, executed first-in-first-out per
// target, with preconditions, duplicate detection, a record of the last
// operation and errors, clean-up after a TTL, and metrics. Stores are
// pluggable.
//
// This package is not implemented yet.
package opstask
