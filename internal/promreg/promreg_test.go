package promreg_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groundskeeper-io/groundskeeper/internal/promreg"
)

func counter(labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tasks_total", Help: "Tasks."}, labels)
}

func TestSecondRegistrationSharesTheFirstCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, added, err := promreg.Register(reg, counter("type"))
	if err != nil || !added {
		t.Fatalf("first Register = %v, added %v", err, added)
	}
	b, added, err := promreg.Register(reg, counter("type"))
	if err != nil || added {
		t.Fatalf("second Register = %v, added %v; want the first's collector", err, added)
	}
	a.WithLabelValues("x").Inc()
	b.WithLabelValues("x").Inc()
	if got := testutil.ToFloat64(a.WithLabelValues("x")); got != 2 {
		t.Fatalf("shared series = %v, want 2", got)
	}
}

func TestOtherLabelsOrTypeAreRefused(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, _, err := promreg.Register(reg, counter("type")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := promreg.Register(reg, counter("kind")); err == nil {
		t.Fatal("a counter of the same name with other labels was accepted")
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tasks_total", Help: "Tasks."}, []string{"type"})
	if _, _, err := promreg.Register(reg, g); err == nil || !strings.Contains(err.Error(), "GaugeVec") {
		t.Fatalf("a gauge of the counter's name: %v, want an error naming the types", err)
	}
}
