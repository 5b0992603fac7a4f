// Package telemetrytest reads metric values out of a Prometheus registry
// for tests of the packages that count.
package telemetrytest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Lookup is the value of the first series of metric name whose labels
// include want: a counter's or gauge's value, a histogram's sample count.
// ok is false when there is no such series.
func Lookup(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, want) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue(), true
				case m.Gauge != nil:
					return m.Gauge.GetValue(), true
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount()), true
				}
			}
		}
	}
	return 0, false
}

func matches(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}
