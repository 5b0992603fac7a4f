package websearch

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
)

// TestConformance runs the plugin seam's suite on the plugin as Caddy
// makes it, not provisioned: native search, which needs no engine, is
// planned without the network.
func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Case{
		Plugin:    new(WebSearch),
		Kind:      dialect.Chat,
		Preroutes: `{"model":"openai/gpt-4o:online","messages":[{"role":"user","content":"what is new"}]}`,
		// Any plugins array wakes the search's normalizer, which checks
		// the body's form (an escaped key, a repeated one).
		Unasked: `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("hello ", 100) + `"}]}`,
	})
}

// TestPlanOnRoutesWithoutSearch: on a route without web search an entry
// naming the plugin is an unknown plugin, as the public API has no such
// id; elsewhere Plan has nothing to do.
func TestPlanOnRoutesWithoutSearch(t *testing.T) {
	ws := new(WebSearch)
	body := `{"model":"m","prompt":"p","plugins":[{"id":"response-healing"},{"id":"web-search"}]}`
	run, apiErr := ws.Plan(plugintest.Request(dialect.Other, body))
	if run != nil || apiErr == nil || apiErr.Status != 400 || apiErr.Message != `plugins[1].id: unknown plugin "web-search"` {
		t.Fatalf("Plan on /completions = %v, %v", run, apiErr)
	}
	if run, apiErr := ws.Plan(plugintest.Request(dialect.Chat, body)); run != nil || apiErr != nil {
		t.Fatalf("Plan on /chat/completions = %v, %v", run, apiErr)
	}
}
