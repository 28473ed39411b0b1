package retention

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrInvalidDuration is the sentinel for every duration this package rejects.
// Test for it with errors.Is; use errors.As with a *DurationError to get the
// rejected input.
var ErrInvalidDuration = errclass.Terminal("retention: invalid duration")

// DurationError reports a duration that ParseDuration, Seconds or Days
// rejected. It unwraps to ErrInvalidDuration.
type DurationError struct {
	// Input is the rejected value as the caller gave it: the string passed to
	// ParseDuration, or the number and its unit for Seconds and Days.
	Input string
	// Reason says what is wrong with Input, e.g. "missing unit".
	Reason string
}

func (e *DurationError) Error() string {
	return fmt.Sprintf("retention: invalid duration %q: %s", e.Input, e.Reason)
}

// Terminal reports true: retrying cannot cure the error (crt.Terminal).
func (*DurationError) Terminal() bool { return true }

// Unwrap returns ErrInvalidDuration.
func (e *DurationError) Unwrap() error { return ErrInvalidDuration }

const (
	// Day is 24 hours. Durations in this package know no calendar: a day
	// never has 23 or 25 hours and no leap second is counted.
	Day = 24 * time.Hour
	// Week is 7 days.
	Week = 7 * Day
)

// units maps the unit names ParseDuration accepts to their length: Go's
// time.ParseDuration units plus "d" and "w".
var units = map[string]uint64{
	"ns": uint64(time.Nanosecond),
	"us": uint64(time.Microsecond),
	"µs": uint64(time.Microsecond), // U+00B5 micro sign
	"μs": uint64(time.Microsecond), // U+03BC Greek small letter mu
	"ms": uint64(time.Millisecond),
	"s":  uint64(time.Second),
	"m":  uint64(time.Minute),
	"h":  uint64(time.Hour),
	"d":  uint64(Day),
	"w":  uint64(Week),
}

const maxDuration = uint64(math.MaxInt64)

// ParseDuration parses a time-to-live as people write it in custom resources:
// "30d", "2w", "12h", "90m", "1d12h", and anything time.ParseDuration accepts
// without a sign, such as "720h0m0s" or "1.5h". A duration is a sequence of
// decimal numbers, each with an optional fraction and a unit: "w" (7 days),
// "d" (24 hours), "h", "m", "s", "ms", "us" (or "µs"), "ns". The sole
// unit-less value accepted is "0".
//
// ParseDuration rejects, with a *DurationError that names the input and
// unwraps to ErrInvalidDuration: the empty string, a sign ("-1d" and also
// "+1d": a time-to-live is never negative), a number without a unit ("30",
// which could mean seconds or days), an unknown unit, upper case ("30D"),
// spaces, and any value above the largest time.Duration (about 292 years).
//
// Zero parses to 0. What 0 means is the caller's choice, because the APIs
// this package serves disagree: Kubernetes' ttlSecondsAfterFinished: 0 makes
// a finished object eligible for deletion at once, while aerospike-operator
// treats ".spec.ttl: 0d" as keep forever. TTL.After == 0 expires at once;
// set TTL.ZeroMeansForever for the other reading.
//
// Format(d) is the canonical spelling of every parsed d, and ParseDuration
// accepts everything Format returns.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, &DurationError{Input: s, Reason: "empty"}
	}
	if s == "0" {
		return 0, nil
	}
	var total uint64
	rest := s
	for rest != "" {
		c := rest[0]
		if c == '-' || c == '+' {
			return 0, &DurationError{Input: s, Reason: "a time-to-live has no sign"}
		}
		if c != '.' && (c < '0' || c > '9') {
			return 0, &DurationError{Input: s, Reason: "expected a number at " + strconv.Quote(rest)}
		}
		whole, hasWhole, r, ok := leadingInt(rest)
		if !ok {
			return 0, &DurationError{Input: s, Reason: "overflows a time.Duration"}
		}
		rest = r
		var (
			frac    uint64
			scale   = 1.0
			hasFrac bool
		)
		if rest != "" && rest[0] == '.' {
			frac, scale, hasFrac, rest = leadingFraction(rest[1:])
		}
		if !hasWhole && !hasFrac {
			return 0, &DurationError{Input: s, Reason: "expected digits around '.'"}
		}
		// Unit: everything up to the next number.
		i := 0
		for ; i < len(rest) && rest[i] != '.' && (rest[i] < '0' || rest[i] > '9'); i++ {
		}
		if i == 0 {
			return 0, &DurationError{Input: s, Reason: "missing unit (use s, m, h, d or w)"}
		}
		unit, ok := units[rest[:i]]
		if !ok {
			return 0, &DurationError{Input: s, Reason: "unknown unit " + strconv.Quote(rest[:i])}
		}
		rest = rest[i:]
		if whole > (maxDuration+1)/unit {
			return 0, &DurationError{Input: s, Reason: "overflows a time.Duration"}
		}
		v := whole * unit
		if frac > 0 {
			// Float arithmetic, exactly as time.ParseDuration does it, so
			// that "1.5h" means the same here and there.
			v += uint64(float64(frac) * (float64(unit) / scale))
			if v > maxDuration+1 {
				return 0, &DurationError{Input: s, Reason: "overflows a time.Duration"}
			}
		}
		total += v
		if total > maxDuration+1 {
			return 0, &DurationError{Input: s, Reason: "overflows a time.Duration"}
		}
	}
	if total > maxDuration {
		return 0, &DurationError{Input: s, Reason: "overflows a time.Duration"}
	}
	return time.Duration(total), nil
}

// leadingInt consumes the leading digits of s: their value, whether there
// were any, and the rest of s; ok is false when the value overflows a
// time.Duration.
func leadingInt(s string) (x uint64, digits bool, rest string, ok bool) {
	i := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if x > maxDuration/10 {
			return 0, false, "", false
		}
		x = x*10 + uint64(s[i]-'0')
		if x > maxDuration+1 {
			return 0, false, "", false
		}
	}
	return x, i > 0, s[i:], true
}

// leadingFraction consumes the leading digits of s, a fraction's after its
// '.': their value, the power of ten it is scaled by, whether there were
// any, and the rest of s. Digits beyond what fits are dropped, as
// time.ParseDuration does.
func leadingFraction(s string) (frac uint64, scale float64, digits bool, rest string) {
	scale = 1
	dropping := false
	i := 0
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		if dropping {
			continue
		}
		if frac > maxDuration/10 {
			dropping = true
			continue
		}
		next := frac*10 + uint64(s[i]-'0')
		if next > maxDuration+1 {
			dropping = true
			continue
		}
		frac = next
		scale *= 10
	}
	return frac, scale, i > 0, s[i:]
}

// Format returns the canonical spelling of d: days, hours, minutes, seconds,
// milliseconds, microseconds and nanoseconds, largest first, each present only
// when not zero ("30d", "1d12h", "1h30m", "1s500ms"); "0s" for zero. Weeks
// are never used, so that "30d" stays "30d". A negative d is formatted with a
// leading "-", which ParseDuration rejects.
func Format(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var buf [48]byte
	b := buf[:0]
	u := uint64(d)
	if d < 0 {
		b = append(b, '-')
		u = -u // two's complement: correct for math.MinInt64 too
	}
	for _, p := range formatParts {
		if n := u / p.size; n > 0 {
			b = strconv.AppendUint(b, n, 10)
			b = append(b, p.name...)
			u -= n * p.size
		}
	}
	return string(b)
}

var formatParts = [...]struct {
	size uint64
	name string
}{
	{uint64(Day), "d"},
	{uint64(time.Hour), "h"},
	{uint64(time.Minute), "m"},
	{uint64(time.Second), "s"},
	{uint64(time.Millisecond), "ms"},
	{uint64(time.Microsecond), "us"},
	{1, "ns"},
}

// Seconds converts a count of seconds from an API field such as
// ttlSecondsAfterFinished into a duration. A negative count, or one above the
// largest time.Duration, is rejected with a *DurationError.
func Seconds(n int64) (time.Duration, error) {
	return countOf(n, time.Second, "seconds")
}

// Days converts a count of days from an API field such as maxBackupAge into a
// duration of n*24 hours. A negative count, or one above the largest
// time.Duration (106751 days), is rejected with a *DurationError.
func Days(n int64) (time.Duration, error) {
	return countOf(n, Day, "days")
}

func countOf(n int64, unit time.Duration, name string) (time.Duration, error) {
	if n < 0 {
		return 0, &DurationError{Input: strconv.FormatInt(n, 10) + " " + name, Reason: "negative"}
	}
	if n > math.MaxInt64/int64(unit) {
		return 0, &DurationError{Input: strconv.FormatInt(n, 10) + " " + name, Reason: "overflows a time.Duration"}
	}
	return time.Duration(n) * unit, nil
}
