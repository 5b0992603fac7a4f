package metering

import (
	"errors"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// admit reserves a request's holds: decide runs on a snapshot of the
// ledger's figures (the request's policy: caps, budgets, balance, the
// output clamp), outside any storage lock, and the ledger commits the
// holds it returns only if those figures are unchanged; otherwise the
// decision is made again on fresh ones (storage.Ledger). decide's error
// refuses the request.
func admit(s *storage.Store, accountID, keyHash string, decide func(storage.LedgerView) (storage.Holds, error)) (*storage.Reservation, error) {
	for attempt := 0; ; attempt++ {
		res, err := admitOnce(s, accountID, keyHash, attempt, decide)
		if !errors.Is(err, storage.ErrStale) {
			return res, err
		}
	}
}

// admitOnce is one attempt of admit.
func admitOnce(s *storage.Store, accountID, keyHash string, attempt int, decide func(storage.LedgerView) (storage.Holds, error)) (*storage.Reservation, error) {
	var snap storage.Snapshot
	if err := s.Snapshot(&snap, accountID, keyHash, attempt); err != nil {
		return nil, err
	}
	// A refusal (or a panic) ends the snapshot: a late attempt's holds the
	// account's lock.
	committed := false
	defer func() {
		if !committed {
			s.Abandon(&snap)
		}
	}()
	h, err := decide(snap.View)
	if err != nil {
		return nil, err
	}
	committed = true
	return s.Commit(&snap, h)
}

// Precheck refuses, before the request's body is read, a request that
// admission would refuse whatever its body and route: the key's credit
// limit spent, or a prepaid account without balance. The body's work
// (file parsing, web fetches, content filters, token counting) costs the
// gateway CPU, and a key that cannot pay must not be able to spend it.
//
// It reads the account and key as authentication found them and refuses
// only what admission's own rules would refuse with any hold (billing.Admit
// first checks the key's cap, then the balance): a limit spent on usage
// alone, ignoring running holds, and a balance at or below zero. A request
// that could run on one of the account's own provider keys (BYOK), which
// spends no credits and may sit outside the key's limit, is left to
// admission. Nothing is held or charged here.
func (m *Meter) Precheck(st *pipeline.State) *apierror.Error {
	id := st.ID
	if id == nil || id.Management || id.Account == nil || id.Key == nil {
		return nil
	}
	key := billing.KeyFacts{Limit: id.Key.Limit, CapUsage: id.Key.CapUsage(now()),
		LimitResets: id.Key.LimitReset != money.IntervalNone, IncludeBYOK: id.Key.IncludeBYOKInLimit}
	var rej *billing.Rejection
	if b, ok := key.Cap(false); ok {
		rej = billing.AdmitBudget(0, b)
	}
	if rej == nil && id.Account.Billing == storage.BillingPrepaid && id.Account.Balance() <= 0 {
		rej = billing.InsufficientCredits()
	}
	if rej == nil {
		return nil
	}
	if rej.Source != "key_limit" || !key.IncludeBYOK {
		// Spent on credits only: a BYOK route may still be admitted.
		if m.mayUseBYOK(st) {
			return nil
		}
	}
	return m.creditError(rej)
}

// mayUseBYOK reports whether the account holds a provider key of its own
// that a request could use (one enabled, with the gateway able to open it).
func (m *Meter) mayUseBYOK(st *pipeline.State) bool {
	if m.gw == nil || m.gw.BYOKSealer() == nil || st.Store == nil {
		return false
	}
	creds, _ := st.Store.ListBYOK(storage.BYOKFilter{AccountID: st.ID.AccountID})
	for _, c := range creds {
		if !c.Disabled {
			return true
		}
	}
	return false
}

// admitSearchCredits refuses a BYOK request whose gateway-side search does
// not fit: the rest of the request spends the caller's own provider
// credits, the search the platform's, which the key's limit, the guardrail
// and workspace budgets that do not count BYOK spending (those that do
// judged the whole hold already) and the prepaid balance all cap.
func admitSearchCredits(credits money.Amount, v storage.LedgerView, rules *storage.Rules) *billing.Rejection {
	if credits <= 0 {
		return nil
	}
	key := keyFacts(v)
	key.IncludeBYOK = true // the credits count against the cap whatever the key's setting
	if rej := billing.Admit(billing.Estimate{Hold: credits}, billing.RequestFacts{BYOK: true}, billing.AccountFacts{}, key, billing.InFlightPolicy{}); rej != nil {
		return rej
	}
	if rej := policy.AdmitScopes(v, rules, credits, false); rej != nil {
		return rej
	}
	acct := accountFacts(v)
	if !acct.Prepaid {
		return nil
	}
	if available, ok := money.AddAmounts(acct.Balance, -acct.Held); acct.Balance <= 0 || !ok || available < credits {
		return &billing.Rejection{Source: "credits", Message: "Insufficient credits: the balance cannot cover this request's web search",
			RemedyHint: "Add credits to the account, or lower max_results."}
	}
	return nil
}
