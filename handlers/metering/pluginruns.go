package metering

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// admitRun has an admitted request's run a act (run is a, as the
// request's plugins hold it). A refusal releases the hold, except that a
// run that did its work (a moderation verdict) is charged its Charge,
// recorded as an error generation of the refusal's model and provider.
func (m *Meter) admitRun(r *http.Request, st *pipeline.State, run plugin.Run, a plugin.Admitter) *apierror.Error {
	began := now()
	ref := a.Admit(r.Context())
	if ref == nil {
		return nil
	}
	var price money.Amount
	if c, ok := run.(plugin.Coster); ok {
		price = c.Charge()
	}
	if price == 0 {
		m.release(st, st.Res)
		return ref.Err
	}
	route, id := st.Route, st.ID
	var credits money.Amount // a BYOK request pays the gateway's work in credits
	if route.BYOK {
		credits = price
	}
	gen := &storage.Generation{
		ID: storage.NewGenerationID(began), AccountID: id.AccountID, KeyHash: id.Hash, WorkspaceID: id.Key.WorkspaceID,
		Model: ref.Model, Provider: ref.Provider, Cost: price, BYOK: route.BYOK, Credits: credits,
		Status: "error", FinishReason: "content_filter", LatencyMS: now().Sub(began).Milliseconds(), User: route.User,
		CreatedAt: began.UTC(), ContentFlags: st.ContentFlags,
	}
	window := m.gw.InFlightPolicy().SettlementWindow
	if err := st.Store.Settle(st.Res, storage.Charge{Cost: price, BYOK: route.BYOK, Credits: credits, SettlementWindow: window, Generation: gen}); err != nil {
		// The refusal stands; a shared store lands the charge later.
		m.logger.Error("refused request's charge not durable", zap.String("generation", gen.ID), zap.Error(err))
		return ref.Err
	}
	observeCharge(st, gen)
	return ref.Err
}
