package opstask

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groundskeeper-io/groundskeeper/internal/promreg"
)

// MetricsConfig configures Metrics. Registerer is required; the zero value
// of every other field gives DEP-05's metric names without a prefix and the
// labels type, state, target and target_namespace.
type MetricsConfig struct {
	// Registerer is where the metrics are registered, e.g.
	// prometheus.DefaultRegisterer or controller-runtime's metrics.Registry.
	Registerer prometheus.Registerer
	// Prefix is prepended to the metric names, e.g. "etcddruid_" gives
	// etcddruid_operator_task_duration_seconds as in DEP-05.
	Prefix string
	// TargetLabel and NamespaceLabel name the labels of the target's name
	// and namespace; DEP-05 uses "etcd" and "etcd_namespace". Defaults:
	// "target" and "target_namespace".
	TargetLabel, NamespaceLabel string
	// Buckets of the duration histogram, in seconds, in increasing order.
	// Default: 1s to about 4.5h, exponential.
	Buckets []float64
	// ForgetAfter is how long a target's series stay after a Sync first
	// found the target without tasks, so that the last counts are scraped
	// before they go: several scrape intervals. Default 15 minutes; must
	// not be negative.
	ForgetAfter time.Duration
}

// DefaultForgetAfter is MetricsConfig.ForgetAfter's default.
const DefaultForgetAfter = 15 * time.Minute

// Metrics are the Prometheus metrics of a Controller:
// <prefix>operator_task_duration_seconds, a histogram of the time from
// startedAt to the final state, and <prefix>operator_tasks_total, a counter
// of tasks that reached a final state, both labelled by type (the kind),
// state, target and target namespace. A task rejected at admission counts
// with a duration of zero. A target's series are deleted by the first Sync
// at least MetricsConfig.ForgetAfter after a Sync first found no task of
// the target left in the store (its last task was deleted after its TTL),
// so the number of series follows the targets that have had tasks lately,
// not every target ever seen; a counter of a target that gets
// tasks again starts from zero, which Prometheus's rate and increase read
// as a new series. One Metrics serves one Controller, and deletes only the
// series it recorded.
//
// Several Controllers in one process may each call NewMetrics with the same
// registerer and names (one per task resource, on the manager's registry):
// the second and later share the first's collectors (the first's Buckets
// apply), record into the same series, and each deletes only the series
// it recorded itself.
//
// <prefix>operator_expired_tasks_without_kind, a gauge by type, counts the
// finished tasks past their TTL that the controller leaves alone, neither
// cleaned up nor deleted, because their kind is not registered in it (see
// Controller.Sync); it is set at every Sync.
type Metrics struct {
	duration    *prometheus.HistogramVec
	total       *prometheus.CounterVec
	withoutKind *prometheus.GaugeVec
	forgetAfter time.Duration

	mu sync.Mutex
	// recorded holds the label values (type, state, target, namespace) of
	// the series this Metrics wrote, the only ones it deletes.
	recorded map[[4]string]struct{}
	// kindsSet holds the kinds whose withoutKind gauge this Metrics set.
	kindsSet map[string]bool
}

// NewMetrics validates cfg, creates the metrics and registers them on
// cfg.Registerer, or shares the collectors already registered there under the
// same names and labels. It returns an error when the registerer refuses
// them (for instance, a metric of the same name with other labels).
func NewMetrics(cfg MetricsConfig) (*Metrics, error) {
	o := cfg
	if o.Registerer == nil {
		return nil, fmt.Errorf("%w: MetricsConfig.Registerer is nil", ErrInvalidConfig)
	}
	if o.TargetLabel == "" {
		o.TargetLabel = "target"
	}
	if o.NamespaceLabel == "" {
		o.NamespaceLabel = "target_namespace"
	}
	switch {
	case o.ForgetAfter < 0:
		return nil, fmt.Errorf("%w: MetricsConfig.ForgetAfter = %s: must not be negative", ErrInvalidConfig, o.ForgetAfter)
	case o.ForgetAfter == 0:
		o.ForgetAfter = DefaultForgetAfter
	}
	if o.Buckets == nil {
		o.Buckets = prometheus.ExponentialBuckets(1, 2, 15)
	}
	// The histogram would panic on its first observation.
	for i := 1; i < len(o.Buckets); i++ {
		if !(o.Buckets[i-1] < o.Buckets[i]) {
			return nil, fmt.Errorf("%w: MetricsConfig.Buckets = %v: must be in increasing order", ErrInvalidConfig, cfg.Buckets)
		}
	}
	// Labels that repeat one another make registration fail with an error
	// that does not say which field.
	for _, l := range []struct{ field, v string }{{"TargetLabel", o.TargetLabel}, {"NamespaceLabel", o.NamespaceLabel}} {
		if l.v == "type" || l.v == "state" || o.TargetLabel == o.NamespaceLabel {
			return nil, fmt.Errorf("%w: MetricsConfig.%s = %q: must differ from \"type\", \"state\" and the other target label", ErrInvalidConfig, l.field, l.v)
		}
	}
	labels := []string{"type", "state", o.TargetLabel, o.NamespaceLabel}
	m := &Metrics{
		forgetAfter: o.ForgetAfter,
		recorded:    map[[4]string]struct{}{},
		kindsSet:    map[string]bool{},
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    o.Prefix + "operator_task_duration_seconds",
			Help:    "Time from a task's start to its final state, by type, final state and target.",
			Buckets: o.Buckets,
		}, labels),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: o.Prefix + "operator_tasks_total",
			Help: "Tasks that reached a final state, by type, final state and target.",
		}, labels),
		withoutKind: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: o.Prefix + "operator_expired_tasks_without_kind",
			Help: "Finished tasks past their TTL that this controller leaves alone, neither cleaned up nor deleted, because their kind is not registered here.",
		}, []string{"type"}),
	}
	var registered []prometheus.Collector
	fail := func(name string, err error) (*Metrics, error) {
		for _, r := range registered {
			o.Registerer.Unregister(r)
		}
		return nil, fmt.Errorf("opstask: register %s: %w", o.Prefix+name, err)
	}
	var added bool
	var err error
	if m.duration, added, err = promreg.Register(o.Registerer, m.duration); err != nil {
		return fail("operator_task_duration_seconds", err)
	} else if added {
		registered = append(registered, m.duration)
	}
	if m.total, added, err = promreg.Register(o.Registerer, m.total); err != nil {
		return fail("operator_tasks_total", err)
	} else if added {
		registered = append(registered, m.total)
	}
	if m.withoutKind, _, err = promreg.Register(o.Registerer, m.withoutKind); err != nil {
		return fail("operator_expired_tasks_without_kind", err)
	}
	return m, nil
}

// setWithoutKind sets the count of expired tasks left alone, by kind.
func (m *Metrics) setWithoutKind(byKind map[string]int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.kindsSet {
		if _, ok := byKind[k]; !ok {
			m.withoutKind.DeleteLabelValues(k)
			delete(m.kindsSet, k)
		}
	}
	for k, n := range byKind {
		m.withoutKind.WithLabelValues(k).Set(float64(n))
		m.kindsSet[k] = true
	}
}

// forget deletes the series of a target.
func (m *Metrics) forget(namespace, target string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for lv := range m.recorded {
		if lv[2] == target && lv[3] == namespace {
			m.duration.DeleteLabelValues(lv[:]...)
			m.total.DeleteLabelValues(lv[:]...)
			delete(m.recorded, lv)
		}
	}
}

// finished records a task that reached a final state.
func (m *Metrics) finished(t *Task) {
	if m == nil {
		return
	}
	var d time.Duration
	if t.Status.StartedAt != nil && t.Status.LastTransitionTime != nil {
		d = t.Status.LastTransitionTime.Sub(t.Status.StartedAt.Time)
	}
	lv := [4]string{t.Kind(), string(t.State()), t.Spec.Target, t.Namespace}
	m.duration.WithLabelValues(lv[:]...).Observe(d.Seconds())
	m.total.WithLabelValues(lv[:]...).Inc()
	m.mu.Lock()
	m.recorded[lv] = struct{}{}
	m.mu.Unlock()
}

// metricTarget names a target's metric series: its namespace and name.
type metricTarget struct{ namespace, target string }

// recordFinished records a task that reached a final state in the metrics,
// and remembers its target so that its series can be deleted when the
// target has no task left.
func (c *Controller) recordFinished(t *Task) {
	if c.cfg.Metrics == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.metricSeq++
	c.metricTargets[metricTarget{t.Namespace, t.Spec.Target}] = c.metricSeq
	c.cfg.Metrics.finished(t)
}

// forgetMetricTargets deletes the metric series of the targets that have
// had no task in the tasks of any Sync for MetricsConfig.ForgetAfter:
// without tasks, a target's series would stay for the life of the process,
// one set per target ever seen, and deleting them at once would lose the
// last counts before they were scraped. tasks were read by a List that
// began after recording number seq: a target recorded after the List began
// may have a task the List missed, and is left for the next Sync.
func (c *Controller) forgetMetricTargets(live func(metricTarget) bool, seq uint64, now time.Time) {
	if c.cfg.Metrics == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for mt, at := range c.metricTargets {
		if live(mt) || at > seq {
			delete(c.metricsEmpty, mt)
			continue
		}
		since, ok := c.metricsEmpty[mt]
		if !ok {
			c.metricsEmpty[mt] = now
			continue
		}
		if now.Sub(since) >= c.cfg.Metrics.forgetAfter {
			delete(c.metricTargets, mt)
			delete(c.metricsEmpty, mt)
			c.cfg.Metrics.forget(mt.namespace, mt.target)
		}
	}
}
