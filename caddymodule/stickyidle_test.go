package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// sticky_idle takes a positive duration or off; anything else fails the
// load naming it.
func TestStickyIdleOption(t *testing.T) {
	adapt := func(opt string) (string, error) {
		caddyfile := ":8080 {\n\ttollgate {\n\t\t" + opt + "\n\t}\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		return string(out), err
	}
	for _, opt := range []string{"sticky_idle", "sticky_idle 0s", "sticky_idle -5m", "sticky_idle soon", "sticky_idle 5m 10m"} {
		if _, err := adapt(opt); err == nil || !strings.Contains(err.Error(), "sticky_idle: expected a positive duration or off") {
			t.Errorf("%s: %v", opt, err)
		}
	}
	for opt, want := range map[string]string{"sticky_idle 30m": `"sticky_idle":1800000000000`, "sticky_idle off": `"sticky_idle":-1`} {
		if out, err := adapt(opt); err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v %s", opt, err, out)
		}
	}
}
