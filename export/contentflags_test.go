package export

import (
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// A flagged generation's content flags reach both export shapes whatever
// the privacy flags (a flag is what an organization watches for): the
// webhook record's content_flags and the OTLP span's tollgate.content_flags
// labels; an unflagged one carries neither.
func TestContentFlagsExported(t *testing.T) {
	flagged := Record{Generation: storage.Generation{ID: "gen-1", Model: "m", Provider: "p", Status: "completed",
		CreatedAt: time.Unix(1_700_000_000, 0), ContentFlags: []storage.ContentFlag{
			{GuardrailID: "g1", Label: "[PHONE]", Builtin: "phone"}, {GuardrailID: "g2", Label: "project code"}}}}
	plain := Record{Generation: storage.Generation{ID: "gen-2", Model: "m", Provider: "p", Status: "completed", CreatedAt: time.Unix(1_700_000_000, 0)}}

	body := gjson.ParseBytes(WebhookBody([]Record{flagged, plain}, Flags{}))
	if got := body.Get("data.0.content_flags").Raw; got != `[{"guardrail_id":"g1","label":"[PHONE]","builtin":"phone"},{"guardrail_id":"g2","label":"project code"}]` {
		t.Errorf("webhook content_flags %s", got)
	}
	if body.Get("data.1.content_flags").Exists() {
		t.Errorf("unflagged record carries content_flags: %s", body.Get("data.1").Raw)
	}

	spans := Spans([]Record{flagged, plain}, Flags{})
	labels := func(i int) string {
		for _, kv := range spans[i].Attributes() {
			if kv.Key == "tollgate.content_flags" {
				return strings.Join(kv.Value.AsStringSlice(), ",")
			}
		}
		return ""
	}
	if got := labels(0); got != "[PHONE],project code" {
		t.Errorf("span tollgate.content_flags %q", got)
	}
	if got := labels(1); got != "" {
		t.Errorf("unflagged span has content flags %q", got)
	}
}
