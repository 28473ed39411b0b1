package retention

import (
	"fmt"
	"strconv"
	"time"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrInvalidSpan is the sentinel for every span ParseSpan rejects. Test for
// it with errors.Is; use errors.As with a *SpanError to get the input.
var ErrInvalidSpan = errclass.Terminal("retention: invalid span")

// SpanError reports a span that ParseSpan rejected. It unwraps to
// ErrInvalidSpan.
type SpanError struct {
	// Input is the string passed to ParseSpan.
	Input string
	// Reason says what is wrong with Input.
	Reason string
}

func (e *SpanError) Error() string {
	return fmt.Sprintf("retention: invalid span %q: %s", e.Input, e.Reason)
}

// Terminal reports true: retrying cannot cure the error (crt.Terminal).
func (*SpanError) Terminal() bool { return true }

// Unwrap returns ErrInvalidSpan.
func (e *SpanError) Unwrap() error { return ErrInvalidSpan }

// Span is a calendar span of years, months, days and hours, restic's
// --keep-within duration ("1y2m3d4h"). Unlike a time.Duration it follows the
// calendar: a span of one month back from March 31 ends on March 3 (or 2 in
// a leap year), as time.Time.AddDate normalises February 31, and a day is
// 23 or 25 hours across a change of daylight saving time in the Calendar's
// Location. The zero Span is off.
//
// Span is its own type, parsed by ParseSpan, so that restic's "m" (months)
// is never read as ParseDuration's "m" (minutes).
type Span struct {
	Years, Months, Days, Hours int
}

// maxSpanField bounds each field, so that a span can always be subtracted
// from a time without overflow: a million years, months, days or hours.
const maxSpanField = 1_000_000

// IsZero reports whether s is the zero (off) Span.
func (s Span) IsZero() bool { return s == Span{} }

// String returns the canonical spelling, units largest first and only those
// that are not zero ("1y2m", "7d", "36h"); "0h" for the zero Span. ParseSpan
// accepts it and returns s.
func (s Span) String() string {
	if s.IsZero() {
		return "0h"
	}
	var buf [64]byte
	b := buf[:0]
	for _, p := range [...]struct {
		n    int
		unit byte
	}{{s.Years, 'y'}, {s.Months, 'm'}, {s.Days, 'd'}, {s.Hours, 'h'}} {
		if p.n != 0 {
			b = strconv.AppendInt(b, int64(p.n), 10)
			b = append(b, p.unit)
		}
	}
	return string(b)
}

// back returns the instant s before t, in t's location: t.AddDate(-Years,
// -Months, -Days) and then Hours hours back, exactly as restic computes the
// start of a --keep-within span.
func (s Span) back(t time.Time) time.Time {
	return t.AddDate(-s.Years, -s.Months, -s.Days).Add(-time.Duration(s.Hours) * time.Hour)
}

func (s Span) check(path, field string) error {
	for _, f := range [...]struct {
		name string
		n    int
	}{{"Years", s.Years}, {"Months", s.Months}, {"Days", s.Days}, {"Hours", s.Hours}} {
		if f.n < 0 || f.n > maxSpanField {
			return fmt.Errorf("%w: %s%s.%s = %d: must be between 0 and %d", ErrInvalidPolicy, path, field, f.name, f.n, maxSpanField)
		}
	}
	return nil
}

// ParseSpan parses a calendar span as restic writes it: numbers followed by
// "y" (years), "m" (months), "d" (days) or "h" (hours), e.g. "1y2m3d4h",
// "18m", "7d", "36h". "0" and "0h" parse to the zero Span.
//
// It rejects, with a *SpanError that names the input, unwraps to
// ErrInvalidSpan and says which reading was meant: the empty string; a sign;
// a number without a unit; any other unit, "w" and "s" included (write 7d,
// or use ParseDuration for a fixed duration); upper case; spaces; a unit given
// twice; units out of the order y, m, d, h; and each number above 1,000,000.
// In particular "m" after "d" or "h", as in "1h30m", is rejected: restic would
// read 30 months, while the writer almost certainly meant 30 minutes, which a
// span cannot express.
//
// restic accepts some of these (it trims spaces, takes negative numbers, lets
// a later unit overwrite an earlier one); a CRD field should not.
func ParseSpan(s string) (Span, error) {
	if s == "" {
		return Span{}, &SpanError{Input: s, Reason: "empty"}
	}
	if s == "0" {
		return Span{}, nil
	}
	var sp Span
	rest := s
	prev := -1 // index of the last unit seen in "ymdh"
	for rest != "" {
		c := rest[0]
		if c == '-' || c == '+' {
			return Span{}, &SpanError{Input: s, Reason: "a span has no sign"}
		}
		i := 0
		n := 0
		for ; i < len(rest) && '0' <= rest[i] && rest[i] <= '9'; i++ {
			n = n*10 + int(rest[i]-'0')
			if n > maxSpanField {
				return Span{}, &SpanError{Input: s, Reason: fmt.Sprintf("number above %d", maxSpanField)}
			}
		}
		if i == 0 {
			return Span{}, &SpanError{Input: s, Reason: "expected a number at " + strconv.Quote(rest)}
		}
		num := rest[:i]
		rest = rest[i:]
		if rest == "" {
			return Span{}, &SpanError{Input: s, Reason: "missing unit after " + num + " (use y, m for months, d or h)"}
		}
		u := rest[0]
		unit, reason := spanUnit(rest, num, n, prev)
		if reason != "" {
			return Span{}, &SpanError{Input: s, Reason: reason}
		}
		if unit == prev {
			return Span{}, &SpanError{Input: s, Reason: fmt.Sprintf("unit %q given twice", u)}
		}
		if unit < prev {
			return Span{}, &SpanError{Input: s, Reason: fmt.Sprintf("unit %q after %q: write years, months, days and hours in that order", u, "ymdh"[prev])}
		}
		prev = unit
		switch unit {
		case 0:
			sp.Years = n
		case 1:
			sp.Months = n
		case 2:
			sp.Days = n
		case 3:
			sp.Hours = n
		}
		rest = rest[1:]
	}
	return sp, nil
}

// spanUnit reads the unit at the start of rest, after the number num (n):
// its index in "ymdh", or why it is refused. prev is the index of the unit
// before it (-1: none).
func spanUnit(rest, num string, n, prev int) (int, string) {
	u := rest[0]
	switch u {
	case 'y':
		return 0, ""
	case 'm':
		if len(rest) > 1 && rest[1] == 's' {
			return 0, "unit \"ms\": a span has no milliseconds; use ParseDuration for a fixed duration"
		}
		if prev >= 2 {
			return 0, fmt.Sprintf("%sm after %s: in a span m means months, which come before days and hours; minutes (as in ParseDuration) cannot be expressed in a span", num, "ymdh"[prev:prev+1])
		}
		return 1, ""
	case 'd':
		return 2, ""
	case 'h':
		return 3, ""
	case 'w':
		return 0, fmt.Sprintf("unit \"w\": restic has no weeks; write %dd", 7*n)
	case 's':
		return 0, "unit \"s\": a span has no seconds; use ParseDuration for a fixed duration"
	case 'Y', 'M', 'D', 'H':
		return 0, fmt.Sprintf("unit %q: units are lower case (M is not months or minutes; write m for months)", u)
	default:
		end := 1
		for end < len(rest) && (rest[end] < '0' || rest[end] > '9') {
			end++
		}
		return 0, "unknown unit " + strconv.Quote(rest[:end]) + " (use y, m for months, d or h)"
	}
}
