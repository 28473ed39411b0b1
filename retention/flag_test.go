package retention_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/retention"
)

func TestDurationVar(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
		err  string // in the error, "" for none
	}{
		{nil, 3 * retention.Day, ""},
		{[]string{"-grace=72h"}, 72 * time.Hour, ""},
		{[]string{"-grace", "1w2d"}, 9 * retention.Day, ""},
		{[]string{"-grace=0s"}, 0, ""},
		{[]string{"-grace=30D"}, 0, `invalid value "30D" for flag -grace`},
		{[]string{"-grace=-1d"}, 0, `invalid value "-1d" for flag -grace`},
		{[]string{"-grace=30"}, 0, `invalid value "30" for flag -grace`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var grace time.Duration
		retention.DurationVar(fs, &grace, "grace", 3*retention.Day, "usage")
		err := fs.Parse(tc.args)
		if tc.err != "" {
			// The flag package wraps the error with %v: only its text says
			// what was refused.
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "retention: invalid duration") {
				t.Errorf("%q: err %v, want one containing %q and ParseDuration's reason", tc.args, err, tc.err)
			}
			if grace != 3*retention.Day {
				t.Errorf("%q: a refused value changed the flag to %s", tc.args, grace)
			}
			continue
		}
		if err != nil || grace != tc.want {
			t.Errorf("%q: %s, %v; want %s", tc.args, grace, err, tc.want)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var grace time.Duration
	retention.DurationVar(fs, &grace, "grace", 36*time.Hour, "usage")
	if f := fs.Lookup("grace"); f.DefValue != "1d12h" || f.Value.(interface{ Type() string }).Type() != "duration" {
		t.Errorf("default %q, want 1d12h (Format), type duration", f.DefValue)
	}
}

func TestDurationValueSetKeepsTheValueOnAnError(t *testing.T) {
	d := retention.DurationValue(time.Hour)
	if err := d.Set("1y"); !errors.Is(err, retention.ErrInvalidDuration) || time.Duration(d) != time.Hour {
		t.Errorf("Set(1y): %v, value %s; want ErrInvalidDuration, 1h kept", err, d.String())
	}
	if err := d.Set("2d"); err != nil || d.String() != "2d" {
		t.Errorf("Set(2d): %v, %s", err, d.String())
	}
}
