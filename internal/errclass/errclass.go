// Package errclass gives the module's sentinel errors their retry class
// where they are declared: Terminal for an error that retrying cannot cure
// (bad input or configuration, a conflict a person must resolve, corrupt
// state, a bug), Retryable for one a later attempt may get past. Each
// error says so by its method Terminal() bool, which crt.Terminal reads
// on the error and on every error it wraps; the module's error types
// declare the same method.
package errclass

// sentinel is a sentinel error with its class.
type sentinel struct {
	msg      string
	terminal bool
}

func (e *sentinel) Error() string { return e.msg }

// Terminal reports whether retrying cannot cure the error.
func (e *sentinel) Terminal() bool { return e.terminal }

// Terminal returns a sentinel error with the text msg that retrying cannot
// cure.
func Terminal(msg string) error { return &sentinel{msg: msg, terminal: true} }

// Retryable returns a sentinel error with the text msg that a later
// attempt may get past.
func Retryable(msg string) error { return &sentinel{msg: msg} }
