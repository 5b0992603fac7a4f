// Package metering is the meter of an inference request, below the
// tollgate handler: it holds the request's cost before any provider is
// called (admission), sends the attempts through the provider proxies in
// turn, and settles the charge from what the answer used.
package metering

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/breaker"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/retry"
	"github.com/tollgate-dev/caddy-tollgate/handlers/translate"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/sse"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

// Meter is the pipeline's last stage: it enforces the credit limits
// before a request reaches a provider and charges it after: it holds the request's estimated cost
// against the balance, the key's cap and the in-flight budget (402 when it
// does not fit), reads the upstream's usage from the answer as it passes
// through, and turns the hold into the exact charge, durably, before the
// client sees the end of the answer.
//
// The hold bounds the prompt's tokens from above (prompt.Bound), so that
// with max_tokens set no cap is ever exceeded.
//
// What is charged, the provider's usage within the gateway's bounds or,
// without one (a stream the client aborts, or that breaks), the gateway's
// estimate from all the output of any kind, is decided in one place for
// every dialect (answer.Writer.EstimateUsage, defendUsage). A request that fails before any answer
// reaches the client is not charged.
type Meter struct {
	gw     gateway.Gateway
	logger *zap.Logger
	// Retry bounds the retries of an attempt on its own endpoint, before
	// the next endpoint is tried; the zero Policy makes none.
	Retry retry.Policy
	// Breakers are the thresholds of the endpoints' circuit breakers,
	// told each call's outcome. Zero: off.
	Breakers breaker.Settings
}

// New is the meter of the gateway's requests, logging to logger.
func New(gw gateway.Gateway, logger *zap.Logger) Meter {
	return Meter{gw: gw, logger: logger}
}

// now is the meter's clock.
var now = time.Now

// MsgInvalidKey answers a key that is not (or no longer) in the store.
const MsgInvalidKey = "Invalid API key"

// errInternal is the answer to a failure the client cannot act on.
func errInternal() *apierror.Error {
	return apierror.New(http.StatusInternalServerError, "Internal Server Error")
}

// Run meters a routed request: admission holds its cost, a gateway-side
// search runs, the attempts go to their providers in turn until one
// answers, and settle charges what the answer used.
func (m *Meter) Run(w http.ResponseWriter, r *http.Request, st *pipeline.State, up Providers) error {
	if st.ID == nil || st.ID.Management || st.Store == nil {
		m.logger.Error("inference request without an authenticated regular key or a store")
		return apierror.Fail(r, errInternal())
	}
	if apiErr := m.reserve(st); apiErr != nil {
		return apierror.Fail(r, apiErr)
	}
	held := int64(st.Res.Hold + st.Res.Credits)
	telemetry.HoldOpened(held)
	defer telemetry.HoldClosed(held)
	for _, run := range st.Plugins {
		// Only an admitted request is moderated (package plugin's
		// Admitter), once, before any attempt.
		if a, ok := run.(plugin.Admitter); ok {
			if apiErr := m.admitRun(r, st, run, a); apiErr != nil {
				return apierror.Fail(r, apiErr)
			}
		}
	}
	// The output limit the reservation fitted reaches the first attempt's body.
	if err := st.Clamp.Apply(); err != nil {
		m.release(st, st.Res)
		return apierror.Fail(r, errInternal())
	}
	for _, run := range st.Plugins {
		// Only an admitted request searches, once, before any attempt
		// (package plugin's AttemptPreparer).
		if ap, ok := run.(plugin.AttemptPreparer); ok {
			if apiErr := ap.PrepareAttempts(r.Context(), st.Route); apiErr != nil {
				m.release(st, st.Res)
				return apierror.Fail(r, apiErr)
			}
		}
	}
	st.Start = now()
	st.GenID = storage.NewGenerationID(st.Start)
	// The response headers before any provider answered: a failed attempt's
	// headers must leak neither into the next attempt nor into the
	// gateway's own error.
	st.Header.Take(w.Header())
	return m.attempt(w, WithRoute(r, st.Route), st, up)
}

// reserve holds the request's worst-case cost against every limit, or
// refuses with the limit's error.
func (m *Meter) reserve(st *pipeline.State) *apierror.Error {
	route, id := st.Route, st.ID
	// The prices' time windows are read once: the charge is priced as
	// the hold was.
	route.PricedAt = now()
	route.PromptGrows = extendsPrompt(st.Plugins)
	inFlightPolicy := m.gw.InFlightPolicy()
	facts, est, err := estimateAttempts(route, inFlightPolicy)
	tokenHold := est.Hold
	var searchCredits money.Amount // a BYOK request's search and moderation, held against the balance
	for _, run := range st.Plugins {
		// A hold by the route (the search's worst case, a server tool's
		// further rounds), its credits the plugin's own work (a
		// gateway-side engine's results, the fetches).
		if c, ok := run.(plugin.RouteCoster); ok && err == nil {
			var extra, credits money.Amount
			if extra, credits, err = c.HoldFor(route); err == nil {
				if est.Hold, err = addCost(est.Hold, extra); err == nil && facts.BYOK {
					searchCredits, err = addCost(searchCredits, credits)
				}
			}
		}
		// The plugins' own work, paid in credits even by BYOK (package plugin).
		if c, ok := run.(plugin.Coster); ok && err == nil {
			if est.Hold, err = addCost(est.Hold, c.Hold()); err == nil && facts.BYOK {
				searchCredits, err = addCost(searchCredits, c.Hold())
			}
		}
	}
	if err != nil {
		return costRangeError(route)
	}
	// Free-model requests count against the account's request caps, unless
	// the account is exempt or the request uses the caller's own key.
	countFree := route.Attempts[0].Model.IsFree() && !route.Attempts[0].BYOK && !id.Account.RateLimitExempt
	limits := m.gw.FreeModelLimits()
	rates, want := m.gw.DefaultRateLimits(), rateWant(route)
	rules := st.Store.EffectiveRules(id.Hash)
	st.OwnClamp.Init(route, inFlightPolicy, est.Hold, tokenHold)
	st.Clamp = &st.OwnClamp
	st.Res, err = admit(st.Store, id.AccountID, id.Hash, func(v storage.LedgerView) (storage.Holds, error) {
		h := storage.Holds{Hold: est.Hold, InFlight: est.InFlight, CountFree: countFree, KeyOnly: facts.BYOK, Credits: searchCredits}
		if countFree {
			if rl := limits.Check(v.Account, v.Now); rl != nil {
				return h, rl
			}
		}
		// The operator's rate limits, counted in the same commit as the
		// holds: one more counter on each limited scope.
		var rl *gateway.RateLimited
		if h.Rate, rl = gateway.CheckRateLimits(&v, rates, want); rl != nil {
			return h, rl
		}
		// Fitted to the caps' room: a request without max_tokens may hold less.
		var rej *billing.Rejection
		key := keyFacts(v)
		if h.Hold, rej = st.Clamp.Fit(key, v, rules, facts.BYOK); rej != nil {
			return h, rejection{rej}
		}
		if rej := policy.AdmitScopes(v, rules, h.Hold, facts.BYOK); rej != nil {
			return h, rejection{rej}
		}
		if rej := billing.Admit(billing.Estimate{Hold: h.Hold, InFlight: est.InFlight}, facts, accountFacts(v), key, inFlightPolicy); rej != nil {
			return h, rejection{rej}
		}
		if rej := admitSearchCredits(searchCredits, v, rules); rej != nil {
			return h, rejection{rej}
		}
		return h, nil
	})
	if err == nil {
		return nil
	}
	// errors.AsType, not errors.As: As's pointer argument would put both
	// targets on the heap on every request, refused or not.
	if rej, ok := errors.AsType[rejection](err); ok {
		return m.creditError(rej.Rejection)
	}
	if rl, ok := errors.AsType[*gateway.RateLimited](err); ok {
		return RateLimitError(rl, now())
	}
	switch {
	case errors.Is(err, money.ErrAmountRange):
		return costRangeError(route)
	case errors.Is(err, storage.ErrUnavailable), errors.Is(err, storage.ErrContended):
		return pipeline.StoreUnavailable()
	case errors.Is(err, storage.ErrResyncing):
		return ErrStoreResyncing()
	}
	if ce, ok := errors.AsType[*storage.CeilingError](err); ok {
		return CeilingRefusal(ce)
	}
	return apierror.New(http.StatusUnauthorized, MsgInvalidKey)
}

// attempt sends each of the route's attempts to its provider in turn,
// until one answers or fails in a way the next provider would not fix,
// and settles. r is the meter's own copy of the client's request
// (WithRoute): each attempt is applied to it once, here.
func (m *Meter) attempt(w http.ResponseWriter, r *http.Request, st *pipeline.State, up Providers) error {
	route := st.Route
	var retries retry.State
	for i, calls := 0, 0; ; i, calls = i+1, calls+1 {
		if calls > 0 {
			st.Header.Restore(w)
		}
		if err := route.Apply(r, i); err != nil {
			break
		}
		var mw *answer.Writer
		if calls == 0 {
			mw = answer.InitWriter(&st.OwnWriter, w, route.Kind) // in the state's allocation
		} else {
			mw = answer.NewWriter(w, route.Kind)
		}
		mw.GenID, mw.Route = st.GenID, route
		if route.Kind == dialect.Chat {
			mw.RewriteIdentity(st.GenID, route)
		} else if route.Router != "" {
			// The client named the auto model: the answer names the one
			// chosen, not the provider's.
			mw.RenameModel(route.Model.ID)
		}
		began := now()
		// The first attempt is answered from the response cache when it
		// holds the answer (no provider call), else its answer may be kept.
		next := st.Cache.Attempt(up.Forward(route.Provider), route, calls == 0)
		for _, run := range st.Plugins {
			if aw, ok := run.(plugin.AttemptWrapper); ok {
				next = aw.WrapAttempt(next, route) // a server tool's loop
			}
		}
		proxyErr := proxyAttempt(next, mw, r, route, st.GenID)
		if !st.Cache.Hit() { // the provider was not called
			m.observeHealth(route, mw, proxyErr, r.Context().Err() == nil)
		}
		failed := r.Context().Err() == nil && mw.Retryable(proxyErr)
		wait, again := time.Duration(0), false
		if failed {
			// Nothing reached the client: a transient failure is tried
			// again on the same endpoint, within the request's budget.
			if retryAfter, transient := mw.Transient(proxyErr); transient {
				at := now()
				wait, again = m.Retry.Next(&retries, at, at.Sub(began), retryAfter)
			}
		}
		fallback := failed && !again && i+1 < len(route.Attempts)
		observeAttempt(st, mw, began, fallback, again)
		if again || fallback {
			st.Failed = append(st.Failed, mw.Failure(route, proxyErr))
		}
		if again {
			m.logger.Debug("provider failed; retrying it", zap.String("provider", route.Provider.Name),
				zap.String("model", route.Model.ID), zap.Int("status", st.Failed[len(st.Failed)-1].Status), zap.Duration("wait", wait))
			if retry.Wait(r.Context(), wait) {
				i-- // the same attempt
				continue
			}
			// The client left during the wait: nothing was sent or charged.
			st.Failed = st.Failed[:len(st.Failed)-1]
			st.Header.Restore(w)
			m.release(st, st.Res)
			return nil
		}
		if fallback {
			m.logger.Debug("provider failed; trying the next", zap.String("provider", route.Provider.Name),
				zap.String("model", route.Model.ID), zap.Int("status", st.Failed[len(st.Failed)-1].Status))
			continue
		}
		return m.settle(r, st, mw, proxyErr)
	}
	m.release(st, st.Res)
	return apierror.Fail(r, errInternal())
}

// estimateAttempts holds for the costliest endpoint the request may end up
// on, since a fallback can serve it; the request is BYOK for the limits only
// when every attempt is. A hold beyond any Amount is billing.ErrCostRange.
func estimateAttempts(route *upstream.Route, policy billing.InFlightPolicy) (billing.RequestFacts, billing.Estimate, error) {
	var facts billing.RequestFacts
	var est billing.Estimate
	allBYOK := true
	for i := range route.Attempts {
		a := &route.Attempts[i]
		f := billing.RequestFacts{
			Pricing:       route.HoldPricing(a),
			InputTokens:   route.Prompt.TokensFor(a.Model),
			MaxTokens:     route.MaxTokens,
			Choices:       route.Choices,
			ContextLength: a.Model.ContextLength,
			Free:          a.Model.IsFree(),
			BYOK:          a.BYOK,
		}
		route.ServiceFacts(&f)
		e, err := billing.EstimateRequest(f, policy)
		if err != nil {
			return facts, est, err
		}
		if i == 0 {
			facts = f
		}
		est.Hold, est.InFlight = max(est.Hold, e.Hold), max(est.InFlight, e.InFlight)
		allBYOK = allBYOK && a.BYOK
	}
	facts.BYOK = allBYOK
	return facts, est, nil
}

// rateWant is the most tokens a request may take from a rate limit: its
// prompt's count and the output it may produce, on its largest attempt
// (without max_tokens, the model's output limit, else the rest of its
// context window).
func rateWant(route *upstream.Route) gateway.RateWant {
	var w gateway.RateWant
	if route.Service != nil {
		// A service's prompt is its bound's (not its body, which may be
		// an audio file), and it has no output tokens.
		w.Prompt = route.Service.Bound().PromptTokens
		return w
	}
	for _, a := range route.Attempts {
		in := route.Prompt.TokensFor(a.Model)
		out := route.MaxTokens
		if out <= 0 {
			out = a.Model.MaxCompletionTokens
			if out <= 0 {
				out = max(a.Model.ContextLength-in, 0)
			}
		}
		if n := max(route.Choices, 1); out > 0 && out <= math.MaxInt64/n {
			out *= n
		} else if out > 0 {
			out = math.MaxInt64
		}
		w.Prompt, w.Completion = max(w.Prompt, in), max(w.Completion, out)
	}
	return w
}

// addCost adds two costs, refusing a sum beyond any Amount.
func addCost(a, b money.Amount) (money.Amount, error) {
	s, ok := money.AddAmounts(a, b)
	if !ok {
		return 0, billing.ErrCostRange
	}
	return s, nil
}

// costRangeError answers a request whose worst-case cost cannot be priced:
// the client's max_tokens (or, without it, its prompt) is too large at the
// model's prices. Refused before anything is held or called.
func costRangeError(route *upstream.Route) *apierror.Error {
	field := route.MaxTokensField
	if field == "" {
		field = "messages"
		if route.Kind == dialect.Responses {
			field = "input"
		}
	}
	return apierror.BadRequest(field + ": the request's cost at the model's prices is beyond " + money.MaxAmount.String() + " credits")
}

// release gives back a hold no charge will use. A release that fails is
// the ledger's to finish (it retries one that failed for want of the
// store, and otherwise stops renewing the hold's lease, which then
// lapses); it is logged so that an operator sees holds waiting on either.
func (m *Meter) release(st *pipeline.State, res *storage.Reservation) {
	if err := st.Store.Release(res); err != nil {
		m.logger.Warn("releasing a hold failed; the ledger retries it or lets its lease lapse",
			zap.String("generation", st.GenID), zap.Error(err))
	}
}

// settle charges what the request consumed and sends what was held back.
func (m *Meter) settle(r *http.Request, st *pipeline.State, mw *answer.Writer, proxyErr error) error {
	store, res, route, id := st.Store, st.Res, st.Route, st.ID
	clientGone := mw.ClientGone() || r.Context().Err() != nil

	if mw.Mode == sse.Pass && !mw.ItemsOK {
		// A passed answer (audio) the provider sent nothing of: charged
		// nothing, and its status is sent.
		m.release(st, res)
		return nil
	}
	// Nothing usable came back: charge nothing, answer with our own error.
	switch {
	case mw.Mode == sse.Undecided || mw.UpstreamFailed() || (mw.AnswerHeld() && !mw.UsableJSON()):
		m.release(st, res)
		if clientGone {
			return nil
		}
		st.Failed = append(st.Failed, mw.Failure(route, proxyErr))
		// The provider's headers are not ours to pass on (answer.FailuresError sets
		// Retry-After only when every attempt gave one).
		st.Header.Restore(mw)
		return apierror.Fail(r, answer.FailuresError(st.Failed))
	}

	// What is charged: the provider's usage within the gateway's bounds,
	// or without one the gateway's estimate (answer.Writer.EstimateUsage).
	var usage billing.Usage
	estimated := !mw.Usage.OK
	if route.Service != nil {
		// The service's answer: what it used, within its bound.
		usage, estimated = mw.Items, false
	} else if estimated {
		var charge bool
		if usage, charge = mw.EstimateUsage(route, clientGone); !charge {
			// No output reached the client or came from the provider: a
			// failed attempt, not charged.
			m.release(st, res)
			if !clientGone {
				msg := "Provider stream ended before any output"
				if mw.SawDone {
					msg = "Provider returned an empty answer"
				}
				_ = mw.SendStreamError(route, http.StatusBadGateway, msg) // released: a failed write is the client gone, with nothing charged
			}
			return nil
		}
	} else {
		usage = m.defendUsage(st, mw)
	}
	// The conversation sticks to the endpoint that answered: the one it
	// stuck to, or the fallback that served when that one failed.
	st.Sticky.Served(route.Model.ID, route.Provider.Name)
	// The overrides in force for the answer's prompt, as admission read
	// them.
	pricing := route.ChargePricing(usage.PromptTokens)
	var credits money.Amount // a BYOK request's part paid in credits
	var err error
	if settles(st.Plugins) {
		// The runs' corrections (the search's results, a server tool's
		// earlier rounds and its fetches), on a copy only such a request
		// allocates.
		s := &plugin.Settlement{Route: route, Pricing: pricing, Usage: usage, UsageRaw: mw.UsageRaw, Corrected: mw.Corrected}
		for _, run := range st.Plugins {
			if c, ok := run.(plugin.Settler); ok && err == nil {
				err = c.Settle(s)
			}
		}
		pricing, usage, mw.Corrected = s.Pricing, s.Usage, s.Corrected
		if err == nil && route.BYOK {
			credits, err = addCost(credits, s.Credits)
		}
	}
	for _, run := range st.Plugins {
		if c, ok := run.(plugin.Coster); ok && err == nil {
			if usage.Extra, err = addCost(usage.Extra, c.Charge()); err == nil && route.BYOK {
				credits, err = addCost(credits, c.Charge())
			}
		}
	}
	byok := route.BYOK
	if st.Cache.Hit() {
		// No provider was called: the hit is charged the cache's price
		// alone, the gateway's own work, paid in credits even by BYOK.
		m.observeCacheHit(pricing, usage, st.Cache.Price())
		pricing, usage.Extra, byok = billing.Pricing{}, st.Cache.Price(), false
		if route.BYOK {
			credits = usage.Extra
		}
	}
	var cost money.Amount
	if err == nil {
		cost, err = billing.Cost(pricing, usage)
	}
	if err != nil {
		// Only a provider reporting usage beyond any price gets here (the
		// worst case admission held is within range): rather than wrap or
		// saturate, the request is charged what admission held for it.
		m.logger.Error("provider usage beyond any cost; charging the hold", zap.String("generation", st.GenID),
			zap.Int64("prompt_tokens", usage.PromptTokens), zap.Int64("completion_tokens", usage.CompletionTokens))
		cost, credits = res.Hold, res.Credits
	}
	// What the cache saved, for GET /generation (nothing without cache
	// tokens; a sum out of range shows none).
	discount, _, _ := billing.CacheDiscount(pricing, usage)
	mw.OwnBill = answer.NewUsageBill(cost, pricing, usage, byok)
	mw.OwnBill.Responses = route.Kind == dialect.Responses
	mw.OwnBill.CacheSource = st.Cache.SourceID()
	mw.Bill = &mw.OwnBill
	status := "completed"
	switch {
	case clientGone:
		status = "aborted"
	case mw.Mode == sse.Stream && !mw.SawDone, mw.Mode == sse.Pass && proxyErr != nil:
		status = "error"
	case mw.Finish == "length" || mw.Finish == "incomplete" || mw.Finish == "max_tokens":
		status = "incomplete"
	}
	st.Gen = storage.Generation{
		ID: st.GenID, AccountID: id.AccountID, KeyHash: id.Hash, WorkspaceID: id.Key.WorkspaceID,
		Model: route.Model.ID, Provider: route.Provider.Name, UpstreamModel: route.Provider.Model, UpstreamID: mw.UpstreamID, UpstreamIDHidden: mw.Identity != nil,
		PromptTokens: usage.PromptTokens, CompletionTokens: usage.CompletionTokens, CacheReadTokens: usage.CacheReadTokens, CacheWriteTokens: usage.CacheWriteTokens,
		CacheWrite1hTokens: usage.CacheWrite1hTokens, CacheDiscount: discount, SearchResults: usage.SearchResults, Cost: cost, BYOK: route.BYOK, Credits: credits,
		Status: status, Streamed: mw.Mode == sse.Stream || mw.Mode == sse.Pass, FinishReason: mw.Finish, UsageEstimated: estimated,
		LatencyMS: now().Sub(st.Start).Milliseconds(), User: route.User, CreatedAt: st.Start.UTC(),
		ContentFlags: st.ContentFlags,
		Attempts:     st.AttemptRecords, Routing: route.Routing, SessionID: st.Sticky.SessionID, Router: route.Router, PresetID: st.PresetID,
		ResponseCacheSourceID: st.Cache.SourceID(),
	}
	gen := &st.Gen
	window := m.gw.InFlightPolicy().SettlementWindow
	err = store.Settle(res, storage.Charge{Cost: cost, BYOK: route.BYOK, Credits: credits, SettlementWindow: window, Generation: gen})
	if err != nil {
		// The flusher keeps retrying; the client must not see a finished
		// answer whose charge is not yet safe.
		m.logger.Error("charge not durable", zap.String("generation", st.GenID), zap.Error(err))
		if mw.AnswerHeld() && !clientGone {
			if errors.Is(err, storage.ErrUnavailable) {
				return apierror.Fail(r, pipeline.StoreUnavailable())
			}
			return apierror.Fail(r, errInternal())
		}
		return nil
	}
	observeCharge(st, gen)
	// A whole answer whose charge is durable may answer the same request
	// again (the response cache); not one whose output the caps' room
	// clamped, which the request as sent would not have got.
	st.Cache.Keep(st.GenID, !clientGone && !estimated && (status == "completed" || status == "incomplete") && st.Clamp.Limits == nil)
	if clientGone {
		return nil
	}
	if mw.Mode == sse.Pass {
		return nil // the answer was sent as it came
	}
	if mw.Mode == sse.Stream {
		_ = mw.SendTail(cost) // settled: a failed write is the client gone, and the charge stands
		if !mw.SawDone {
			// 200 was sent long ago: the status cannot change, so
			// the error is an event.
			_ = mw.SendStreamError(route, http.StatusBadGateway, "Provider stream ended unexpectedly") // settled: a failed write is the client gone, and the charge stands
		}
		return nil
	}
	_ = mw.SendJSON(cost, st.GenID) // settled: a failed write is the client gone, and the charge stands
	return nil
}

// extendsPrompt reports whether a run adds to the prompt after admission
// (plugin.PromptExtender).
func extendsPrompt(runs []plugin.Run) bool {
	for _, run := range runs {
		if _, ok := run.(plugin.PromptExtender); ok {
			return true
		}
	}
	return false
}

// settles reports whether a run corrects the charge (plugin.Settler).
func settles(runs []plugin.Run) bool {
	for _, run := range runs {
		if _, ok := run.(plugin.Settler); ok {
			return true
		}
	}
	return false
}

// proxy calls reverse_proxy with r pointed at the attempt's provider URI
// (Route.WithUpstreamURI), and puts r back. When copying the answer fails (the upstream
// cut it, or the client left), reverse_proxy aborts the handler with
// panic(http.ErrAbortHandler); the meter must still settle what was
// delivered and release the holds, so that abort becomes an error here.
func proxy(next caddyhttp.Handler, w http.ResponseWriter, r *http.Request, route *upstream.Route) (err error) {
	u, uri := route.WithUpstreamURI(r)
	defer func() {
		r.URL, r.RequestURI = u, uri
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			err = http.ErrAbortHandler
		}
	}()
	return next.ServeHTTP(w, r)
}

// proxyAttempt calls reverse_proxy for the current attempt. The answers of
// translated attempts are translated below the meter's writer, which then
// meters a chat, Responses or Messages answer as from any provider: an
// Anthropic-style provider's Messages answer to a chat or Responses
// request becomes a chat completion, a Responses request's chat answer
// (from a chat-only or an Anthropic-style provider) a Responses answer,
// and a Messages request's chat answer a Messages answer. A Messages
// request to an Anthropic-style provider is passed natively.
func proxyAttempt(next caddyhttp.Handler, mw *answer.Writer, r *http.Request, route *upstream.Route, genID string) error {
	if route.Kind == dialect.Messages && route.Translate {
		return proxyMessages(next, mw, r, route, genID)
	}
	if route.Service != nil {
		mw.Passes = route.Passes()
		sw := route.Service.Answer(mw, route, genID)
		err := proxy(next, sw, r, route)
		sw.Finish()
		mw.Items, mw.ItemsOK = sw.Usage()
		return err
	}
	var w http.ResponseWriter = mw
	var cw *translate.ChatToResponses
	if route.Translate {
		cw = translate.NewChatToResponses(mw, route.Echo, genID, route.Provider.Model)
		cw.Limit = answer.MaxBufferedBody
		w = cw
	}
	var aw dialect.AnswerReader
	switch {
	case route.ViaChat:
		aw = route.Dialect.ToChat(w, route.Provider.Model, answer.MaxBufferedBody)
		w = aw
	case route.Embed:
		aw = route.Dialect.(dialect.Embedder).ToEmbeddings(w, route.Body, route.Provider.Model, route.PromptEstimate(), answer.MaxBufferedBody)
		w = aw
	}
	err := proxy(next, w, r, route)
	if aw != nil {
		aw.Finish()
		mw.Produced = max(mw.Produced, aw.OutputProduced())
		takeCacheTTLs(mw, aw)
	}
	if cw != nil {
		cw.Finish(err)
		mw.Produced = max(mw.Produced, cw.Produced)
		mw.TakeProviderUsage(cw.ProviderUsage())
	}
	return err
}

// takeCacheTTLs gives the meter the split of the cache writes by TTL that
// a provider answering in its own API reported and the chat usage the
// meter reads (a held answer's only at settlement) does not carry.
func takeCacheTTLs(mw *answer.Writer, aw dialect.AnswerReader) {
	if c, ok := aw.(dialect.CacheTTLReporter); ok {
		hour, unknown := c.CacheWrites1h()
		mw.CacheTTL = answer.CacheTTL{Reported: true, Hour: hour, Unknown: unknown}
	}
}

// rejection carries an admission refusal through Store.Reserve.
type rejection struct{ *billing.Rejection }

func (r rejection) Error() string { return r.Message }

// creditError is the 402 of a credit refusal: the brand's limit_source,
// remedy_hint and, for some, a reason.
func (m *Meter) creditError(rej *billing.Rejection) *apierror.Error {
	md := map[string]any{
		"limit_source": m.gw.Brand() + "_" + rej.Source,
		"remedy_hint":  rej.RemedyHint,
	}
	if rej.Reason != "" {
		md["reason"] = rej.Reason
	}
	e := &apierror.Error{Status: http.StatusPaymentRequired, Message: rej.Message, Metadata: md}
	if rej.RetryAfter > 0 {
		secs := int64(math.Ceil(rej.RetryAfter.Seconds()))
		e.Header = http.Header{"Retry-After": {strconv.FormatInt(max(secs, 1), 10)}}
	}
	return e
}

func accountFacts(v storage.LedgerView) billing.AccountFacts {
	return billing.AccountFacts{
		Balance:      v.Account.Balance(),
		Held:         v.AccountHeld,
		InFlightHeld: v.InFlightHeld,
		Usage:        v.Account.Usage,
		BYOKUsage:    v.Account.BYOKUsage,
		Prepaid:      v.Account.Billing == storage.BillingPrepaid,
		NextRelease:  v.NextRelease,
	}
}

func keyFacts(v storage.LedgerView) billing.KeyFacts {
	return billing.KeyFacts{
		Limit:       v.Key.Limit,
		CapUsage:    v.Key.CapUsage(v.Now),
		Held:        v.KeyHeld,
		LimitResets: v.Key.LimitReset != money.IntervalNone,
		IncludeBYOK: v.Key.IncludeBYOKInLimit,
	}
}
