package subreconcile

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groundskeeper-io/groundskeeper/internal/promreg"
)

// Requeue reasons, the values of the "reason" label of the requeue counter.
const (
	RequeueImmediate = "immediate" // immediate requeue without error
	RequeueDelayed   = "delayed"   // delayed requeue without error
	RequeueConflict  = "conflict"  // optimistic-concurrency conflict turned into a requeue
	RequeueError     = "error"     // requeue carrying an error, immediate or delayed
	RequeueTerminal  = "terminal"  // terminal error
	RequeuePanic     = "panic"     // the step panicked
)

// DefaultDurationBuckets spans a no-op step (well under a millisecond) to a
// step that waits on a slow database command (a minute).
var DefaultDurationBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// MetricsConfig configures NewMetrics.
type MetricsConfig struct {
	// Registerer receives the collectors. Required: the package never
	// registers on the global registry.
	Registerer prometheus.Registerer

	// Namespace prefixes the metric names (Namespace_subreconcile_...).
	// Optional.
	Namespace string

	// Buckets of the step duration histogram, in seconds, in increasing
	// order. Defaults to DefaultDurationBuckets.
	Buckets []float64
}

// Metrics holds the runner's Prometheus collectors:
//
//   - subreconcile_step_duration_seconds{chain, step}: a histogram of the
//     time each step took, observed for every step that ran;
//   - subreconcile_requeues_total{chain, step, reason}: a counter of the
//     requeues steps asked for, by reason (RequeueImmediate, ...).
//
// One Metrics can serve several runners; Config.Name tells them apart.
type Metrics struct {
	duration *prometheus.HistogramVec
	requeues *prometheus.CounterVec
}

// NewMetrics creates the collectors and registers them on cfg.Registerer. A
// second NewMetrics with the same registerer and Namespace (another
// controller in the same process) shares the first's collectors, and its
// Buckets are ignored, rather than failing as already registered.
func NewMetrics(cfg MetricsConfig) (*Metrics, error) {
	if cfg.Registerer == nil {
		return nil, fmt.Errorf("%w: MetricsConfig.Registerer is nil", ErrInvalidConfig)
	}
	buckets := cfg.Buckets
	if buckets == nil {
		buckets = DefaultDurationBuckets
	}
	// The histogram would panic on its first observation, inside a loop.
	for i := 1; i < len(buckets); i++ {
		if !(buckets[i-1] < buckets[i]) {
			return nil, fmt.Errorf("%w: MetricsConfig.Buckets = %v: must be in increasing order", ErrInvalidConfig, cfg.Buckets)
		}
	}
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: cfg.Namespace,
			Subsystem: "subreconcile",
			Name:      "step_duration_seconds",
			Help:      "Time taken by one step of a reconcile loop.",
			Buckets:   buckets,
		}, []string{"chain", "step"}),
		requeues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: cfg.Namespace,
			Subsystem: "subreconcile",
			Name:      "requeues_total",
			Help:      "Requeues asked for by steps of a reconcile loop, by reason.",
		}, []string{"chain", "step", "reason"}),
	}
	var added bool
	var err error
	if m.duration, added, err = promreg.Register(cfg.Registerer, m.duration); err != nil {
		return nil, fmt.Errorf("subreconcile: registering step duration histogram: %w", err)
	}
	if m.requeues, _, err = promreg.Register(cfg.Registerer, m.requeues); err != nil {
		if added {
			cfg.Registerer.Unregister(m.duration)
		}
		return nil, fmt.Errorf("subreconcile: registering requeue counter: %w", err)
	}
	return m, nil
}
