//go:build unix

package subreconcile_test

import (
	"syscall"
	"time"
)

// processCPUTime returns the CPU time (user and system) the test process
// has used, so the benchmark can report a figure that other load on the
// machine does not inflate.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
