package messages

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
)

// WriteError writes a gateway error on the Messages route. The body is
// the gateway's error object, {"error":{"code","message","metadata"}},
// with the members Anthropic's shape adds (the public API's
// AnthropicMessagesErrorResponse): "type":"error", error.type and
// request_id, so that both the gateway's clients and Anthropic's SDKs read
// it.
func WriteError(w http.ResponseWriter, e *apierror.Error) {
	body, err := json.Marshal(errorBody{Type: "error", RequestID: nil, Error: errorObject{
		Type: ErrorType(e.Status), Code: e.Status, Message: e.Message, Metadata: e.Metadata,
	}})
	if err != nil {
		apierror.Write(w, e)
		return
	}
	h := w.Header()
	for k, vs := range e.Header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(e.Status)
	_, _ = w.Write(append(body, '\n')) // the status is sent: a failed write is a client gone
}

type errorBody struct {
	Type      string      `json:"type"`
	Error     errorObject `json:"error"`
	RequestID *string     `json:"request_id"`
}

type errorObject struct {
	Type     string         `json:"type"`
	Code     int            `json:"code"`
	Message  string         `json:"message"`
	Metadata map[string]any `json:"metadata,omitempty"`
}
