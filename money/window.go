package money

import "time"

// Interval names a UTC calendar period used for counters and limit resets.
type Interval string

const (
	IntervalNone    Interval = ""
	IntervalDaily   Interval = "daily"
	IntervalWeekly  Interval = "weekly"
	IntervalMonthly Interval = "monthly"
	// IntervalMinute is for request-rate windows; keys cannot reset by it.
	IntervalMinute Interval = "minute"
)

// ParseInterval accepts the reset names of the public API.
func ParseInterval(s string) (Interval, bool) {
	switch Interval(s) {
	case IntervalDaily, IntervalWeekly, IntervalMonthly:
		return Interval(s), true
	}
	return IntervalNone, false
}

// PeriodID numbers the UTC period of kind iv that contains t: days since the
// epoch, Monday-based weeks since the epoch, or months since year 0. Two
// instants share a period exactly when their PeriodIDs are equal.
func PeriodID(iv Interval, t time.Time) int64 {
	t = t.UTC()
	days := floorDiv(t.Unix(), 86400)
	switch iv {
	case IntervalMinute:
		return floorDiv(t.Unix(), 60)
	case IntervalDaily:
		return days
	case IntervalWeekly:
		// 1970-01-01 was a Thursday; shift so that weeks start on Monday.
		return floorDiv(days+3, 7)
	case IntervalMonthly:
		return int64(t.Year())*12 + int64(t.Month()) - 1
	}
	return 0
}

// PeriodEnd returns the first instant after the UTC period of kind iv that
// contains t.
func PeriodEnd(iv Interval, t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch iv {
	case IntervalMinute:
		return t.Truncate(time.Minute).Add(time.Minute)
	case IntervalDaily:
		return day.AddDate(0, 0, 1)
	case IntervalWeekly:
		offset := (int(day.Weekday()) + 6) % 7 // days since Monday
		return day.AddDate(0, 0, 7-offset)
	case IntervalMonthly:
		return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Windowed is a counter that belongs to one UTC period and reads as zero once
// that period is over; resets are computed lazily on read, with no timer.
type Windowed struct {
	Period int64  `json:"p"`
	Value  Amount `json:"v"`
}

// At returns the counter's value in the period of kind iv containing now.
func (w Windowed) At(iv Interval, now time.Time) Amount {
	if w.Period != PeriodID(iv, now) {
		return 0
	}
	return w.Value
}

// Add returns the counter after adding d at time now.
func (w Windowed) Add(iv Interval, now time.Time, d Amount) Windowed {
	p := PeriodID(iv, now)
	if w.Period != p {
		return Windowed{Period: p, Value: d}
	}
	return Windowed{Period: p, Value: w.Value + d}
}

// UsageCounters is one family of spending counters: all time and the current
// UTC day, week (from Monday) and month.
type UsageCounters struct {
	Total   Amount   `json:"total"`
	Daily   Windowed `json:"daily"`
	Weekly  Windowed `json:"weekly"`
	Monthly Windowed `json:"monthly"`
}

// Add records d at time now.
func (c UsageCounters) Add(now time.Time, d Amount) UsageCounters {
	return UsageCounters{
		Total:   c.Total + d,
		Daily:   c.Daily.Add(IntervalDaily, now, d),
		Weekly:  c.Weekly.Add(IntervalWeekly, now, d),
		Monthly: c.Monthly.Add(IntervalMonthly, now, d),
	}
}

// In returns the spending within the current period of kind iv; with no
// interval it is the all-time total.
func (c UsageCounters) In(iv Interval, now time.Time) Amount {
	switch iv {
	case IntervalDaily:
		return c.Daily.At(iv, now)
	case IntervalWeekly:
		return c.Weekly.At(iv, now)
	case IntervalMonthly:
		return c.Monthly.At(iv, now)
	}
	return c.Total
}
