package telemetry

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// amountVec is a counter of credits kept in exact nano-credits (the
// ledger's unit) and exposed in credits: summing float64 credits would
// drift from the ledger's totals after enough requests, and an operator
// must be able to reconcile the two.
type amountVec struct {
	desc *prometheus.Desc
	n    int // label count

	mu       sync.RWMutex
	children map[string]*amountChild
}

// amountChild is one label set's sum.
type amountChild struct {
	values []string
	nano   atomic.Int64
}

func newAmountVec(desc *prometheus.Desc, labels []string) *amountVec {
	return &amountVec{desc: desc, n: len(labels), children: map[string]*amountChild{}}
}

// with returns the child of a label set, creating it on first use; callers
// on the request path keep the child rather than call with again.
func (v *amountVec) with(values ...string) *amountChild {
	key := strings.Join(values, "\xff")
	v.mu.RLock()
	c := v.children[key]
	v.mu.RUnlock()
	if c != nil {
		return c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c = v.children[key]; c == nil {
		c = &amountChild{values: values}
		v.children[key] = c
	}
	return c
}

// add adds nano-credits; negative amounts are ignored (a counter).
func (c *amountChild) add(nano int64) {
	if nano > 0 {
		c.nano.Add(nano)
	}
}

// Describe implements prometheus.Collector.
func (v *amountVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector.
func (v *amountVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, c := range v.children {
		ch <- prometheus.MustNewConstMetric(v.desc, prometheus.CounterValue, credits(c.nano.Load()), c.values...)
	}
}
