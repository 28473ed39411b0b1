package subreconcile

import (
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// Loop is what a step knows about the loop it runs in: the per-loop state, the
// loop's logger, clock and trace ID, and a way to say that it did something.
//
// The runner passes Loop by value and builds the step's logger only when the
// step asks for it, so a step that has nothing to do costs no allocation. A
// Loop must not be kept after the step returns.
//
// The zero Loop is usable (a discarding logger, the real clock, the zero
// state), which helps when a step is called directly in a unit test.
type Loop[S any] struct {
	log        logr.Logger
	chain      string
	step       string
	index      int
	trace      TraceID
	generation int64
	clock      clock.PassiveClock
	state      S
	notes      *loopNotes
}

// State returns the per-loop state: built once at the start of the loop by
// Config.NewState, or once before this step when Config.FreshStatePerStep is
// set.
func (l Loop[S]) State() S { return l.state }

// Logger returns the loop's logger (taken from the context passed to
// Runner.Run) with the chain name, the loop's trace ID and the step's name
// attached. It allocates when logging is enabled: call it once per step.
func (l Loop[S]) Logger() logr.Logger {
	if l.log.GetSink() == nil {
		return l.log
	}
	return l.log.WithValues("chain", l.chain, "traceID", l.trace, "subreconciler", l.step)
}

// Clock returns the loop's clock; steps compute requeue delays from it instead
// of reading the wall clock.
func (l Loop[S]) Clock() clock.PassiveClock {
	if l.clock == nil {
		return clock.RealClock{}
	}
	return l.clock
}

// TraceID returns the ID shared by every log line of this loop.
func (l Loop[S]) TraceID() TraceID { return l.trace }

// Step returns the name of the running step.
func (l Loop[S]) Step() string { return l.step }

// Generation returns the resource's metadata.generation when the loop
// started; that is the generation the loop reconciles, and the one to record
// with Generations.MarkReconciled.
func (l Loop[S]) Generation() int64 { return l.generation }

// Acted records that the step changed something (created a pod, updated a
// config map, ...). The runner writes one log line for each step that acted or
// asked for a requeue, and reports it in Outcome.Acted. A step that only
// looked and found nothing to do should not call Acted.
func (l Loop[S]) Acted(what string) {
	if l.notes == nil {
		return
	}
	l.notes.actions = append(l.notes.actions, what)
}

// loopNotes is the per-loop scratch space the runner takes from a pool, so
// that Loop can stay a value without allocating per step.
type loopNotes struct {
	actions []string
}

// TraceID identifies one reconcile loop in the logs. It is random, not
// unique across processes; it prints as 16 hexadecimal digits.
type TraceID uint64

const hexDigits = "0123456789abcdef"

// String returns the ID as 16 hexadecimal digits.
func (t TraceID) String() string {
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[t&0xf]
		t >>= 4
	}
	return string(b[:])
}

// MarshalLog makes logr sinks print the hexadecimal form.
func (t TraceID) MarshalLog() any { return t.String() }
