package money

import (
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPeriodBoundaries(t *testing.T) {
	for _, tc := range []struct {
		iv         Interval
		before     string
		after      string
		end        string
		samePeriod string // an instant in the same period as before
	}{
		{IntervalDaily, "2026-11-21T23:59:59.999Z", "2026-11-22T00:00:00Z", "2026-11-22T00:00:00Z", "2026-11-21T00:00:00Z"},
		// 2026-11-23 is a Monday.
		{IntervalWeekly, "2026-11-22T23:59:59Z", "2026-11-23T00:00:00Z", "2026-11-23T00:00:00Z", "2026-11-16T00:00:00Z"},
		{IntervalMonthly, "2026-11-30T23:59:59Z", "2026-12-01T00:00:00Z", "2026-12-01T00:00:00Z", "2026-11-01T00:00:00Z"},
		{IntervalMonthly, "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		// An offset is converted to UTC first: 01:00+02:00 is 23:00 UTC the day before.
		{IntervalDaily, "2026-11-22T01:00:00+02:00", "2026-11-22T02:00:00+02:00", "2026-11-22T00:00:00Z", "2026-11-21T12:00:00Z"},
	} {
		b, a := mustTime(t, tc.before), mustTime(t, tc.after)
		if PeriodID(tc.iv, b) == PeriodID(tc.iv, a) {
			t.Errorf("%s: %s and %s share a period", tc.iv, tc.before, tc.after)
		}
		if PeriodID(tc.iv, b) != PeriodID(tc.iv, mustTime(t, tc.samePeriod)) {
			t.Errorf("%s: %s and %s are in different periods", tc.iv, tc.before, tc.samePeriod)
		}
		if got := PeriodEnd(tc.iv, b); !got.Equal(mustTime(t, tc.end)) {
			t.Errorf("%s: PeriodEnd(%s) = %s, want %s", tc.iv, tc.before, got, tc.end)
		}
	}
}

func TestPeriodBeforeEpoch(t *testing.T) {
	// 1969-12-29 was a Monday; floor division keeps weeks aligned before 1970.
	if PeriodID(IntervalWeekly, mustTime(t, "1969-12-29T00:00:00Z")) != PeriodID(IntervalWeekly, mustTime(t, "1970-01-04T23:59:59Z")) {
		t.Fatal("week of 1969-12-29 split")
	}
	if PeriodID(IntervalWeekly, mustTime(t, "1969-12-28T23:59:59Z")) == PeriodID(IntervalWeekly, mustTime(t, "1969-12-29T00:00:00Z")) {
		t.Fatal("Sunday and Monday share a week")
	}
}

func TestUsageCountersResetLazily(t *testing.T) {
	var c UsageCounters
	sun := mustTime(t, "2026-11-22T23:00:00Z") // Sunday, last day of a week
	c = c.Add(sun, 5)
	mon := mustTime(t, "2026-11-23T00:00:01Z")
	if c.In(IntervalDaily, mon) != 0 || c.In(IntervalWeekly, mon) != 0 {
		t.Fatal("daily and weekly must read zero after Monday 00:00 UTC")
	}
	if c.In(IntervalMonthly, mon) != 5 || c.In(IntervalNone, mon) != 5 {
		t.Fatal("monthly and total keep the charge")
	}
	c = c.Add(mon, 2)
	if c.In(IntervalDaily, mon) != 2 || c.In(IntervalWeekly, mon) != 2 || c.In(IntervalMonthly, mon) != 7 || c.Total != 7 {
		t.Fatalf("after a second charge: %+v", c)
	}
	dec := mustTime(t, "2026-12-01T00:00:00Z")
	if c.In(IntervalMonthly, dec) != 0 {
		t.Fatal("monthly must reset on the first of the month")
	}
}
