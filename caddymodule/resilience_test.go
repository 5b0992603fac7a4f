package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// The tollgate directive's retry, breaker and uptime options, adapted into
// the handler's JSON, and a bad value refused naming the option.
func TestResilienceOptions(t *testing.T) {
	adapt := func(opts string) (string, error) {
		caddyfile := ":8080 {\n\ttollgate {\n\t\t" + opts + "\n\t}\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		return string(out), err
	}
	for opts, want := range map[string]string{
		"retries 0":                          `"retries":0`,
		"retries 3\n\t\tretry_budget 5s":     `"retries":3,"retry_budget":5000000000`,
		"retry_backoff 50ms":                 `"retry_backoff":50000000`,
		"circuit_breaker":                    `"circuit_breaker":{}`,
		"circuit_breaker 3 1m":               `"circuit_breaker":{"cooldown":60000000000,"failures":3}`,
		"min_uptime 95.5":                    `"min_uptime":95.5`,
		"circuit_breaker off\n\t\tretries 1": `"retries":1`,
	} {
		out, err := adapt(opts)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%q: %v\n%s\nwant %s", opts, err, out, want)
		}
	}
	if out, _ := adapt("circuit_breaker off"); strings.Contains(out, "circuit_breaker") {
		t.Errorf("circuit_breaker off adapted to %s", out)
	}
	for opts, want := range map[string]string{
		"retries -1":              "retries: expected a number of retries, 0 or more",
		"retries many":            "retries: expected a number of retries, 0 or more",
		"retry_budget 0s":         "retry_budget: expected a positive duration",
		"retry_backoff soon":      "retry_backoff: expected a positive duration",
		"circuit_breaker 0":       "circuit_breaker: failures must be a positive integer",
		"circuit_breaker 3 never": `circuit_breaker: invalid cooldown "never"`,
		"min_uptime 101":          "min_uptime: expected a percentage from 0 to 100",
	} {
		if _, err := adapt(opts); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", opts, err, want)
		}
	}
}
