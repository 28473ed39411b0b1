package retention

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PolicyError reports a policy string that ParsePolicy rejected, naming the
// token at fault. It unwraps to ErrInvalidPolicy.
type PolicyError struct {
	// Input is the string passed to ParsePolicy.
	Input string
	// Token is the comma-separated token at fault, as written.
	Token string
	// Reason says what is wrong with Token.
	Reason string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("retention: invalid policy %q: %q: %s", e.Input, e.Token, e.Reason)
}

// Terminal reports true: retrying cannot cure the error (crt.Terminal).
func (*PolicyError) Terminal() bool { return true }

// Unwrap returns ErrInvalidPolicy.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// policyKeys lists the keys of the policy string in canonical order.
var policyKeys = [...]string{
	"last", "hourly", "daily", "weekly", "monthly", "yearly",
	"within", "within-duration",
	"within-hourly", "within-daily", "within-weekly", "within-monthly", "within-yearly",
	"tag", "failed", "tz",
}

// ParsePolicy parses a Calendar from the string form an operator can put in
// a custom resource field and a person can read:
//
//	last=3,daily=7,weekly=4,monthly=12,within=30d
//
// It is a comma-separated list of key=value tokens, without spaces, each key
// at most once except tag:
//
//	last, hourly, daily,   a count (0 is off) or "unlimited": restic's
//	weekly, monthly,       --keep-last, --keep-hourly, ...
//	yearly
//	within                 a calendar Span ("1y6m", "30d", "36h"): --keep-within
//	within-duration        a fixed duration (ParseDuration: "90m" is minutes)
//	within-hourly, ...,    a Span: --keep-within-hourly, ...
//	within-yearly
//	tag                    tags joined by "+", all required ("tag=manual+db");
//	                       "tag=" matches items without tags; repeat the key
//	                       for more lists, any of which keeps an item
//	failed                 a count or "unlimited": newest failed items kept
//	tz                     "UTC" (the default), "item" (each item's recorded
//	                       offset, as restic) or an IANA zone name
//
// The empty string is the empty Calendar, which keeps everything (restic's
// empty policy). A named zone is loaded with time.LoadLocation, which reads
// the system's zone database (or time/tzdata when the program embeds it):
// the one read this package ever makes, and only for tz=<name>.
//
// Errors are *PolicyError values that name the token at fault and unwrap to
// ErrInvalidPolicy. Calendar.String returns the canonical form, which
// ParsePolicy turns back into an equal Calendar.
func ParsePolicy(s string) (Calendar, error) {
	var c Calendar
	if s == "" {
		return c, nil
	}
	seen := make(map[string]bool, len(policyKeys))
	for tok := range strings.SplitSeq(s, ",") {
		bad := func(format string, args ...any) (Calendar, error) {
			return Calendar{}, &PolicyError{Input: s, Token: tok, Reason: fmt.Sprintf(format, args...)}
		}
		key, val, ok := strings.Cut(tok, "=")
		switch {
		case tok == "":
			return bad("empty token (a doubled, leading or trailing comma)")
		case strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return bad("spaces and control characters are not allowed")
		case !ok:
			return bad("expected key=value, with key one of %s", strings.Join(policyKeys[:], ", "))
		}
		if seen[key] && key != "tag" {
			return bad("%s given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "last":
			c.Last, err = parseCount(val)
		case "hourly":
			c.Hourly, err = parseCount(val)
		case "daily":
			c.Daily, err = parseCount(val)
		case "weekly":
			c.Weekly, err = parseCount(val)
		case "monthly":
			c.Monthly, err = parseCount(val)
		case "yearly":
			c.Yearly, err = parseCount(val)
		case "failed":
			c.Failed, err = parseCount(val)
		case "within":
			c.WithinSpan, err = parseSpanValue(val)
		case "within-hourly":
			c.WithinHourly, err = parseSpanValue(val)
		case "within-daily":
			c.WithinDaily, err = parseSpanValue(val)
		case "within-weekly":
			c.WithinWeekly, err = parseSpanValue(val)
		case "within-monthly":
			c.WithinMonthly, err = parseSpanValue(val)
		case "within-yearly":
			c.WithinYearly, err = parseSpanValue(val)
		case "within-duration":
			var de *DurationError
			c.Within, err = ParseDuration(val)
			if errors.As(err, &de) {
				err = fmt.Errorf("%s", de.Reason)
			}
		case "tag":
			l := strings.Split(val, "+")
			for _, t := range l {
				if strings.ContainsFunc(t, badTagRune) {
					return bad("tag %q has a character a tag cannot have", t)
				}
			}
			c.Tags = append(c.Tags, l)
		case "tz":
			c.Location, c.ItemZone, err = parseZone(val)
		default:
			return bad("unknown key %q (keys: %s)", key, strings.Join(policyKeys[:], ", "))
		}
		if err != nil {
			return bad("%v", err)
		}
	}
	return c, nil
}

// maxPolicyCount bounds counts in policy strings.
const maxPolicyCount = 1_000_000_000

func parseCount(v string) (int, error) {
	if v == "unlimited" {
		return Unlimited, nil
	}
	if v == "" {
		return 0, fmt.Errorf("missing count (a number or \"unlimited\")")
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, fmt.Errorf("count %q is not a number or \"unlimited\"", v)
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n > maxPolicyCount {
		return 0, fmt.Errorf("count %q is above %d", v, maxPolicyCount)
	}
	return n, nil
}

func parseSpanValue(v string) (Span, error) {
	sp, err := ParseSpan(v)
	if se, ok := err.(*SpanError); ok {
		return Span{}, fmt.Errorf("span %q: %s", v, se.Reason)
	}
	return sp, err
}

func parseZone(v string) (*time.Location, bool, error) {
	switch v {
	case "UTC":
		return nil, false, nil
	case "item":
		return nil, true, nil
	case "", "Local":
		return nil, false, fmt.Errorf("zone %q: use UTC, item or an IANA name such as Europe/Berlin", v)
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '/' || r == '_' || r == '-' || r == '+') {
			return nil, false, fmt.Errorf("zone %q is not an IANA zone name", v)
		}
	}
	loc, err := time.LoadLocation(v)
	if err != nil {
		return nil, false, fmt.Errorf("zone %q: %v", v, err)
	}
	return loc, false, nil
}

// String returns the policy string of p in canonical form (see ParsePolicy):
// keys in a fixed order, options that are off left out, "" for the empty
// Calendar.
func (p Calendar) String() string {
	var b strings.Builder
	add := func(key, val string) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(key)
		b.WriteByte('=')
		b.WriteString(val)
	}
	count := func(key string, n int) {
		switch {
		case n == Unlimited:
			add(key, "unlimited")
		case n != 0:
			add(key, strconv.Itoa(n))
		}
	}
	span := func(key string, sp Span) {
		if !sp.IsZero() {
			add(key, sp.String())
		}
	}
	count("last", p.Last)
	count("hourly", p.Hourly)
	count("daily", p.Daily)
	count("weekly", p.Weekly)
	count("monthly", p.Monthly)
	count("yearly", p.Yearly)
	span("within", p.WithinSpan)
	if p.Within != 0 {
		add("within-duration", Format(p.Within))
	}
	span("within-hourly", p.WithinHourly)
	span("within-daily", p.WithinDaily)
	span("within-weekly", p.WithinWeekly)
	span("within-monthly", p.WithinMonthly)
	span("within-yearly", p.WithinYearly)
	for _, l := range p.Tags {
		add("tag", strings.Join(l, "+"))
	}
	count("failed", p.Failed)
	switch {
	case p.ItemZone:
		add("tz", "item")
	case p.Location != nil && p.Location != time.UTC:
		add("tz", p.Location.String())
	}
	return b.String()
}
