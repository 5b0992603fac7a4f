package export

import (
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// A generation's session id reaches both export shapes whatever the
// privacy flags: the webhook record's session_id and the OTLP span's
// session.id; a generation without one carries neither.
func TestSessionIDExported(t *testing.T) {
	in := Record{Generation: storage.Generation{ID: "gen-1", Model: "m", Provider: "p", Status: "completed",
		CreatedAt: time.Unix(1_700_000_000, 0), SessionID: "conv-42"}}
	plain := Record{Generation: storage.Generation{ID: "gen-2", Model: "m", Provider: "p", Status: "completed", CreatedAt: time.Unix(1_700_000_000, 0)}}

	body := gjson.ParseBytes(WebhookBody([]Record{in, plain}, Flags{}))
	if got := body.Get("data.0.session_id").String(); got != "conv-42" {
		t.Errorf("webhook session_id %q", got)
	}
	if body.Get("data.1.session_id").Exists() {
		t.Errorf("a record without a session carries session_id: %s", body.Get("data.1").Raw)
	}
	spans := Spans([]Record{in, plain}, Flags{})
	attr := func(i int) string {
		for _, kv := range spans[i].Attributes() {
			if kv.Key == "session.id" {
				return kv.Value.AsString()
			}
		}
		return ""
	}
	if got := attr(0); got != "conv-42" {
		t.Errorf("span session.id %q", got)
	}
	if got := attr(1); got != "" {
		t.Errorf("span without a session has session.id %q", got)
	}
}
