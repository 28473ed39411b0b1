// Package soak sizes the library's longest tests. make test runs them at
// a size that still proves what each asserts (several listing pages,
// several delete batches, a writer racing a copy); make soak runs them at
// the size that shows it holds at scale, as make chaos and make bench do
// for the chaos runs and the curves.
package soak

import (
	"fmt"
	"os"
	"strconv"
)

// Env names the environment variable that selects the full sizes: set to
// a true value ("1", "true"), as make soak sets it.
const Env = "GROUNDSKEEPER_SOAK"

// Size returns full when Env is set to a true value and quick otherwise.
// A value of Env that is not a boolean panics with a message naming it:
// a typo must not run the quick sizes while the runner believes it soaks.
func Size(quick, full int) int {
	if On() {
		return full
	}
	return quick
}

// On reports whether Env selects the full sizes.
func On() bool {
	v := os.Getenv(Env)
	if v == "" {
		return false
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		panic(fmt.Sprintf("soak: %s=%q is not a boolean", Env, v))
	}
	return on
}
