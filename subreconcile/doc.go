// Package subreconcile splits a reconcile loop into an ordered chain of small
// steps, each deciding for itself whether it has work, in the manner of the
// FoundationDB operator's subreconcilers: per-loop shared state, delayed and
// immediate requeues, generation tracking, per-step logging and metrics.
package subreconcile
