//go:build !unix

package subreconcile_test

import "time"

func processCPUTime() (time.Duration, bool) { return 0, false }
