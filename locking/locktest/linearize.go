package locktest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// lockState is the model's state: the stored record, or the zero value for
// no record.
type lockState struct {
	holder     string
	start, end int64 // Unix seconds
}

func (s lockState) String() string {
	if s.holder == "" {
		return "free"
	}
	return fmt.Sprintf("%s [%d, %d]", s.holder, s.start, s.end)
}

// stepLock is the sequential specification of the lock, the model the
// checker holds a history against. It is written from the package
// documentation, not from the code: Take takes a free lock, extends a live
// lock of its own (keeping the start), starts afresh on its own expired
// lock, takes over another's lock whose end second has passed, and refuses
// any other lock naming its holder and end; Release clears only its own
// live lock that does not start in the future and otherwise names the
// record; Holder returns the record. A conflicting or unavailable operation
// changes nothing; one with an unknown outcome may have had its effect or
// none.
//
// It returns the states the lock may be in after op, none if op's output is
// impossible from s.
func stepLock(s lockState, op Op) []lockState {
	now := time.Unix(0, op.Now)
	sec := now.Unix()
	switch op.Result {
	case "conflict", "unavailable":
		return []lockState{s}
	case "unknown":
		next := []lockState{s}
		if op.Kind == "take" || op.Kind == "release" {
			if n, ok := effect(s, op, now); ok {
				next = append(next, n)
			}
		}
		return next
	}
	switch op.Kind {
	case "take":
		fresh := lockState{holder: op.ID, start: sec, end: now.Add(time.Duration(op.Lease)).Unix()}
		var want lockState
		outcome, previous := "", ""
		switch {
		case s.holder == "":
			want, outcome = fresh, "Taken"
		case s.holder == op.ID && s.end >= sec:
			want, outcome = lockState{holder: op.ID, start: s.start, end: fresh.end}, "Extended"
		case s.holder == op.ID:
			want, outcome = fresh, "Taken"
		case s.end < sec:
			want, outcome, previous = fresh, "TakenOver", s.holder
		default:
			if op.Result == "locked" && op.Holder == s.holder && op.End == s.end {
				return []lockState{s}
			}
			return nil
		}
		if op.Result == "ok" && op.Outcome == outcome && op.Previous == previous &&
			op.Holder == want.holder && op.Start == want.start && op.End == want.end {
			return []lockState{want}
		}
		return nil
	case "release":
		switch {
		case s.holder == "":
			if op.Result == "ok" {
				return []lockState{s}
			}
		case s.holder != op.ID || s.start > sec || s.end < sec:
			if op.Result == "notheld" && op.Holder == s.holder && op.Start == s.start && op.End == s.end {
				return []lockState{s}
			}
		default:
			if op.Result == "ok" {
				return []lockState{{}}
			}
		}
		return nil
	case "holder":
		if op.Result != "ok" || op.Present != (s.holder != "") {
			return nil
		}
		if op.Present && (op.Holder != s.holder || op.Start != s.start || op.End != s.end) {
			return nil
		}
		return []lockState{s}
	}
	return nil
}

// effect is the state after op if it took effect.
func effect(s lockState, op Op, now time.Time) (lockState, bool) {
	sec := now.Unix()
	fresh := lockState{holder: op.ID, start: sec, end: now.Add(time.Duration(op.Lease)).Unix()}
	switch op.Kind {
	case "take":
		switch {
		case s.holder == "", s.holder == op.ID && s.end < sec, s.holder != op.ID && s.end < sec:
			return fresh, true
		case s.holder == op.ID:
			return lockState{holder: op.ID, start: s.start, end: fresh.end}, true
		}
	case "release":
		if s.holder == op.ID && s.start <= sec && s.end >= sec {
			return lockState{}, true
		}
	}
	return s, false
}

// lockModel is stepLock as a porcupine model.
var lockModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{lockState{}} },
	Step: func(state, input, output any) []any {
		var out []any
		for _, s := range stepLock(state.(lockState), input.(Op)) {
			out = append(out, s)
		}
		return out
	},
	DescribeOperation: func(input, output any) string {
		op := input.(Op)
		switch op.Result {
		case "ok":
			switch op.Kind {
			case "take":
				return fmt.Sprintf("%s take @%d -> %s [%d, %d]", op.ID, time.Unix(0, op.Now).Unix(), op.Outcome, op.Start, op.End)
			case "holder":
				if !op.Present {
					return fmt.Sprintf("%s holder -> free", op.ID)
				}
				return fmt.Sprintf("%s holder -> %s [%d, %d]", op.ID, op.Holder, op.Start, op.End)
			}
			return fmt.Sprintf("%s %s @%d -> ok", op.ID, op.Kind, time.Unix(0, op.Now).Unix())
		case "locked", "notheld":
			return fmt.Sprintf("%s %s @%d -> %s by %s [%d, %d]", op.ID, op.Kind, time.Unix(0, op.Now).Unix(), op.Result, op.Holder, op.Start, op.End)
		}
		return fmt.Sprintf("%s %s @%d -> %s", op.ID, op.Kind, time.Unix(0, op.Now).Unix(), op.Result)
	},
	DescribeState: func(state any) string { return state.(lockState).String() },
}).ToModel()

// CheckResult is the outcome of CheckHistory.
type CheckResult struct {
	// Result is porcupine's verdict: Ok (linearizable), Illegal (not), or
	// Unknown (the check timed out).
	Result porcupine.CheckResult
	// Took is how long the check ran.
	Took time.Duration

	info porcupine.LinearizationInfo
}

// CheckHistory checks with porcupine, a linearizability checker, that h is
// a history of one lock obeying the package's specification (stepLock):
// that some order of the operations, each placed between its call and its
// return, explains every result. Two instances holding the lock at once, a
// lost or phantom write, and a stale read all make a history Illegal.
// Operations with unknown outcomes stay open until the end of the history.
func CheckHistory(h *History, timeout time.Duration) CheckResult {
	ops := make([]porcupine.Operation, 0, len(h.Ops))
	for _, op := range h.Ops {
		ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: op, Output: nil, Call: op.Call, Return: op.Return})
	}
	wall := clock.RealClock{}
	start := wall.Now()
	res, info := porcupine.CheckOperationsVerbose(lockModel, ops, timeout)
	return CheckResult{Result: res, Took: wall.Since(start), info: info}
}

// Visualize writes porcupine's HTML view of the checked history to path,
// showing the longest linearizable prefix and where it breaks.
func (c CheckResult) Visualize(path string) error {
	return porcupine.VisualizePath(lockModel, c.info, path)
}

// CheckLinearizable fails t unless h is linearizable (see CheckHistory). An
// inconclusive check (timeout) fails too. On failure the history is written
// as porcupine's HTML view to a file whose path is logged.
func CheckLinearizable(t testing.TB, h *History, timeout time.Duration) {
	t.Helper()
	res := CheckHistory(h, timeout)
	t.Logf("%s; porcupine: %s in %s", h.Summary(), res.Result, res.Took.Round(time.Millisecond))
	if res.Result == porcupine.Ok {
		return
	}
	path := visualizePath(t)
	if err := res.Visualize(path); err != nil {
		t.Logf("visualizing: %v", err)
	}
	if res.Result == porcupine.Unknown {
		t.Fatalf("linearizability check inconclusive after %s (history in %s)", timeout, path)
	}
	t.Fatalf("history is not linearizable: two holders, a lost write or a stale read (see %s)", path)
}

// CheckCatchesBroken hammers WithoutIsolation(backend) for d at a time, up
// to three times, and fails t unless the checker finds a history Illegal:
// the proof that a passing CheckLinearizable means something.
func CheckCatchesBroken(ctx context.Context, t testing.TB, backend locking.Backend, o HammerOptions, timeout time.Duration) {
	t.Helper()
	broken := WithoutIsolation(backend)
	for round := range 3 {
		h, err := Hammer(ctx, broken, o)
		if err != nil {
			t.Fatal(err)
		}
		res := CheckHistory(h, timeout)
		t.Logf("round %d against the broken backend: %s; porcupine: %s in %s", round, h.Summary(), res.Result, res.Took.Round(time.Millisecond))
		if res.Result == porcupine.Illegal {
			path := visualizePath(t)
			if err := res.Visualize(path); err == nil {
				t.Logf("the violation, as porcupine shows it: %s", path)
			}
			return
		}
	}
	t.Fatalf("the checker passed every history of a backend without isolation")
}

// visualizePath is a file that outlives the test, for a person to open.
func visualizePath(t testing.TB) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return filepath.Join(os.TempDir(), "locktest-"+name+"-"+strconv.FormatInt(clock.RealClock{}.Now().UnixNano(), 36)+".html")
}
