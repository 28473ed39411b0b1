package locking

import (
	"fmt"
	"math"
	"time"

	"github.com/groundskeeper-io/groundskeeper/internal/tuple"
)

// Record is the content of the lock key: who holds the lock, since when and
// until when, in Unix seconds.
type Record struct {
	Holder     string
	Start, End time.Time
}

// record is the stored form, exactly as the FoundationDB operator writes it.
type record struct {
	holder     string
	start, end int64 // Unix seconds
}

func (r record) public() Record {
	return Record{Holder: r.holder, Start: time.Unix(r.start, 0), End: time.Unix(r.end, 0)}
}

// encodeRecord packs tuple{holder, start, end}: a unicode string (type code
// 0x02) and two integers, the only element types the FoundationDB operator
// accepts.
func encodeRecord(r record) ([]byte, error) {
	return tuple.Tuple{r.holder, r.start, r.end}.Pack()
}

// decodeRecord is as strict as the FoundationDB operator's reader, which
// rejects any other element types, and stricter in one place: an empty value
// is corrupt, where the operator treats it as no lock (no writer produces an
// empty value, so seeing one means something else wrote the key). Elements
// after the third are ignored, as the operator ignores them.
func decodeRecord(key, value []byte) (record, error) {
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Key: clone(key), Value: clone(value), Reason: fmt.Sprintf(format, args...)}
	}
	if len(value) == 0 {
		return record{}, corrupt("empty value")
	}
	t, err := tuple.Unpack(value)
	if err != nil {
		return record{}, corrupt("not a tuple: %v", err)
	}
	if len(t) < 3 {
		return record{}, corrupt("tuple has %d elements, want lockID, start, end", len(t))
	}
	holder, ok := t[0].(string)
	if !ok {
		return record{}, corrupt("lockID is %T, want a unicode string", t[0])
	}
	start, ok := t[1].(int64)
	if !ok {
		return record{}, corrupt("start is %T, want an integer of Unix seconds", t[1])
	}
	end, ok := t[2].(int64)
	if !ok {
		return record{}, corrupt("end is %T, want an integer of Unix seconds", t[2])
	}
	return record{holder: holder, start: start, end: end}, nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// Outcome says how Take obtained the lock.
type Outcome int

const (
	// OutcomeTaken: the lock was free, or held by this instance but
	// expired; the record starts now.
	OutcomeTaken Outcome = iota + 1
	// OutcomeExtended: this instance held a live lock; its end moved to now
	// plus the duration (earlier than before, if the duration was
	// shortened) and its start stayed.
	OutcomeExtended
	// OutcomeTakenOver: another instance's lock had expired or its holder
	// is on the deny list; the record now names this instance and starts
	// now.
	OutcomeTakenOver
	// OutcomeBypassed: locking is disabled; nothing was read or written.
	OutcomeBypassed
)

func (o Outcome) String() string {
	switch o {
	case OutcomeTaken:
		return "Taken"
	case OutcomeExtended:
		return "Extended"
	case OutcomeTakenOver:
		return "TakenOver"
	case OutcomeBypassed:
		return "Bypassed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Lease is what a successful Take returns.
type Lease struct {
	Record
	Outcome Outcome
	// Previous is the holder whose lock was taken over (TakenOver only).
	Previous string
}

// policy is the timing configuration the decisions depend on.
type policy struct {
	duration time.Duration
	skew     time.Duration
}

// takeState is what Take read in its transaction.
type takeState struct {
	self         string
	selfDenied   bool
	current      *record // nil when the key is absent
	holderDenied bool    // only read when current.holder != self
}

// takeDecision is the outcome of decideTake: either a record to write or an
// error.
type takeDecision struct {
	write    record
	outcome  Outcome
	previous string
	err      error
}

// decideTake is the whole algorithm of Take, a pure function of what was read
// and the time.
func decideTake(s takeState, now time.Time, p policy) takeDecision {
	// The deny list is checked first, so a denied instance cannot take even a
	// free lock. (The FoundationDB operator checks it only when a record
	// exists; the seed says a denied instance fails every attempt.)
	if s.selfDenied {
		return takeDecision{err: fmt.Errorf("lock ID %q: %w", s.self, ErrDenied)}
	}
	fresh := record{holder: s.self, start: now.Unix(), end: now.Add(p.duration).Unix()}
	cur := s.current
	switch {
	case cur == nil:
		return takeDecision{write: fresh, outcome: OutcomeTaken}
	case cur.holder == s.self && !expired(*cur, now):
		return takeDecision{
			write:   record{holder: s.self, start: cur.start, end: fresh.end},
			outcome: OutcomeExtended,
		}
	case cur.holder == s.self:
		// Our own lapsed lock: nobody took it meanwhile, but we did not hold
		// it either, so it starts afresh.
		return takeDecision{write: fresh, outcome: OutcomeTaken}
	case s.holderDenied || expiredForOthers(*cur, now, p.skew):
		// Take-over starts a new record. The FoundationDB operator keeps the
		// previous holder's start here, which makes the start of a record
		// mean nothing; we record when this holder's tenure began.
		return takeDecision{write: fresh, outcome: OutcomeTakenOver, previous: cur.holder}
	default:
		return takeDecision{err: &HeldError{
			LockID:       s.self,
			Holder:       cur.holder,
			Start:        time.Unix(cur.start, 0),
			End:          time.Unix(cur.end, 0),
			RequeueAfter: retryAfter(*cur, now, p.skew),
			err:          ErrLocked,
		}}
	}
}

// expired is the FoundationDB operator's test: the end second has passed.
func expired(r record, now time.Time) bool {
	return r.end < now.Unix()
}

// expiredForOthers is expired, for a contender, with the clock-skew
// tolerance: a contender waits skew longer before it takes a lock over.
func expiredForOthers(r record, now time.Time, skew time.Duration) bool {
	return r.end < now.Add(-skew).Unix()
}

// retryAfter is the time from now until expiredForOthers becomes true.
func retryAfter(r record, now time.Time, skew time.Duration) time.Duration {
	if r.end >= math.MaxInt64/2 {
		return time.Duration(math.MaxInt64)
	}
	d := time.Unix(r.end+1, 0).Add(skew).Sub(now)
	return max(d, 0)
}

// decideRelease says whether Release may clear the record, and if not, why.
func decideRelease(self string, cur record, now time.Time) error {
	held := func(reason string) error {
		return &HeldError{
			LockID: self,
			Holder: cur.holder,
			Start:  time.Unix(cur.start, 0),
			End:    time.Unix(cur.end, 0),
			Reason: reason,
			err:    ErrNotHeld,
		}
	}
	switch {
	case cur.holder != self:
		return held("held by another instance")
	case cur.start > now.Unix():
		return held("the record starts in the future")
	case expired(cur, now):
		return held("the record has expired")
	}
	return nil
}
