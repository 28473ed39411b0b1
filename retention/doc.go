// Package retention decides, for a set of things that have timestamps
// (backups, claims, finished tasks, backup entries), which may be deleted now,
// which must be kept and why, and when the next one becomes deletable. It is
// pure: no clients, no I/O, and the current time is always passed in.
package retention
