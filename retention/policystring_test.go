package retention

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParsePolicy(t *testing.T) {
	berlin := loadZone(t, "Europe/Berlin")
	for _, tc := range []struct {
		in    string
		want  Calendar
		canon string // "" when in is canonical
	}{
		{"last=3,daily=7,weekly=4,monthly=12,within=30d", Calendar{Last: 3, Daily: 7, Weekly: 4, Monthly: 12, WithinSpan: Span{Days: 30}}, ""},
		{"", Calendar{}, ""},
		{"hourly=unlimited,yearly=75", Calendar{Hourly: Unlimited, Yearly: 75}, ""},
		{"within=1y2m3d4h,within-duration=1h30m", Calendar{WithinSpan: Span{1, 2, 3, 4}, Within: 90 * time.Minute}, ""},
		{"within-daily=7d,within-weekly=1m,within-monthly=1y,within-yearly=75y", Calendar{WithinDaily: Span{Days: 7}, WithinWeekly: Span{Months: 1}, WithinMonthly: Span{Years: 1}, WithinYearly: Span{Years: 75}}, ""},
		{"tag=manual+pre-upgrade,tag=", Calendar{Tags: [][]string{{"manual", "pre-upgrade"}, {""}}}, ""},
		{"failed=2,last=5", Calendar{Last: 5, Failed: 2}, "last=5,failed=2"},
		{"daily=7,tz=item", Calendar{Daily: 7, ItemZone: true}, ""},
		{"daily=7,tz=UTC", Calendar{Daily: 7}, "daily=7"},
		{"daily=0,weekly=1", Calendar{Weekly: 1}, "weekly=1"},
		{"daily=7,tz=Europe/Berlin", Calendar{Daily: 7, Location: berlin}, ""},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePolicy(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want.String() || got.Location.String() != tc.want.Location.String() {
				t.Fatalf("ParsePolicy = %#v, want %#v", got, tc.want)
			}
			canon := tc.canon
			if canon == "" {
				canon = tc.in
			}
			if got.String() != canon {
				t.Fatalf("String() = %q, want %q", got.String(), canon)
			}
			var res Result
			if err := Evaluate(got, now, nil, &res); err != nil {
				t.Fatalf("a parsed policy is invalid: %v", err)
			}
		})
	}
}

func TestParsePolicyNamesTheBadToken(t *testing.T) {
	for _, tc := range []struct{ in, token, reason string }{
		{"last=3,dayly=7", "dayly=7", `unknown key "dayly"`},
		{"daily=7,daily=8", "daily=8", "daily given twice"},
		{"daily=-1", "daily=-1", "not a number"},
		{"weekly=", "weekly=", "missing count"},
		{"within=1h30m", "within=1h30m", "m means months"},
		{"within=30", "within=30", "missing unit"},
		{"within-duration=1y", "within-duration=1y", `unknown unit "y"`},
		{"last=3,,daily=7", "", "empty token"},
		{"last=3, daily=7", " daily=7", "spaces"},
		{"last", "last", "expected key=value"},
		{"tz=Mars/Olympus", "tz=Mars/Olympus", "unknown time zone"},
		{"tz=../etc/passwd", "tz=../etc/passwd", "not an IANA zone name"},
		{"tz=Local", "tz=Local", "use UTC, item or an IANA name"},
		{"monthly=99999999999", "monthly=99999999999", "above"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := ParsePolicy(tc.in)
			var pe *PolicyError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("err = %v, want a *PolicyError", err)
			}
			if pe.Token != tc.token || !strings.Contains(pe.Reason, tc.reason) || pe.Input != tc.in {
				t.Fatalf("token %q reason %q, want token %q and a reason with %q", pe.Token, pe.Reason, tc.token, tc.reason)
			}
			if !strings.Contains(err.Error(), tc.in) {
				t.Fatalf("message %q does not quote the input", err)
			}
		})
	}
}

func TestCalendarStringRoundTrips(t *testing.T) {
	for _, c := range []Calendar{
		{Last: 1, Hourly: 2, Daily: 3, Weekly: 4, Monthly: 5, Yearly: Unlimited, Within: 36 * time.Hour,
			WithinSpan: Span{Years: 1}, WithinHourly: Span{Hours: 48}, WithinDaily: Span{Days: 7}, WithinWeekly: Span{Months: 1},
			WithinMonthly: Span{Years: 1, Months: 6}, WithinYearly: Span{Years: 75}, Tags: [][]string{{"a", "b"}, {""}, {"a", ""}},
			Failed: 3, ItemZone: true},
		{},
		{Failed: Unlimited},
	} {
		back, err := ParsePolicy(c.String())
		if err != nil || back.String() != c.String() {
			t.Fatalf("%q parses to %q, %v", c.String(), back.String(), err)
		}
	}
}

// FuzzParsePolicy checks that ParsePolicy never panics, that everything it
// accepts is a valid policy whose String parses back to the same policy, and
// that every rejection names its token.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{
		"last=3,daily=7,weekly=4,monthly=12,within=30d", "", "hourly=unlimited", "tag=a+b,tag=",
		"within-duration=1h30m", "within=1h30m", "tz=item", "tz=UTC", "failed=2,yearly=75", ",", "daily=7,daily=7",
		"within-weekly=1m,within-yearly=75y", "tz=Europe/Berlin",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParsePolicy(s)
		if err != nil {
			var pe *PolicyError
			if !errors.As(err, &pe) || pe.Input != s || !strings.Contains(","+s+",", ","+pe.Token+",") {
				t.Fatalf("ParsePolicy(%q): %v does not name a token of the input", s, err)
			}
			return
		}
		if err := c.check(""); err != nil {
			t.Fatalf("ParsePolicy(%q) accepted an invalid policy: %v", s, err)
		}
		canon := c.String()
		back, err := ParsePolicy(canon)
		if err != nil {
			t.Fatalf("ParsePolicy(%q).String() = %q, which does not parse: %v", s, canon, err)
		}
		if back.String() != canon {
			t.Fatalf("%q -> %q -> %q", s, canon, back.String())
		}
	})
}

// FuzzParseSpan checks that ParseSpan never panics, that what it accepts is
// a valid Span whose String parses back to it, and that it rejects with a
// *SpanError naming the input.
func FuzzParseSpan(f *testing.F) {
	for _, s := range []string{"1y2m3d4h", "18m", "7d", "36h", "0", "0h", "1h30m", "2w", "-1d", "1000000y", "", "1M"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSpan(s)
		if err != nil {
			var se *SpanError
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalidSpan) || se.Input != s {
				t.Fatalf("ParseSpan(%q): %v", s, err)
			}
			return
		}
		if err := sp.check("", "Span"); err != nil {
			t.Fatalf("ParseSpan(%q) = %+v, invalid: %v", s, sp, err)
		}
		back, err := ParseSpan(sp.String())
		if err != nil || back != sp {
			t.Fatalf("ParseSpan(%q) = %+v, String %q parses to %+v, %v", s, sp, sp.String(), back, err)
		}
		// A span can be taken back from any time without panicking.
		_ = sp.back(fuzzBase)
	})
}
