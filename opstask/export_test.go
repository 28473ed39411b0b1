package opstask

import "time"

// OnConfirmed sets a function called each time one of c's leases records a
// successful write of a task (its key, and the write's start). It must be
// set before c runs.
func OnConfirmed(c *Controller, f func(key string, at time.Time)) { c.confirmed = f }
