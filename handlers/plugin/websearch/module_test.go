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
