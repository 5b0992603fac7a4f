package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Charts are SVG drawn on the server: no script, nothing inline that the
// Content-Security-Policy would have to allow (colours are CSS classes),
// and a table of the same figures sits next to each chart.

// chartSVG is a drawn chart and its legend.
type chartSVG struct {
	SVG    template.HTML
	Legend []legendItem
	Label  string // the chart's accessible description
}

type legendItem struct {
	Name  string
	Class string
}

// series is one stacked series: a value per day.
type series struct {
	Name   string
	Values []float64
}

// maxSeries is how many series a chart stacks; the rest are summed as
// "other".
const maxSeries = 5

const (
	chartW, chartH = 800, 220
	padL, padB     = 76, 30
	padT, padR     = 10, 8
)

// axis is how a chart's scale reads: its labels, and whether it counts
// whole things (requests, tokens), whose ticks are whole numbers.
type axis struct {
	label func(float64) string
	whole bool
}

var (
	moneyAxis = axis{label: formatMoneyAxis}
	countAxis = axis{label: formatCountAxis, whole: true}
)

// barChart draws one value per day.
func barChart(days []dayPoint, val func(dayPoint) float64, ax axis) chartSVG {
	s := series{Name: "total", Values: make([]float64, len(days))}
	ts := make([]time.Time, len(days))
	for i, p := range days {
		s.Values[i], ts[i] = val(p), p.Day
	}
	c := stackedChart(ts, []series{s}, ax)
	c.Legend = nil
	return c
}

// stackedChart draws days of stacked series (at most maxSeries, in the
// order given, the rest summed as "other").
func stackedChart(days []time.Time, ss []series, ax axis) chartSVG {
	if len(ss) > maxSeries {
		other := series{Name: "other", Values: make([]float64, len(days))}
		for _, s := range ss[maxSeries-1:] {
			for i, v := range s.Values {
				other.Values[i] += v
			}
		}
		ss = append(ss[:maxSeries-1:maxSeries-1], other)
	}
	top := 0.0
	for i := range days {
		sum := 0.0
		for _, s := range ss {
			sum += s.Values[i]
		}
		top = math.Max(top, sum)
	}
	empty := top == 0
	top = niceTop(top, ax.whole)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" role="img" aria-hidden="true" xmlns="http://www.w3.org/2000/svg">`, chartW, chartH)
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	if empty {
		// No scale to read: the plot says there is nothing in it.
		fmt.Fprintf(&b, `<text class="empty" x="%.1f" y="%.1f" text-anchor="middle">Nothing in these days</text>`, float64(padL)+plotW/2, float64(padT)+plotH/2)
	}
	for i := 0; i <= 4; i++ {
		y := float64(padT) + plotH*float64(4-i)/4
		fmt.Fprintf(&b, `<line class="axis" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, padL, chartW-padR, y, y)
		if !empty || i == 0 {
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-6, y+4, template.HTMLEscapeString(ax.label(top*float64(i)/4)))
		}
	}
	n := max(len(days), 1)
	slot := plotW / float64(n)
	barW := math.Max(1, slot*0.7)
	for i, day := range days {
		x := float64(padL) + slot*float64(i) + (slot-barW)/2
		y := float64(padT) + plotH
		for j, s := range ss {
			v := s.Values[i]
			if v <= 0 || top == 0 {
				continue
			}
			h := plotH * v / top
			y -= h
			fmt.Fprintf(&b, `<rect class="c%d" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s %s: %s</title></rect>`,
				j, x, y, barW, h, day.Format("Jan 2"), template.HTMLEscapeString(s.Name), template.HTMLEscapeString(ax.label(v)))
		}
		if n <= 10 || i%max(1, n/6) == 0 || i == n-1 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x+barW/2, chartH-4, day.Format("Jan 2"))
		}
	}
	b.WriteString(`</svg>`)
	c := chartSVG{SVG: template.HTML(b.String())} //nolint:gosec // every text above is escaped
	for j, s := range ss {
		c.Legend = append(c.Legend, legendItem{Name: s.Name, Class: fmt.Sprintf("c%d", j)})
	}
	return c
}

// niceTop is the top of a chart's scale for its largest value v: four
// ticks a quarter of it apart, each step 1, 2, 2.5 or 5 times a power of
// ten (short labels: $0.00002, not $0.0000375), and a whole number when
// the chart counts whole things.
func niceTop(v float64, whole bool) float64 {
	if v <= 0 {
		return 1
	}
	step := v / 4
	p := math.Pow(10, math.Floor(math.Log10(step)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step <= m*p*(1+1e-9) {
			step = m * p
			break
		}
	}
	if whole {
		step = math.Max(1, math.Ceil(step))
	}
	return 4 * step
}

func formatMoneyAxis(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v >= 100:
		return fmt.Sprintf("$%.0f", v)
	case v >= 1:
		return fmt.Sprintf("$%.2f", v)
	}
	// Below a dollar: three significant digits, as a plain amount (never
	// 5e-05), at least cents, at most the credits' own precision.
	dec := min(max(int(math.Ceil(-math.Log10(v)))+2, 2), 9)
	s := strconv.FormatFloat(v, 'f', dec, 64)
	for strings.HasSuffix(s, "0") && len(s)-strings.IndexByte(s, '.') > 3 {
		s = s[:len(s)-1]
	}
	return "$" + s
}

func formatCountAxis(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v != float64(int64(v)):
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
