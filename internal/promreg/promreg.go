// Package promreg registers Prometheus collectors so that a second
// registration of the same metric on one registry shares the first's
// collector instead of failing: several controllers in one process, each
// creating its metrics on the manager's registry, then record into the same
// series.
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it, or, when reg already holds a
// collector with the same descriptors (prometheus.AlreadyRegisteredError),
// returns that collector and added false. A collector of the same name but
// other labels or help, or of another type, is an error.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (_ C, added bool, _ error) {
	err := reg.Register(c)
	if err == nil {
		return c, true, nil
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		return c, false, err
	}
	existing, ok := are.ExistingCollector.(C)
	if !ok {
		return c, false, fmt.Errorf("%w (a %T, not a %T)", err, are.ExistingCollector, c)
	}
	return existing, false, nil
}
