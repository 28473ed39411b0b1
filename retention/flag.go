package retention

import (
	"flag"
	"time"
)

// DurationValue is a flag.Value (and a pflag.Value: its Type is
// "duration") holding a duration in ParseDuration's notation ("3d", "72h",
// "1w", "0s"); String prints it with Format. Convert a *time.Duration to
// use it: fs.Var((*retention.DurationValue)(&grace), name, usage).
type DurationValue time.Duration

// Set parses s with ParseDuration; on an error the value is unchanged.
func (d *DurationValue) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = DurationValue(v)
	return nil
}

// String is Format of the value.
func (d *DurationValue) String() string {
	if d == nil {
		return Format(0)
	}
	return Format(time.Duration(*d))
}

// Type is pflag's name of the value's type.
func (d *DurationValue) Type() string { return "duration" }

// DurationVar defines a flag in fs, as flag.DurationVar does, whose value is
// in ParseDuration's notation, with days and weeks ("3d"), and stored in
// *p, value until the flag is set. fs.Parse refuses a value ParseDuration
// refuses, naming the flag and the value.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*DurationValue)(p), name, usage)
}
