package metering

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

// boundOnly is a service of which only its bound is read.
type boundOnly struct{ upstream.Service }

func (boundOnly) Bound() billing.Usage { return billing.Usage{PromptTokens: 12, AudioSeconds: 30} }

// A service's rate-limit want is its bound's prompt, never its body's
// bytes (an audio file's), and no output.
func TestRateWantService(t *testing.T) {
	m := &catalog.Model{ID: "m", ContextLength: 100000, MaxCompletionTokens: 4000}
	route := &upstream.Route{Attempts: []upstream.Attempt{{Model: m}}, Service: boundOnly{}}
	if w := rateWant(route); w.Prompt != 12 || w.Completion != 0 {
		t.Fatalf("service want %+v", w)
	}
	route.Service = nil
	if w := rateWant(route); w.Completion != 4000 {
		t.Fatalf("chat want %+v", w)
	}
}
