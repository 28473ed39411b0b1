// Package subreconcile splits a reconcile loop into an ordered chain of small
// steps, in the manner of the FoundationDB operator's subreconcilers: every
// step runs on every loop and decides for itself whether it has work.
//
// Start with [New], over a [Config] listing the named steps, and call
// [Runner.Run] once per loop; [Outcome.Result] is what a reconciler returns:
//
//	r, err := subreconcile.New(cfg)
//	after, err := r.Run(ctx, db).Result()
//
// Steps run one at a time in Config order. The loop requeues after the
// shortest delay any step asked for, never drops a requeue, and turns a
// panicking step into an error. It neither fetches nor persists the
// resource, and it cannot undo: write steps to be started over at any point.
//
// # Steps
//
// It owns the loop around the steps and nothing else: the order they run in,
// the per-loop state handed to them, how their requeues combine into one
// result, generation tracking in the resource's status, and the per-step log
// lines, events and metrics. It talks to no API server: steps do their own
// reads and writes, and the caller fetches the resource and persists its
// status.
//
// A step implements Step (or is a Func) and returns nil ("done, go on") or a
// *Requeue with a delay, a message, an error, and whether it is delayed
// (finish the remaining steps first) or immediate (stop the chain now):
//
//	func addPods(ctx context.Context, c *v1.Cluster, loop subreconcile.Loop[*state]) *subreconcile.Requeue {
//		missing := ...
//		if len(missing) == 0 {
//			return nil
//		}
//		if err := create(ctx, missing); err != nil {
//			return subreconcile.RequeueOnError(err)
//		}
//		loop.Acted(fmt.Sprintf("created %d pods", len(missing)))
//		return subreconcile.DelayedRequeueAfter(15*time.Second, "waiting for new pods")
//	}
//
// New builds a Runner from a Config listing the named steps; Runner.Run runs
// one loop over a resource and returns an Outcome, whose Result method gives
// the (requeue-after, error) pair that a controller-runtime reconciler
// returns, and which Enqueue applies to a client-go workqueue.
//
// # Guarantees
//
//   - Steps run one at a time, in Config order, each at most once per loop.
//   - An immediate requeue, a terminal error or a panic stops the chain after
//     that step; a delayed requeue lets the remaining steps run.
//   - The loop requeues after the shortest delay any step asked for. Every
//     step runs on every loop, so an early loop costs one idempotent pass;
//     a late one would hold up the step that asked for less. (Upstream takes
//     the longest of its delayed requeues.)
//   - A requeue is never lost: a zero or negative delay becomes
//     Config.MinDelay (100ms by default), never "no requeue".
//   - Every message of every requeue is returned, in step order.
//   - An API-server optimistic-concurrency conflict is a requeue after
//     Config.ConflictDelay (5s by default, or the step's own delay), not an
//     error; this is configurable and can be turned off.
//   - When the whole chain ran without requeues but Config.Generations says
//     the generation is not reconciled, the loop requeues after
//     Config.NotReconciledDelay (15s by default).
//   - A panicking step does not crash the controller: it becomes an error
//     naming the step, and its stack is logged.
//   - A cancelled context stops the loop before the next step starts.
//   - The per-loop state is built once per loop, or once per step with
//     Config.FreshStatePerStep. With Config.RestoreSpec every step sees a
//     fresh copy of the normalized spec; status changes carry over.
//   - Each loop has a random trace ID, carried by every log line the runner
//     writes and by the logger a step gets from Loop.Logger, together with
//     the chain and step names.
//   - One log line per step that acted (Loop.Acted) or asked for a requeue;
//     nothing for steps with nothing to do. Steps are timed with the injected
//     clock; nothing reads the wall clock directly.
//   - An event (Config.Recorder) when a step ends the loop early, and when a
//     loop brings the generation to reconciled. A cancelled context records
//     none.
//   - A loop whose steps do nothing, over a resource whose generation is
//     already reconciled, allocates nothing in the runner, with metrics and
//     an enabled logger alike.
//   - A Runner is safe for concurrent use on different objects.
//
// # What it does not guarantee
//
//   - It does not fetch, lock or persist the resource: two loops over the
//     same object at once (which controller-runtime and the workqueue never
//     start) race on it.
//   - It does not enforce idempotency; steps must be written to be started
//     over at any point, since a loop can stop after any step and the
//     process can die at any time.
//   - It cannot stop a running step: cancellation is seen between steps,
//     and a step must watch ctx itself.
//   - It does not undo anything when a later step fails.
//   - Only steps are protected from panics; Normalize, NewState and
//     RestoreSpec are not.
//   - A Loop (and Loop.Acted) must not be used after its step returns.
//   - Trace IDs are random 64-bit values, not globally unique.
//
// # Generation tracking
//
// Generations is a status field recording up to which metadata.generation
// reconciliation got. A step (typically a last UpdateStatus) calls
// MarkReconciled(loop.Generation()) when the live state matches the spec. The
// documented exception is MarkReconciledWithPendingRemoval: once processes
// are fully excluded and their pods are terminating, the generation is marked
// reconciled although the removing step keeps requeuing until the kubelet
// confirms the termination; users can go on changing the resource meanwhile.
//
// # Errors
//
// Outcome.Err holds every error of the loop, each wrapped once with the name
// of its step as
//
//	subreconciler "AddPods": <the step's error>
//
// and joined with errors.Join when there are several, so errors.Is and
// errors.As reach the step's own errors. Errors from outside the steps are
// prefixed "subreconcile: " (normalizing, building the loop state, a
// cancelled context, which matches context.Canceled); a state built per
// step (Config.FreshStatePerStep) that fails is named after its step
// ("subreconciler "AddPods": building state: ..."). Sentinels:
//
//   - ErrTerminal (made with Terminal, tested with IsTerminal or
//     Outcome.Terminal): do not retry until the resource changes. With
//     controller-runtime, return reconcile.TerminalError(err); Enqueue
//     forgets the key.
//   - ErrPanic: the step panicked; the panic value, if an error, is wrapped
//     too.
//   - ErrInvalidConfig: New rejected its Config, or NewMetrics its
//     MetricsConfig (buckets out of order included); the error names the
//     field and its value. Terminal: fix the code.
//
// An error makes Outcome.RequeueAfter zero: the caller's rate limiter decides
// when to retry (controller-runtime ignores RequeueAfter when an error is
// returned).
//
// # Metrics
//
// NewMetrics registers, on a registerer the caller supplies (never the
// global one), a histogram of step durations by chain and step, and a counter
// of requeues by chain, step and reason. The reasons are the values of its
// "reason" label, untyped string constants named for what they are:
// RequeueImmediate, RequeueDelayed, RequeueConflict, RequeueError,
// RequeueTerminal, RequeuePanic.
//
// Package subreconciletest runs a chain in a test and asserts which steps
// acted, in which order, and the resulting requeue.
package subreconcile
