package handlers

import (
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

func TestAllowedBetas(t *testing.T) {
	rt := &routing.Router{AnthropicBetas: []string{"context-1m-2025-08-07"}}
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Anthropic-Beta": {"claude-code-20250219, made-up-2099-01-01,context-1m-2025-08-07", "effort-2025-11-24"}}
	if got := upstream.AllowedBetas(rt.BetaList, h); got != "claude-code-20250219,context-1m-2025-08-07,effort-2025-11-24" {
		t.Errorf("allowed %q", got)
	}
	if got := upstream.AllowedBetas(rt.BetaList, http.Header{}); got != "" {
		t.Errorf("no header: %q", got)
	}
	bad := &routing.Router{AnthropicBetas: []string{"a,b"}}
	if err := bad.Provision(caddy.Context{}); err == nil {
		t.Error("a beta name with a comma was accepted")
	}
}

func TestAnthropicBetasOption(t *testing.T) {
	var tg Tollgate
	if known, err := tg.SetOption("anthropic_betas", []string{"context-1m-2025-08-07", "web-fetch-2025-09-10"}); !known || err != nil {
		t.Fatalf("known %v, err %v", known, err)
	}
	if len(tg.AnthropicBetas) != 2 {
		t.Errorf("betas %v", tg.AnthropicBetas)
	}
	if _, err := tg.SetOption("anthropic_betas", nil); err == nil {
		t.Error("anthropic_betas without a name was accepted")
	}
	if _, err := tg.SetOption("anthropic_betas", []string{"a,b"}); err == nil {
		t.Error("a beta name with a comma was accepted")
	}
}
