package upstream

import (
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// WholeReader is a Service whose provider answers with one body, read
// once it has ended (WholeAnswer).
type WholeReader interface {
	// ReadAnswer is the public answer of body, the provider's answer on
	// route's current attempt, and what it used within the service's
	// bound; an error is a body the gateway cannot read. genID is the
	// answer's id.
	ReadAnswer(route *Route, genID string, body []byte) (public []byte, used billing.Usage, err error)
	// FailureBody is the body of the 502 that stands for an answer
	// ReadAnswer refused.
	FailureBody(err error) []byte
}

// WholeAnswer is the ServiceAnswer of a WholeReader: an error status
// passes as it is; an answer is held whole, then read into the public
// one. One the service cannot read is the provider's failure, 502,
// charged nothing.
type WholeAnswer struct {
	sse.Writer
	r     WholeReader
	route *Route
	genID string
	usage billing.Usage
	ok    bool
}

// NewWholeAnswer is the WholeAnswer of r on route's current attempt over
// w, holding at most limit bytes of the provider's answer.
func NewWholeAnswer(w http.ResponseWriter, r WholeReader, route *Route, genID string, limit int) *WholeAnswer {
	a := &WholeAnswer{r: r, route: route, genID: genID}
	a.Init(w, a)
	a.Limit = limit
	return a
}

// Decide implements sse.Hooks: an error status passes as it is; an
// answer is held whole.
func (a *WholeAnswer) Decide(status int) sse.Mode {
	a.Header().Del("Content-Length")
	if status >= 400 {
		return sse.Pass
	}
	return sse.Hold
}

// Event implements sse.Hooks: never called (no stream).
func (a *WholeAnswer) Event(ev []byte) ([]byte, error) { return ev, nil }

// Finish implements ServiceAnswer.
func (a *WholeAnswer) Finish() {
	if a.Mode != sse.Hold {
		return
	}
	out, used, err := a.r.ReadAnswer(a.route, a.genID, a.Body.Bytes())
	a.Header().Set("Content-Type", "application/json")
	if err != nil {
		a.Status = http.StatusBadGateway
		out = a.r.FailureBody(err)
	} else {
		a.usage, a.ok = used, true
	}
	a.ResponseWriter.WriteHeader(a.Status)
	_ = a.Send(out) // a failed write is the client gone
}

// Usage implements ServiceAnswer.
func (a *WholeAnswer) Usage() (billing.Usage, bool) { return a.usage, a.ok }

// Interface guards
var _ ServiceAnswer = (*WholeAnswer)(nil)
