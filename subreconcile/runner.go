package subreconcile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/groundskeeper-io/groundskeeper/internal/event"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// Defaults used when the corresponding Config field is zero.
const (
	// DefaultMinDelay replaces a zero requeue delay, as the FoundationDB
	// operator does (100ms), so that "requeue soon" is never lost: a
	// controller-runtime Result with a zero RequeueAfter does not requeue.
	DefaultMinDelay = 100 * time.Millisecond

	// DefaultConflictDelay is the requeue delay after an optimistic-
	// concurrency conflict when the step gave none. The conflict only means
	// the cached copy was stale; the watch event for the newer version
	// usually triggers a loop sooner. (Upstream uses a minute in its cluster
	// controller and a second or five in others.)
	DefaultConflictDelay = 5 * time.Second

	// DefaultNotReconciledDelay is the requeue delay when the whole chain
	// ran, no step asked for a requeue, and the generation is still not
	// reconciled (upstream's pod-scheduling delay).
	DefaultNotReconciledDelay = 15 * time.Second
)

// Event types and reasons recorded by the runner. The types are the values
// of k8s.io/api/core/v1 EventTypeNormal and EventTypeWarning.
const (
	EventTypeNormal  = "Normal"
	EventTypeWarning = "Warning"

	// ReasonTerminatedEarly is recorded when a step ends the loop early
	// (immediate requeue, error, conflict, terminal error or panic).
	ReasonTerminatedEarly = "ReconciliationTerminatedEarly"

	// ReasonComplete is recorded when a generation becomes fully reconciled.
	ReasonComplete = "ReconciliationComplete"
)

// EventRecorder is the part of client-go's record.EventRecorder that the
// runner uses; a record.EventRecorder satisfies it as is. Wrap anything else
// (for example a k8s.io/client-go/tools/events recorder) in an EventFunc. It
// is the same type as lifecycle.EventRecorder, so one recorder serves both
// packages.
type EventRecorder = event.Recorder

// EventFunc adapts a function to an EventRecorder. It is the same type as
// lifecycle.EventFunc.
type EventFunc = event.Func

// Config configures a Runner. New validates it; errors name the bad field.
// Only Name and Steps are required.
type Config[T Object[T], S any] struct {
	// Name names the chain in logs and metrics (for example
	// "FoundationDBCluster"). Required.
	Name string

	// Steps run in this order on every loop. Required, non-empty; every
	// step needs a name.
	Steps []Named[T, S]

	// NewState builds the per-loop state handed to every step (the
	// FoundationDB operator fetches the database status once per loop). If
	// it fails, the loop ends with its error before any step runs; to carry
	// on without the state, return a state that records the failure and a
	// nil error. Nil means the zero S.
	NewState func(ctx context.Context, obj T) (S, error)

	// FreshStatePerStep turns the per-loop caching off: NewState is called
	// before every step instead of once per loop (upstream's
	// --cache-database-status=false).
	FreshStatePerStep bool

	// Normalize, if set, runs once at the start of the loop (defaulting,
	// deprecation rewrites); an error ends the loop.
	Normalize func(obj T) error

	// RestoreSpec, if set, hands every step a fresh copy of the normalized
	// spec: the runner snapshots obj with DeepCopy after Normalize and calls
	// RestoreSpec(obj, snapshot) before each step, which should deep-copy
	// the snapshot's spec into obj, e.g.
	//
	//	func(obj, normalized *Cluster) { normalized.Spec.DeepCopyInto(&obj.Spec) }
	//
	// so that a status update by one step (which resets normalized fields)
	// or a careless spec change cannot leak into the next step. Status
	// changes are kept. Nil leaves the spec alone and skips the snapshot.
	RestoreSpec func(obj, normalized T)

	// Generations, if set, returns the resource's generation status. The
	// runner then requeues a loop that ran to the end with the generation
	// still not reconciled, and records ReasonComplete when a loop brings
	// the generation to reconciled. When nil, a loop is reconciled when it
	// ran to the end and no step asked for a requeue, and every such loop
	// records ReasonComplete (as upstream does; the event recorder's
	// correlator folds the repeats).
	Generations func(obj T) *Generations

	// Recorder, if set, receives the runner's events. Nil records none.
	Recorder EventRecorder

	// Clock times the steps and is handed to them. Defaults to the real
	// clock.
	Clock clock.PassiveClock

	// Metrics, if set, receives step durations and requeue counts.
	Metrics *Metrics

	// IsConflict recognizes an optimistic-concurrency conflict. Defaults to
	// k8s.io/apimachinery/pkg/api/errors.IsConflict.
	IsConflict func(error) bool

	// ConflictDelay is the requeue delay for a conflict whose step gave no
	// delay; conflicts are then not errors. Zero means
	// DefaultConflictDelay; negative turns the special case off, so
	// conflicts are ordinary errors.
	ConflictDelay time.Duration

	// MinDelay replaces a zero or negative requeue delay. Zero means
	// DefaultMinDelay; negative is rejected, because a requeue must never
	// turn into "no requeue".
	MinDelay time.Duration

	// NotReconciledDelay is the requeue delay when the chain ran to the end
	// without requeues and Generations says the generation is not
	// reconciled. Zero means DefaultNotReconciledDelay; negative turns the
	// check off.
	NotReconciledDelay time.Duration
}

// Runner runs a chain of steps. It is safe for concurrent use by multiple
// goroutines (controller-runtime's MaxConcurrentReconciles), each running a
// different object.
type Runner[T Object[T], S any] struct {
	name               string
	steps              []Named[T, S]
	newState           func(context.Context, T) (S, error)
	freshState         bool
	normalize          func(T) error
	restoreSpec        func(obj, normalized T)
	generations        func(T) *Generations
	recorder           EventRecorder
	clock              clock.PassiveClock
	metrics            *Metrics
	observers          []prometheus.Observer
	isConflict         func(error) bool
	conflictDelay      time.Duration
	minDelay           time.Duration
	notReconciledDelay time.Duration
	notes              sync.Pool
}

// New validates cfg and returns a Runner.
func New[T Object[T], S any](cfg Config[T, S]) (*Runner[T, S], error) {
	if cfg.Name == "" {
		return nil, fmt.Errorf("%w: Config.Name is empty", ErrInvalidConfig)
	}
	if len(cfg.Steps) == 0 {
		return nil, fmt.Errorf("%w: Config.Steps is empty", ErrInvalidConfig)
	}
	for i, s := range cfg.Steps {
		if s.Name == "" {
			return nil, fmt.Errorf("%w: Config.Steps[%d].Name is empty", ErrInvalidConfig, i)
		}
		if s.Step == nil {
			return nil, fmt.Errorf("%w: Config.Steps[%d].Step (%q) is nil", ErrInvalidConfig, i, s.Name)
		}
		if f, ok := s.Step.(Func[T, S]); ok && f == nil {
			return nil, fmt.Errorf("%w: Config.Steps[%d].Step (%q) is a nil Func", ErrInvalidConfig, i, s.Name)
		}
	}
	if cfg.MinDelay < 0 {
		return nil, fmt.Errorf("%w: Config.MinDelay = %v: must not be negative (a requeue must never become no requeue)", ErrInvalidConfig, cfg.MinDelay)
	}
	r := &Runner[T, S]{
		name:               cfg.Name,
		steps:              slices.Clone(cfg.Steps),
		newState:           cfg.NewState,
		freshState:         cfg.FreshStatePerStep,
		normalize:          cfg.Normalize,
		restoreSpec:        cfg.RestoreSpec,
		generations:        cfg.Generations,
		recorder:           cfg.Recorder,
		clock:              cfg.Clock,
		metrics:            cfg.Metrics,
		isConflict:         cfg.IsConflict,
		conflictDelay:      cfg.ConflictDelay,
		minDelay:           cfg.MinDelay,
		notReconciledDelay: cfg.NotReconciledDelay,
	}
	r.notes.New = func() any { return new(loopNotes) }
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.isConflict == nil {
		r.isConflict = apierrors.IsConflict
	}
	if r.conflictDelay == 0 {
		r.conflictDelay = DefaultConflictDelay
	}
	if r.minDelay == 0 {
		r.minDelay = DefaultMinDelay
	}
	if r.notReconciledDelay == 0 {
		r.notReconciledDelay = DefaultNotReconciledDelay
	}
	if r.metrics != nil {
		// Resolve the per-step series once, so observing costs no
		// label lookup or allocation per step.
		r.observers = make([]prometheus.Observer, len(r.steps))
		for i, s := range r.steps {
			r.observers[i] = r.metrics.duration.WithLabelValues(r.name, s.Name)
		}
	}
	return r, nil
}

// Steps returns the step names in the order they run.
func (r *Runner[T, S]) Steps() []string {
	names := make([]string, len(r.steps))
	for i, s := range r.steps {
		names[i] = s.Name
	}
	return names
}

// Outcome is the result of one loop.
type Outcome struct {
	// RequeueAfter is when to run the next loop; zero means no requeue. It
	// is zero whenever Err is set, because the caller's rate limiter decides
	// then.
	RequeueAfter time.Duration

	// Err holds the errors of the loop, each wrapped with its step's name
	// ("subreconciler %q: ..."); several are joined with errors.Join.
	Err error

	// Messages holds the message of every requeue asked for, in step order.
	Messages []string

	// StoppedAt names the step that ended the loop early, if one did.
	StoppedAt string

	// Ran is the number of steps that were started.
	Ran int

	// Acted reports the steps that acted (called Loop.Acted) or asked for a
	// requeue, in the order they ran.
	Acted []StepReport

	// Reconciled tells whether the generation the loop started with is
	// reconciled (see Config.Generations).
	Reconciled bool

	// TraceID is the ID carried by the loop's log lines.
	TraceID TraceID
}

// StepReport describes one step that acted or asked for a requeue.
type StepReport struct {
	Name     string
	Index    int
	Duration time.Duration
	// Actions are the step's Loop.Acted descriptions.
	Actions []string
	// Requeue is what the step returned (nil if it only acted).
	Requeue *Requeue
}

// Result returns the outcome as the pair a controller-runtime reconciler or a
// workqueue loop needs: requeue after the duration when it is positive,
// retry with backoff when the error is non-nil. For controller-runtime:
//
//	after, err := out.Result()
//	if subreconcile.IsTerminal(err) {
//		err = reconcile.TerminalError(err)
//	}
//	return reconcile.Result{RequeueAfter: after}, err
//
// For a client-go workqueue, see Enqueue.
func (o Outcome) Result() (time.Duration, error) {
	if o.Err != nil {
		return 0, o.Err
	}
	return o.RequeueAfter, nil
}

// Terminal reports whether the loop ended with a terminal error, after
// which the resource must not be retried until it changes.
func (o Outcome) Terminal() bool { return IsTerminal(o.Err) }

// Requeue reports whether the resource should be reconciled again without
// waiting for a change: after RequeueAfter, or with backoff after an error
// that is not terminal.
func (o Outcome) Requeue() bool {
	if o.Err != nil {
		return !o.Terminal()
	}
	return o.RequeueAfter > 0
}

// Queue is the part of client-go's workqueue.TypedRateLimitingInterface that
// Enqueue uses.
type Queue[K comparable] interface {
	AddRateLimited(key K)
	AddAfter(key K, duration time.Duration)
	Forget(key K)
}

// Enqueue applies o to a client-go workqueue: a terminal error forgets the
// key; another error adds it rate-limited; a requeue delay forgets the
// backoff and adds it after the delay; success forgets it. The caller still
// calls q.Done(key).
func Enqueue[K comparable](q Queue[K], key K, o Outcome) {
	switch {
	case o.Err != nil && o.Terminal():
		q.Forget(key)
	case o.Err != nil:
		q.AddRateLimited(key)
	case o.RequeueAfter > 0:
		q.Forget(key)
		q.AddAfter(key, o.RequeueAfter)
	default:
		q.Forget(key)
	}
}

// pending accumulates the requeues of one loop.
type pending struct {
	requeue bool
	delay   time.Duration // the shortest delay asked for, when requeue
	errs    []error
}

func (p *pending) add(delay time.Duration) {
	if !p.requeue || delay < p.delay {
		p.delay = delay
	}
	p.requeue = true
}

func (p *pending) err() error {
	switch len(p.errs) {
	case 0:
		return nil
	case 1:
		return p.errs[0]
	default:
		return errors.Join(p.errs...)
	}
}

// Run runs one loop over obj: the steps in order, each with the loop's state,
// until one asks for an immediate requeue or all have run. obj is changed in
// place by the steps. The logger comes from ctx (logr.FromContext), as
// controller-runtime provides it.
//
// When several steps ask for a requeue, the loop requeues after the shortest
// delay any of them asked for. Every step runs on every loop and decides for
// itself whether it has work, so an early loop costs one idempotent pass,
// whereas a late one would hold up the step that asked for the shorter delay.
// (The FoundationDB operator takes the longest delay of its delayed requeues
// instead; a step that wants to be left alone for a while should not requeue
// at all but rely on the watch.)
func (r *Runner[T, S]) Run(ctx context.Context, obj T) Outcome {
	notes := r.notes.Get().(*loopNotes)
	defer r.putNotes(notes)

	loop := Loop[S]{
		log:        logr.FromContextOrDiscard(ctx),
		chain:      r.name,
		trace:      TraceID(rand.Uint64()),
		generation: obj.GetGeneration(),
		clock:      r.clock,
		notes:      notes,
	}
	out := Outcome{TraceID: loop.trace}
	var p pending
	end := r.runSteps(ctx, obj, loop, &out, &p)
	r.conclude(obj, loop, &out, &p, end)
	return out
}

// loopEnd says how a loop ended, for Run's one exit.
type loopEnd struct {
	// prepared: Normalize and the loop state succeeded, so the steps were
	// reached (though a canceled context may have stopped the first).
	prepared bool
	// ranThrough: every step ran and none stopped the loop.
	ranThrough bool
	// event is the message of the ReasonTerminatedEarly event to record;
	// empty records none.
	event string
	// failed makes that event a warning.
	failed bool
	// before is the generation status before the first step.
	before Generations
	// took is the time from the first step's start to the last one's end.
	took time.Duration
}

// runSteps prepares the loop (Normalize, the spec snapshot, the loop state)
// and runs the steps until one stops the loop or all have run. It adds the
// requeues and errors to p and the step reports to out, and says how the
// loop ended; the outcome is recorded by conclude.
func (r *Runner[T, S]) runSteps(ctx context.Context, obj T, loop Loop[S], out *Outcome, p *pending) loopEnd {
	if r.normalize != nil {
		if err := r.normalize(obj); err != nil {
			loop.log.Error(err, "Normalizing failed", "chain", r.name, "traceID", loop.trace)
			err = fmt.Errorf("subreconcile: normalizing: %w", err)
			p.errs = append(p.errs, err)
			return loopEnd{event: err.Error(), failed: true}
		}
	}
	var normalized T
	if r.restoreSpec != nil {
		normalized = obj.DeepCopy()
	}
	end := loopEnd{prepared: true}
	if r.generations != nil {
		if g := r.generations(obj); g != nil {
			end.before = *g
		}
	}
	if r.newState != nil && !r.freshState {
		state, err := r.newState(ctx, obj)
		if err != nil {
			loop.log.Error(err, "Building loop state failed", "chain", r.name, "traceID", loop.trace)
			err = fmt.Errorf("subreconcile: building loop state: %w", err)
			p.errs = append(p.errs, err)
			return loopEnd{event: err.Error(), failed: true}
		}
		loop.state = state
	}

	// Steps are timed as offsets from the loop's start: with the real clock
	// Since reads only the monotonic clock, half the cost of Now.
	start := r.clock.Now()
	notes := loop.notes
	for i := range r.steps {
		name := r.steps[i].Name
		if err := ctx.Err(); err != nil {
			p.errs = append(p.errs, fmt.Errorf("subreconcile: loop stopped before subreconciler %q: %w", name, err))
			return end
		}
		loop.step, loop.index = name, i
		if r.restoreSpec != nil {
			r.restoreSpec(obj, normalized)
		}
		if r.freshState && r.newState != nil {
			state, err := r.newState(ctx, obj)
			if err != nil {
				p.errs = append(p.errs, fmt.Errorf("subreconciler %q: building state: %w", name, err))
				loop.Logger().Error(err, "Building state failed")
				out.StoppedAt = name
				end.event, end.failed = name+": "+err.Error(), true
				return end
			}
			loop.state = state
		}
		clear(notes.actions)
		notes.actions = notes.actions[:0]

		req := r.call(ctx, i, obj, loop)

		elapsed := r.clock.Since(start)
		took := elapsed - end.took
		end.took = elapsed
		out.Ran = i + 1
		if r.observers != nil {
			r.observers[i].Observe(took.Seconds())
		}
		if req == nil && len(notes.actions) == 0 {
			continue
		}
		if stop, msg := r.record(loop, out, p, req, notes.actions, took); stop {
			out.StoppedAt = name
			if msg == "" {
				msg = "requeue requested"
			}
			end.event, end.failed = name+": "+msg, len(p.errs) > 0
			return end
		}
	}
	end.ranThrough = true
	return end
}

// conclude is Run's one exit: from how the loop ended and what it
// gathered in p, it sets the outcome's error, requeue delay and reconciled
// state, records the loop's event and logs the loop.
func (r *Runner[T, S]) conclude(obj T, loop Loop[S], out *Outcome, p *pending, end loopEnd) {
	var g Generations
	if end.prepared {
		g, out.Reconciled = r.reconciled(obj, loop.generation)
	}
	if end.ranThrough {
		if r.generations == nil {
			out.Reconciled = !p.requeue && len(p.errs) == 0
		} else if !out.Reconciled && !p.requeue && len(p.errs) == 0 && r.notReconciledDelay > 0 {
			p.add(r.notReconciledDelay)
			out.Messages = append(out.Messages, fmt.Sprintf(
				"generation %d is not reconciled yet (%s)", loop.generation, g))
		}
	}
	out.Err = p.err()
	if out.Err == nil && p.requeue {
		out.RequeueAfter = p.delay
	}

	base := loop.log
	switch {
	case end.event != "":
		r.endEarly(obj, end.event, end.failed)
	case end.ranThrough && out.Err == nil && out.Reconciled &&
		(r.generations == nil || !end.before.IsReconciled(loop.generation)):
		if r.recorder != nil {
			msg := "Reconciled generation " + strconv.FormatInt(loop.generation, 10)
			if g.PendingRemoval() {
				msg += " (removals still pending)"
			}
			r.recorder.Event(obj, EventTypeNormal, ReasonComplete, msg)
		}
		// Without generation tracking every clean loop counts as complete;
		// keep those quiet below V(1).
		log := base
		if r.generations == nil {
			log = base.V(1)
		}
		if log.Enabled() {
			log.Info("Reconciliation complete", "chain", r.name, "traceID", loop.trace, "generation", loop.generation,
				"pendingRemoval", g.PendingRemoval())
		}
	}
	if l := base.V(1); l.Enabled() {
		l.Info("Reconcile loop finished", "chain", r.name, "traceID", loop.trace, "ran", out.Ran,
			"stoppedAt", out.StoppedAt, "duration", end.took, "requeueAfter", out.RequeueAfter, "error", out.Err,
			"reconciled", out.Reconciled)
	}
}

// reconciled returns the resource's generation status and whether it says
// generation is reconciled; false without Config.Generations.
func (r *Runner[T, S]) reconciled(obj T, generation int64) (Generations, bool) {
	if r.generations == nil {
		return Generations{}, false
	}
	var g Generations
	if gp := r.generations(obj); gp != nil {
		g = *gp
	}
	return g, g.IsReconciled(generation)
}

func (r *Runner[T, S]) putNotes(n *loopNotes) {
	clear(n.actions)
	n.actions = n.actions[:0]
	r.notes.Put(n)
}

// call runs step i, turning a panic into an error requeue.
func (r *Runner[T, S]) call(ctx context.Context, i int, obj T, loop Loop[S]) (req *Requeue) {
	defer func() {
		if v := recover(); v != nil {
			req = &Requeue{Err: &panicError{value: v, stack: debug.Stack()}}
		}
	}()
	return r.steps[i].Step.Reconcile(ctx, obj, loop)
}

// record logs, counts and reports a step that acted or asked for a requeue,
// adds its requeue to p, and reports whether the chain must stop, with the
// step's message.
func (r *Runner[T, S]) record(loop Loop[S], out *Outcome, p *pending, req *Requeue, actions []string, took time.Duration) (stop bool, msg string) {
	report := StepReport{Name: loop.step, Index: loop.index, Duration: took, Requeue: req}
	if len(actions) > 0 {
		report.Actions = slices.Clone(actions)
	}
	out.Acted = append(out.Acted, report)
	log := loop.Logger()

	if req == nil {
		log.Info("Subreconciler acted", "duration", took, "actions", report.Actions)
		return false, ""
	}

	msg = req.Message
	if msg == "" && req.Err != nil {
		msg = req.Err.Error()
	}
	delay := req.Delay
	if delay <= 0 {
		delay = r.minDelay
	}
	var kind string
	var err error
	var pe *panicError
	switch {
	case req.Err == nil && req.Delayed:
		kind = RequeueDelayed
	case req.Err == nil:
		kind = RequeueImmediate
	case errors.As(req.Err, &pe):
		kind = RequeuePanic
	case IsTerminal(req.Err): // before conflicts: the step said "do not retry"
		kind = RequeueTerminal
	case r.conflictDelay > 0 && r.isConflict(req.Err):
		kind = RequeueConflict
		if req.Delay <= 0 {
			delay = r.conflictDelay
		}
	default:
		kind = RequeueError
	}
	if req.Err != nil && kind != RequeueConflict {
		err = fmt.Errorf("subreconciler %q: %w", loop.step, req.Err)
		p.errs = append(p.errs, err)
	} else {
		p.add(delay)
	}
	if msg != "" {
		out.Messages = append(out.Messages, msg)
	}
	stop = !req.Delayed || kind == RequeueTerminal || kind == RequeuePanic
	if r.metrics != nil {
		r.metrics.requeues.WithLabelValues(r.name, loop.step, kind).Inc()
	}

	kv := []any{"duration", took, "reason", kind, "delayed", req.Delayed, "message", msg}
	if len(report.Actions) > 0 {
		kv = append(kv, "actions", report.Actions)
	}
	switch {
	case pe != nil:
		log.Error(req.Err, "Subreconciler panicked", append(kv, "stack", string(pe.stack))...)
	case err != nil:
		log.Error(req.Err, "Subreconciler failed", kv...)
	default:
		log.Info("Subreconciler requested requeue", append(kv, "requeueAfter", delay)...)
	}
	return stop, msg
}

// endEarly records the event for a loop that did not run to the end.
func (r *Runner[T, S]) endEarly(obj T, msg string, failed bool) {
	if r.recorder == nil {
		return
	}
	typ := EventTypeNormal
	if failed {
		typ = EventTypeWarning
	}
	r.recorder.Event(obj, typ, ReasonTerminatedEarly, msg)
}

// panicError is the error a recovered panic becomes.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string        { return fmt.Sprintf("panic: %v", e.value) }
func (e *panicError) Is(target error) bool { return target == ErrPanic }

// Unwrap exposes a panic value that is itself an error.
func (e *panicError) Unwrap() error {
	err, _ := e.value.(error)
	return err
}
