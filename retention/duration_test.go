package retention

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		want      time.Duration
		canonical string
	}{
		{"thirty days as aerospike writes it", "30d", 30 * Day, "30d"},
		{"two weeks", "2w", 14 * Day, "14d"},
		{"twelve hours", "12h", 12 * time.Hour, "12h"},
		{"ninety minutes", "90m", 90 * time.Minute, "1h30m"},
		{"a day and a half", "1d12h", 36 * time.Hour, "1d12h"},
		{"Go's spelling of thirty days", "720h0m0s", 30 * Day, "30d"},
		{"seconds", "45s", 45 * time.Second, "45s"},
		{"sub-second units", "1s500ms250us7ns", time.Second + 500*time.Millisecond + 250*time.Microsecond + 7, "1s500ms250us7ns"},
		{"micro sign", "3µs", 3 * time.Microsecond, "3us"},
		{"Greek mu", "3μs", 3 * time.Microsecond, "3us"},
		{"fraction of an hour as Go parses it", "1.5h", 90 * time.Minute, "1h30m"},
		{"fraction of a day", "0.5d", 12 * time.Hour, "12h"},
		{"fraction without a leading digit", ".5m", 30 * time.Second, "30s"},
		{"fraction without digits after the point", "2.h", 2 * time.Hour, "2h"},
		{"units in any order add up", "1m1h", time.Hour + time.Minute, "1h1m"},
		{"a unit repeated adds up", "1d1d", 2 * Day, "2d"},
		{"bare zero", "0", 0, "0s"},
		{"zero days", "0d", 0, "0s"},
		{"leading zeros", "007d", 7 * Day, "7d"},
		{"the largest duration", "9223372036854775807ns", math.MaxInt64, "106751d23h47m16s854ms775us807ns"},
		{"the largest duration in canonical form", "106751d23h47m16s854ms775us807ns", math.MaxInt64, "106751d23h47m16s854ms775us807ns"},
		{"the largest whole number of weeks", "15250w", 15250 * Week, "106750d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDuration(tc.in)
			if err != nil {
				t.Fatalf("ParseDuration(%q): %v", tc.in, err)
			}
			if got != tc.want {
				t.Fatalf("ParseDuration(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if f := Format(got); f != tc.canonical {
				t.Fatalf("Format(ParseDuration(%q)) = %q, want %q", tc.in, f, tc.canonical)
			}
			again, err := ParseDuration(tc.canonical)
			if err != nil || again != got {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", tc.canonical, again, err, got)
			}
		})
	}
}

func TestParseDurationRejects(t *testing.T) {
	for _, tc := range []struct {
		name, in, reason string
	}{
		{"empty", "", "empty"},
		{"negative", "-1d", "no sign"},
		{"negative Go duration", "-720h0m0s", "no sign"},
		{"explicit plus sign", "+1d", "no sign"},
		{"negative zero", "-0", "no sign"},
		{"sign after the first part", "1d-1h", `unknown unit "d-"`},
		{"unit-less number", "30", "missing unit"},
		{"unit-less number after a part", "1h30", "missing unit"},
		{"unit-less fraction", "1.5", "missing unit"},
		{"unknown unit", "3x", `unknown unit "x"`},
		{"months are not a unit", "1mo", `unknown unit "mo"`},
		{"years are not a unit", "1y", `unknown unit "y"`},
		{"upper-case unit", "30D", `unknown unit "D"`},
		{"space inside", "1d 12h", `unknown unit "d "`},
		{"leading space", " 1d", "expected a number"},
		{"trailing garbage", "1dabc", `unknown unit "dabc"`},
		{"a unit alone", "d", "expected a number"},
		{"a point alone", ".d", "expected digits"},
		{"two points", "1.2.3h", "missing unit"},
		{"overflowing days", "106752d", "overflow"},
		{"overflowing weeks", "15251w", "overflow"},
		{"one nanosecond too many", "9223372036854775808ns", "overflow"},
		{"overflowing digits", "99999999999999999999s", "overflow"},
		{"overflowing sum", "106751d24h", "overflow"},
		{"overflowing fraction", "15250.9999w", "overflow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDuration(tc.in)
			if err == nil {
				t.Fatalf("ParseDuration(%q) = %v, want an error", tc.in, d)
			}
			if !errors.Is(err, ErrInvalidDuration) {
				t.Fatalf("error %v does not wrap ErrInvalidDuration", err)
			}
			var de *DurationError
			if !errors.As(err, &de) || de.Input != tc.in {
				t.Fatalf("error %v: want a *DurationError with Input %q", err, tc.in)
			}
			if !strings.Contains(de.Reason, tc.reason) {
				t.Fatalf("reason %q does not mention %q", de.Reason, tc.reason)
			}
			if !strings.Contains(err.Error(), `"`+tc.in+`"`) && tc.in != "" {
				t.Fatalf("message %q does not name the input", err)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   time.Duration
		want string
	}{
		{"zero", 0, "0s"},
		{"one nanosecond", 1, "1ns"},
		{"weeks are written as days", 2 * Week, "14d"},
		{"every unit", Day + time.Hour + time.Minute + time.Second + time.Millisecond + time.Microsecond + time.Nanosecond, "1d1h1m1s1ms1us1ns"},
		{"zero parts are left out", Day + time.Second, "1d1s"},
		{"negative", -90 * time.Minute, "-1h30m"},
		{"the smallest duration", math.MinInt64, "-106751d23h47m16s854ms775us808ns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Format(tc.in); got != tc.want {
				t.Fatalf("Format(%d) = %q, want %q", int64(tc.in), got, tc.want)
			}
		})
	}
}

func TestSecondsAndDays(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       func(int64) (time.Duration, error)
		n       int64
		want    time.Duration
		wantErr string
	}{
		{"ttlSecondsAfterFinished of an hour", Seconds, 3600, time.Hour, ""},
		{"zero seconds", Seconds, 0, 0, ""},
		{"largest int32 seconds", Seconds, math.MaxInt32, math.MaxInt32 * time.Second, ""},
		{"negative seconds", Seconds, -1, 0, `"-1 seconds": negative`},
		{"seconds beyond 292 years", Seconds, math.MaxInt64/int64(time.Second) + 1, 0, "overflow"},
		{"maxBackupAge of a week", Days, 7, Week, ""},
		{"largest number of days", Days, 106751, 106751 * Day, ""},
		{"one day too many", Days, 106752, 0, `"106752 days": overflows`},
		{"largest uint32 days", Days, math.MaxUint32, 0, "overflow"},
		{"negative days", Days, -3, 0, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.f(tc.n)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %v, %v; want %v", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrInvalidDuration) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, %v; want an ErrInvalidDuration mentioning %q", got, err, tc.wantErr)
			}
		})
	}
}

// FuzzParseDuration checks, for any input, that ParseDuration either returns
// a non-negative duration whose canonical form parses back to it, or an error
// that wraps ErrInvalidDuration and names the input; and that it agrees with
// time.ParseDuration on every unsigned input that time.ParseDuration accepts.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"30d", "2w", "12h", "90m", "1d12h", "720h0m0s", "0", "0d", "1.5h", ".5m",
		"-1d", "+1h", "30", "3x", "", "1d 12h", "9223372036854775807ns",
		"9223372036854775808ns", "106751d23h47m16s854ms775us807ns", "3µs", "1.0000000000000000001h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidDuration) {
				t.Fatalf("ParseDuration(%q): %v does not wrap ErrInvalidDuration", s, err)
			}
			var de *DurationError
			if !errors.As(err, &de) || de.Input != s {
				t.Fatalf("ParseDuration(%q): %v does not name the input", s, err)
			}
		} else {
			if d < 0 {
				t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
			}
			c := Format(d)
			back, err := ParseDuration(c)
			if err != nil || back != d {
				t.Fatalf("ParseDuration(Format(ParseDuration(%q))) = ParseDuration(%q) = %v, %v; want %v", s, c, back, err, d)
			}
			if Format(back) != c {
				t.Fatalf("Format is not stable: %q then %q", c, Format(back))
			}
		}
		if s == "" || s[0] == '-' || s[0] == '+' {
			return
		}
		if gd, gerr := time.ParseDuration(s); gerr == nil {
			if err != nil || d != gd {
				t.Fatalf("ParseDuration(%q) = %v, %v; time.ParseDuration = %v", s, d, err, gd)
			}
		}
	})
}
