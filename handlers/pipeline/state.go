// Package pipeline is what the stages of a request share: its State, made
// once by the tollgate handler and handed down to each Stage in the order
// the handler lists them.
package pipeline

import (
	"context"
	"net/http"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/responsecache"
	"github.com/tollgate-dev/caddy-tollgate/handlers/sticky"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Stage is one step of an inference request's way from its body to the
// provider call: it reads and changes the request's State (never the
// client's request, r), or refuses the request with the error the client
// gets.
type Stage interface {
	Serve(st *State, w http.ResponseWriter, r *http.Request) *apierror.Error
}

// State is one request's way through the pipeline, made once and handed
// to each stage. What a stage owns is in the state's allocation (Own...
// fields): a request costs one allocation for all of them.
type State struct {
	API admin.APIRoute // the route, classified once from the path by the route table
	// Store is the gateway's store, resolved once by ServeHTTP (which
	// refuses the request when it cannot be had): every stage after it
	// reads and writes through this one.
	Store *storage.Store
	// Ctx is the request's context: the stages' work on the body stops
	// when it ends (the client left); nil in tests, never ending.
	Ctx context.Context

	ID *gateway.Identity // the caller; nil on a public route without key
	// Body is the request's body as the stages before left it; nil until
	// read.
	Body  []byte
	Route *upstream.Route // the model, providers and attempts; nil when not routed

	// Mapped: the replacer resolves the state's placeholders; Routed:
	// with the route's.
	Mapped, Routed bool

	// OwnRoute is what Route points to, in the state's allocation.
	OwnRoute upstream.Route
	// OwnFields are the body's fields as routing reads them, in the
	// state's allocation (a request is routed once).
	OwnFields reqbody.Fields
	// OwnAttempts holds the first list of candidates when the model has a
	// single usable endpoint; OwnAttemptsUsed: taken.
	OwnAttempts     [1]upstream.Attempt
	OwnAttemptsUsed bool

	// Sticky is the request's session id and its sticky routing choice.
	Sticky sticky.Choice

	// PresetID is the preset the request named, merged into Body, for
	// the generation record; "" for none.
	PresetID string

	// Cache is the response cache's part in the request: its zero value
	// when the cache does not apply.
	Cache responsecache.Request

	// ContentFlags are the flagging content filters that matched, for the
	// generation record.
	ContentFlags []storage.ContentFlag

	// Plugins are the runs of the plugins the request asked for (package
	// plugin), in the order of the gateway's plugins; OwnPlugins holds
	// the first few, in the state's allocation.
	Plugins    []plugin.Run
	OwnPlugins [2]plugin.Run
	// OwnPluginReq is what the plugins see of the request, and OwnModels
	// the route's models in it, in the state's allocation.
	OwnPluginReq plugin.Request
	OwnModels    AttemptModels

	// Set by the meter.
	Res    *storage.Reservation
	Clamp  *upstream.OutputClamp // the output limit fitted to the caps' room, if any
	Start  time.Time
	GenID  string
	Failed []answer.Failure      // attempts that got no usable answer
	Header answer.HeaderSnapshot // the response headers before any provider answered

	// OwnClamp is what Clamp points to, in the state's allocation.
	OwnClamp upstream.OutputClamp
	// OwnWriter is the first attempt's meter writer, in the state's
	// allocation; a fallback's writers are their own.
	OwnWriter answer.Writer
	// Gen is the generation record settle charges, in the state's
	// allocation.
	Gen storage.Generation

	// For the metrics (the handler's observeAnswer, the meter's observeAttempt and observeCharge).
	Inference bool // a POST to an inference route: counted in requests_total
	Status    int  // the last attempt's status; 0 before any

	// AttemptRecords are the provider calls of a request with several
	// endpoints, for the generation record.
	AttemptRecords []storage.ProviderAttempt
}

// Context is the request's context (Background without one).
func (st *State) Context() context.Context {
	if st.Ctx == nil {
		return context.Background()
	}
	return st.Ctx
}

// AttemptModels are a route's attempts as the plugins see them: their
// catalog models.
type AttemptModels []upstream.Attempt

// Len implements plugin.Models.
func (a *AttemptModels) Len() int { return len(*a) }

// At implements plugin.Models.
func (a *AttemptModels) At(i int) *catalog.Model { return (*a)[i].Model }

// Interface guards
var _ plugin.Models = (*AttemptModels)(nil)
