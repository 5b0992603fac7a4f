// Package levels is the ledger's arithmetic: how a request's holds are
// placed on, and taken off, every level that caps it (the account's
// balance and in-flight budget, the key's cap, its workspace's budgets,
// its member's guardrails, the free-model request windows), and how a
// settled charge lands in their counters. It is pure (no storage, no
// locks, no clock of its own), so that every ledger (the in-process one
// and the shared ones) applies the same rules: a ledger reads a request's
// Levels from wherever it keeps them, calls Place, Unhold and Charge, and
// writes the result back.
package levels

import (
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Account is an account's counters and what its running requests hold.
type Account struct {
	Usage      money.Amount
	BYOKUsage  money.Amount
	FreeDay    money.Windowed // free-model requests, this UTC day
	FreeMinute money.Windowed // and this UTC minute
	Held       money.Amount   // against the balance
	Running    money.Amount   // against the in-flight budget
	Rate       Rate           // against the account's rate limits
}

// Scope is a key's, workspace's or member's spending counters and what its
// running requests hold.
type Scope struct {
	Usage     money.UsageCounters
	BYOKUsage money.UsageCounters
	Held      money.Amount
	Rate      Rate // against the scope's rate limits
}

// Levels are the levels one request touches. A nil scope is one the
// request does not have (no key; a key outside any workspace or member).
type Levels struct {
	Account   Account
	Key       *Scope
	Workspace *Scope
	Member    *Scope
	// WorkspaceCountsBYOK: the workspace counts BYOK spending in its
	// budgets (include_byok_in_budgets), so a BYOK request's whole hold
	// lands on it.
	WorkspaceCountsBYOK bool
}

// Holds are the amounts a request reserves at admission.
type Holds struct {
	Hold     money.Amount // against the balance and the key cap
	InFlight money.Amount // against the in-flight budget
	// CountFree counts the request against the account's free-model
	// request windows when it is admitted.
	CountFree bool
	// KeyOnly holds against the key's cap but not the account's balance:
	// the request spends the caller's own provider credits (BYOK).
	KeyOnly bool
	// Credits is held against the account's balance even with KeyOnly:
	// what a BYOK request costs the platform itself (a gateway-side web
	// search).
	Credits money.Amount
	// Rate counts the request on the rate limits of the scopes it names.
	Rate RateHold
}

// Placed is what Place put on each level: Unhold takes exactly that off,
// whatever changed in between (a workspace that now counts BYOK).
type Placed struct {
	Account   money.Amount
	Key       money.Amount
	Workspace money.Amount
	Member    money.Amount
	InFlight  money.Amount
	// OnKey, OnWorkspace and OnMember: which scopes it was placed on.
	OnKey, OnWorkspace, OnMember bool
	// Rate is what it counted on the rate limits.
	Rate RatePlaced
}

// OnAccount is what h holds against the account's balance.
func (h Holds) OnAccount() money.Amount {
	switch {
	case !h.KeyOnly:
		return h.Hold
	case h.Credits > 0:
		return h.Credits
	}
	return 0
}

// OnWorkspace is what h holds against its workspace: a BYOK request
// holds only its Credits unless the workspace counts BYOK spending.
func (h Holds) OnWorkspace(countsBYOK bool) money.Amount {
	if h.KeyOnly && !countsBYOK {
		return max(h.Credits, 0)
	}
	return h.Hold
}

// Fits reports whether placing h on l keeps every sum within MaxAmount
// (holds never wrap); inFlightHeld is the in-flight budget's current use
// (running holds and settling costs). A decision usually refuses long
// before, but a key without a cap on an account billed after use has no
// other bound.
func (l *Levels) Fits(h Holds, inFlightHeld money.Amount) bool {
	hold := max(h.Hold, h.Credits)
	sums := [4]money.Amount{l.Account.Held}
	for i, sc := range [3]*Scope{l.Key, l.Workspace, l.Member} {
		if sc != nil {
			sums[i+1] = sc.Held
		}
	}
	for _, sum := range sums {
		if _, ok := money.AddAmounts(sum, hold); !ok {
			return false
		}
	}
	_, ok := money.SumAmounts(inFlightHeld, h.InFlight)
	return ok
}

// Place adds an admitted request's holds to the levels (and, for a free
// model, one request to the free-model windows at t), and returns what it
// placed.
func (l *Levels) Place(h Holds, t time.Time) Placed {
	p := Placed{Account: h.OnAccount(), InFlight: max(h.InFlight, 0)}
	l.Account.Held += p.Account
	if l.Key != nil {
		p.OnKey, p.Key = true, h.Hold
		l.Key.Held += h.Hold
	}
	if l.Workspace != nil {
		p.OnWorkspace, p.Workspace = true, h.OnWorkspace(l.WorkspaceCountsBYOK)
		l.Workspace.Held += p.Workspace
	}
	if l.Member != nil {
		p.OnMember, p.Member = true, h.Hold
		l.Member.Held += h.Hold
	}
	l.Account.Running += p.InFlight
	if h.CountFree {
		l.Account.FreeDay = l.Account.FreeDay.Add(money.IntervalDaily, t, 1)
		l.Account.FreeMinute = l.Account.FreeMinute.Add(money.IntervalMinute, t, 1)
	}
	p.Rate = l.placeRate(h.Rate, t)
	return p
}

// Unhold takes what Place placed off the levels; a scope gone since (nil
// here) is skipped.
func (l *Levels) Unhold(p Placed) {
	l.Account.Held -= p.Account
	if p.OnKey && l.Key != nil {
		l.Key.Held -= p.Key
	}
	if p.OnWorkspace && l.Workspace != nil {
		l.Workspace.Held -= p.Workspace
	}
	if p.OnMember && l.Member != nil {
		l.Member.Held -= p.Member
	}
	l.Account.Running -= p.InFlight
	l.unholdRate(p.Rate)
}

// Charge is a settled request's cost. A BYOK charge lands in the BYOK
// counters and spends no credits, but for Credits (at most Cost): what the
// platform bills in credits (a gateway-side web search).
type Charge struct {
	Cost    money.Amount
	BYOK    bool
	Credits money.Amount
}

// Split is a charge's part paid in credits and its part spent on the
// caller's own provider account.
func (c Charge) Split() (credits, byok money.Amount) {
	if !c.BYOK {
		return c.Cost, 0
	}
	credits = min(max(c.Credits, 0), c.Cost)
	return credits, c.Cost - credits
}

// Within bounds the charge by what an account's counters (usage and BYOK
// usage) can still take. Admission holds only requests whose hold fits in
// them, so only a cost above its hold on an account that has charged about
// MaxAmount in all is cut; the counters then stop at MaxAmount instead of
// wrapping. Every other counter a charge lands in (key, workspace, member,
// in-flight) is at most the account's all-time charges.
func (c Charge) Within(usage, byokUsage money.Amount) Charge {
	if c.Cost <= 0 {
		return c
	}
	room := money.MaxAmount - max(usage, 0)
	room -= min(max(byokUsage, 0), room)
	if c.Cost <= room {
		return c
	}
	c.Cost, c.Credits = room, min(c.Credits, room)
	return c
}

// Charge adds a settled charge to every level's counters at t: the
// account's usage and BYOK usage, the key's (its usage windows only for
// the part paid in credits, or for any non-BYOK charge), the workspace's
// and the member's. It reports whether anything changed.
func (l *Levels) Charge(c Charge, t time.Time) bool {
	if c.Cost == 0 {
		return false
	}
	credits, byok := c.Split()
	l.Account.BYOKUsage += byok
	l.Account.Usage += credits
	if k := l.Key; k != nil {
		if c.BYOK {
			k.BYOKUsage = k.BYOKUsage.Add(t, byok)
		}
		if !c.BYOK || credits != 0 {
			k.Usage = k.Usage.Add(t, credits)
		}
	}
	for _, sc := range [2]*Scope{l.Workspace, l.Member} {
		if sc == nil {
			continue
		}
		if credits != 0 {
			sc.Usage = sc.Usage.Add(t, credits)
		}
		if byok != 0 {
			sc.BYOKUsage = sc.BYOKUsage.Add(t, byok)
		}
	}
	return true
}

// KeepsSettling reports whether a settled charge stays in the account's
// in-flight budget for its settlement window: a request that held against
// the budget, with a positive cost and window.
func KeepsSettling(inFlight, cost money.Amount, window time.Duration) bool {
	return inFlight > 0 && window > 0 && cost > 0
}
