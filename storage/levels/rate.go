package levels

import (
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Rate is a scope's use of its rate limits: requests this UTC minute and
// day, prompt and completion tokens this minute (held at admission,
// corrected at settlement), and requests running. Only scopes with a rate
// limit count it, so a request under none writes nothing more.
type Rate struct {
	Minute     money.Windowed `json:"m,omitzero"`
	Day        money.Windowed `json:"d,omitzero"`
	Prompt     money.Windowed `json:"p,omitzero"`
	Completion money.Windowed `json:"c,omitzero"`
	Running    int64          `json:"r,omitempty"`
}

// The scopes a request's rate limits count it on (RateHold.On).
const (
	RateOnKey uint8 = 1 << iota
	RateOnWorkspace
	RateOnAccount
)

// RateHold is what a request takes from the rate limits of the scopes On
// names: one request, and the tokens it may use at most.
type RateHold struct {
	On                 uint8
	Prompt, Completion int64
}

// RatePlaced is what Place counted on the rate limits: the scopes, the
// UTC minute (money.PeriodID) and the tokens held in it.
type RatePlaced struct {
	On         uint8 `json:"o"`
	Minute     int64 `json:"t"`
	Prompt     int64 `json:"p,omitempty"`
	Completion int64 `json:"c,omitempty"`
}

// rates are the uses of the scopes on names that l has; the rest nil.
// An array, not a callback: a pointer into l handed to a function value
// would put every caller's levels on the heap.
func (l *Levels) rates(on uint8) (rs [3]*Rate) {
	if on&RateOnKey != 0 && l.Key != nil {
		rs[0] = &l.Key.Rate
	}
	if on&RateOnWorkspace != 0 && l.Workspace != nil {
		rs[1] = &l.Workspace.Rate
	}
	if on&RateOnAccount != 0 {
		rs[2] = &l.Account.Rate
	}
	return rs
}

// placeRate counts a request at t on the scopes h names.
func (l *Levels) placeRate(h RateHold, t time.Time) RatePlaced {
	if h.On == 0 {
		return RatePlaced{}
	}
	prompt, completion := max(h.Prompt, 0), max(h.Completion, 0)
	for _, r := range l.rates(h.On) {
		if r == nil {
			continue
		}
		r.Minute = r.Minute.Add(money.IntervalMinute, t, 1)
		r.Day = r.Day.Add(money.IntervalDaily, t, 1)
		r.Prompt = r.Prompt.Add(money.IntervalMinute, t, money.Amount(prompt))
		r.Completion = r.Completion.Add(money.IntervalMinute, t, money.Amount(completion))
		r.Running++
	}
	return RatePlaced{On: h.On, Minute: money.PeriodID(money.IntervalMinute, t), Prompt: prompt, Completion: completion}
}

// unholdRate ends a request's running count.
func (l *Levels) unholdRate(p RatePlaced) {
	if p.On == 0 {
		return
	}
	for _, r := range l.rates(p.On) {
		if r != nil {
			r.Running = max(r.Running-1, 0)
		}
	}
}

// SettleRate replaces the tokens a request held in its minute by those it
// used, while that minute lasts (a later minute never counted them); the
// counters never go below zero.
func (l *Levels) SettleRate(p RatePlaced, prompt, completion int64, t time.Time) {
	if p.On == 0 || money.PeriodID(money.IntervalMinute, t) != p.Minute {
		return
	}
	for _, r := range l.rates(p.On) {
		if r != nil {
			correctTokens(&r.Prompt, p.Minute, p.Prompt, prompt)
			correctTokens(&r.Completion, p.Minute, p.Completion, completion)
		}
	}
}

// correctTokens replaces held by used in w, if w still counts minute.
func correctTokens(w *money.Windowed, minute, held, used int64) {
	if w.Period == minute {
		w.Value = max(w.Value+money.Amount(max(used, 0)-held), 0)
	}
}
