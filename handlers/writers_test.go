package handlers

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/citations"
	"github.com/tollgate-dev/caddy-tollgate/handlers/translate"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// noPages is a run that cites nothing.
type noPages struct{}

func (noPages) Sources() []websearch.Source          { return nil }
func (noPages) ToolUse() (details, anthropic string) { return "", "" }

// TestWritersIgnoreInterimResponses: a provider's 100 Continue or 103 Early
// Hints (which reverse_proxy passes on) fixes no writer's mode; the final
// status that follows does.
func TestWritersIgnoreInterimResponses(t *testing.T) {
	for _, final := range []int{http.StatusOK, http.StatusBadRequest} {
		for _, ct := range []string{"text/event-stream", "application/json"} {
			mw := answer.NewWriter(httptest.NewRecorder(), "chat")
			cw := translate.NewChatToResponses(httptest.NewRecorder(), translate.NewEcho([]byte(`{}`)), "gen", "m")
			sw := citations.NewWriter(httptest.NewRecorder(), "chat", nil, []citations.Citer{noPages{}})
			for _, w := range []http.ResponseWriter{mw, cw, sw} {
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(http.StatusContinue)
				w.WriteHeader(http.StatusEarlyHints)
				w.WriteHeader(final)
			}
			// The meter holds an error; the others pass it.
			wantMeter, wantOthers := sse.Hold, sse.Hold
			switch {
			case final >= 400:
				wantOthers = sse.Pass
			case ct == "text/event-stream":
				wantMeter, wantOthers = sse.Stream, sse.Stream
			}
			if mw.Mode != wantMeter || mw.Status != final || cw.Mode != wantOthers || cw.Status != final || sw.Mode != wantOthers || sw.Status != final {
				t.Errorf("%d %s: meter %d/%d, responses %d/%d, cite %d/%d; want modes %d, %d",
					final, ct, mw.Mode, mw.Status, cw.Mode, cw.Status, sw.Mode, sw.Status, wantMeter, wantOthers)
			}
		}
	}
}
