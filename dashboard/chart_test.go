package dashboard

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Money reads as a plain amount, never in exponent notation.
func TestMoneyAxisIsPlain(t *testing.T) {
	for v, want := range map[float64]string{
		0: "$0", 0.00005: "$0.00005", 0.0000125: "$0.0000125", 0.000125: "$0.000125", 0.0125: "$0.0125",
		0.25: "$0.25", 0.5: "$0.50", 1.25: "$1.25", 250: "$250", 0.000000001: "$0.000000001",
	} {
		if got := formatMoneyAxis(v); got != want {
			t.Errorf("%g: %q, want %q", v, got, want)
		}
	}
}

var tickLabel = regexp.MustCompile(`<text x="\d+" y="[\d.]+" text-anchor="end">([^<]*)</text>`)

// A chart's scale: money in plain amounts, counts in whole numbers.
func TestChartTicks(t *testing.T) {
	days := []time.Time{time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)}
	for _, top := range []float64{1, 2, 3, 5, 7, 10, 50, 150, 999, 1e6} {
		c := stackedChart(days, []series{{Name: "requests", Values: []float64{top, top / 3}}}, countAxis)
		labels := tickLabel.FindAllStringSubmatch(string(c.SVG), -1)
		if len(labels) != 5 {
			t.Fatalf("max %g: %d ticks", top, len(labels))
		}
		for _, l := range labels {
			v := strings.TrimSuffix(strings.TrimSuffix(l[1], "k"), "M")
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || (v == l[1] && f != float64(int64(f))) {
				t.Errorf("max %g: count tick %q is not a whole number", top, l[1])
			}
		}
	}
	c := stackedChart(days, []series{{Name: "spend", Values: []float64{0.00004, 0.00001}}}, moneyAxis)
	if s := string(c.SVG); strings.Contains(s, "e-0") || !strings.Contains(s, ">$0.00004<") || !strings.Contains(s, ">$0.00001<") {
		t.Fatalf("money chart: %s", s)
	}
}
