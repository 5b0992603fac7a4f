package billing

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Overrides are a model's conditional prices, in the catalog's order: an
// entry applies when every condition it has holds, later entries win per
// price, and a price an entry does not set stays the base price.
type Overrides struct {
	Entries []Override
}

// Override is one conditional price.
type Override struct {
	// MinPromptTokens: the entry applies to a request of more prompt
	// tokens than this (HasMinPrompt).
	MinPromptTokens int64
	HasMinPrompt    bool
	// UTCStart and UTCEnd are the daily window [start, end) in which the
	// entry applies, in minutes after 00:00 UTC, wrapping past midnight
	// when start > end (HasWindow).
	UTCStart, UTCEnd int
	HasWindow        bool

	// The prices the entry sets, each with its flag.
	Prompt, Completion, InputCacheRead, InputCacheWrite, InputCacheWrite1h Price
	Sets                                                                   PriceKeys
}

// PriceKeys says which prices an override sets.
type PriceKeys uint8

const (
	KeyPrompt PriceKeys = 1 << iota
	KeyCompletion
	KeyInputCacheRead
	KeyInputCacheWrite
	KeyInputCacheWrite1h
)

// ParseClock reads an HHMM clock number of a time window (100 = 01:00,
// 1030 = 10:30, 2400 = the end of the day) as minutes after midnight.
func ParseClock(v float64) (int, error) {
	if v != math.Trunc(v) || v < 0 || v > 2400 || math.Mod(v, 100) >= 60 {
		return 0, fmt.Errorf("%v: expected an HHMM clock number from 0 to 2400", v)
	}
	n := int(v)
	return n/100*60 + n%100, nil
}

// ParseMinPrompt reads a min_prompt_tokens condition: a request of more
// tokens than it (so of more than its whole part) matches.
func ParseMinPrompt(v float64) (int64, error) {
	if math.IsNaN(v) || v < 0 || v >= math.MaxInt64 {
		return 0, errors.New("expected a non-negative number")
	}
	return int64(v), nil
}

// applies reports whether o's conditions hold for a prompt of prompt
// tokens at minute of the day.
func (o *Override) applies(prompt int64, minute int) bool {
	if o.HasMinPrompt && prompt <= o.MinPromptTokens {
		return false
	}
	return !o.HasWindow || inWindow(minute, o.UTCStart, o.UTCEnd)
}

func inWindow(minute, start, end int) bool {
	if start <= end {
		return start <= minute && minute < end
	}
	return minute >= start || minute < end
}

// set gives p the prices o sets.
func (o *Override) set(p *Pricing) {
	if o.Sets&KeyPrompt != 0 {
		p.Prompt = o.Prompt
	}
	if o.Sets&KeyCompletion != 0 {
		p.Completion = o.Completion
	}
	if o.Sets&KeyInputCacheRead != 0 {
		p.InputCacheRead, p.CacheReadSet = o.InputCacheRead, true
	}
	if o.Sets&KeyInputCacheWrite != 0 {
		p.InputCacheWrite, p.CacheWriteSet = o.InputCacheWrite, true
	}
	if o.Sets&KeyInputCacheWrite1h != 0 {
		p.InputCacheWrite1h, p.CacheWrite1hSet = o.InputCacheWrite1h, true
	}
}

// minuteOf is t's minute of the UTC day.
func minuteOf(t time.Time) int {
	t = t.UTC()
	return t.Hour()*60 + t.Minute()
}

// At is the pricing of a request of prompt tokens priced at t: the base
// prices with every override that applies set over them, in order.
func (p Pricing) At(prompt int64, t time.Time) Pricing {
	if p.Overrides == nil {
		return p
	}
	q, minute := p, minuteOf(t)
	for i := range p.Overrides.Entries {
		if o := &p.Overrides.Entries[i]; o.applies(prompt, minute) {
			o.set(&q)
		}
	}
	return q
}

// ForHold is a pricing no dearer per price than none that At may give a
// request of at most bound prompt tokens priced at t: for each price, the
// dearest of the base's and of the overrides that may apply. Admission
// holds at it, so that the exact charge never exceeds the hold whichever
// override settlement finds in force.
func (p Pricing) ForHold(bound int64, t time.Time) Pricing {
	if p.Overrides == nil {
		return p
	}
	q, minute := p, minuteOf(t)
	for i := range p.Overrides.Entries {
		o := &p.Overrides.Entries[i]
		if o.HasWindow && !inWindow(minute, o.UTCStart, o.UTCEnd) || o.HasMinPrompt && bound <= o.MinPromptTokens {
			continue
		}
		r := q
		o.set(&r)
		q.Prompt, q.Completion = max(q.Prompt, r.Prompt), max(q.Completion, r.Completion)
		// An unset cache price is charged as the prompt's (or the
		// write's); InputPrice, which holds take, is the dearest of all.
		q.InputCacheRead, q.CacheReadSet = max(q.cacheRead(), r.cacheRead()), true
		q.InputCacheWrite, q.CacheWriteSet = max(q.cacheWrite(), r.cacheWrite()), true
		q.InputCacheWrite1h, q.CacheWrite1hSet = max(q.cacheWrite1h(), r.cacheWrite1h()), true
	}
	return q
}

// MarshalJSON writes o in the public API's shape: its conditions as
// numbers (the window's bounds as HHMM), its prices as decimal strings.
func (o Override) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	member := func(k, v string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"`+k+`":`+v...)
	}
	for _, f := range []struct {
		key   PriceKeys
		name  string
		price Price
	}{
		{KeyPrompt, "prompt", o.Prompt}, {KeyCompletion, "completion", o.Completion},
		{KeyInputCacheRead, "input_cache_read", o.InputCacheRead}, {KeyInputCacheWrite, "input_cache_write", o.InputCacheWrite},
		{KeyInputCacheWrite1h, "input_cache_write_1h", o.InputCacheWrite1h},
	} {
		if o.Sets&f.key != 0 {
			member(f.name, `"`+f.price.String()+`"`)
		}
	}
	if o.HasMinPrompt {
		member("min_prompt_tokens", strconv.FormatInt(o.MinPromptTokens, 10))
	}
	if o.HasWindow {
		member("utc_start", strconv.Itoa(clock(o.UTCStart)))
		member("utc_end", strconv.Itoa(clock(o.UTCEnd)))
	}
	return append(b, '}'), nil
}

// clock is minutes after midnight as an HHMM clock number.
func clock(minutes int) int { return minutes/60*100 + minutes%60 }
