package upstream

import (
	"errors"
	"net/http"
	"slices"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// Service is the API of a route that is no chat one (rerank, images,
// audio),
// checked once: it keeps the attempts whose provider serves it, builds
// what each attempt is sent and reads the answer back in the public
// form with the items it used. A chat, Responses, Messages or
// embeddings route has none.
type Service interface {
	// Check is nil when attempt a's provider and model serve the
	// request, else the 400 naming what they do not offer.
	Check(a Attempt) *apierror.Error
	// URI is the request URI below d's provider's base path.
	URI(d dialect.Dialect) string
	// Body is the body d's provider is sent for model, its model id.
	Body(d dialect.Dialect, model string) ([]byte, error)
	// Bound is the most the request may use: its prompt tokens and its
	// items (search units, documents, images). The hold prices it, and
	// no charge exceeds it.
	Bound() billing.Usage
	// Answer returns the writer that hands w the provider's answer on
	// route's current attempt in the public form; an error status passes
	// as it is. genID is the answer's id. A service whose provider
	// answers one body returns NewWholeAnswer's.
	Answer(w http.ResponseWriter, route *Route, genID string) ServiceAnswer
	// Name names the route in messages ("rerank").
	Name() string
}

// ServiceAnswer is the writer Service.Answer returns.
type ServiceAnswer interface {
	http.ResponseWriter
	// Finish writes the public answer once the provider's has ended.
	Finish()
	// Usage is what the answer used, within Bound; ok is false when no
	// answer was written (nothing to charge).
	Usage() (u billing.Usage, ok bool)
}

// Passer is a Service whose answer passes to the client as it comes (a
// speech's audio), never held: it is charged once it has ended.
type Passer interface {
	Passes() bool
}

// TypedBody is a Service whose provider body is no JSON (a multipart
// upload): the body comes with its content type.
type TypedBody interface {
	TypedBody(d dialect.Dialect, model string) (body []byte, contentType string, err error)
}

// Passes reports whether the route's answer passes to the client as it
// comes (Passer).
func (rt *Route) Passes() bool {
	p, ok := rt.Service.(Passer)
	return ok && p.Passes()
}

// ServiceFor keeps the attempts whose provider serves the request of the
// route's service; none left is the first one's refusal.
func (rt *Route) ServiceFor() *apierror.Error {
	var first *apierror.Error
	rt.Attempts = slices.DeleteFunc(rt.Attempts, func(a Attempt) bool {
		apiErr := rt.Service.Check(a)
		if first == nil {
			first = apiErr
		}
		return apiErr != nil
	})
	if len(rt.Attempts) == 0 {
		return first
	}
	return nil
}

// ModelFor is the model id attempt a's provider is sent: the provider's
// own, else the catalog's.
func (a Attempt) ModelFor() string {
	if a.Provider.Model != "" {
		return a.Provider.Model
	}
	return a.Model.ID
}

// ServiceFacts sets f, an attempt's admission facts, for the route's
// service, if any: no output, the prompt and the items it may use.
func (rt *Route) ServiceFacts(f *billing.RequestFacts) {
	if rt.Service == nil {
		return
	}
	f.NoOutput, f.Units = true, rt.Service.Bound()
	f.InputTokens = f.Units.PromptTokens
}

// BodyRefusal is the 400 for a request the provider's dialect would not
// build a body from (Service.Body's error): it names the field when the
// dialect did.
func BodyRefusal(err error) *apierror.Error {
	if fe, ok := errors.AsType[*dialect.FieldError](err); ok {
		return apierror.BadRequest(fe.Error())
	}
	return apierror.BadRequest(err.Error())
}
