package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestValidateRefuses loads configs as `caddy validate` does (provision and
// validate every module, start nothing): each one adapts, or is JSON no
// Caddyfile can write, and must fail with its field named.
func TestValidateRefuses(t *testing.T) {
	const site = "\n\n:8080 {\n\ttollgate\n}\n"
	caddyfiles := []struct{ name, global, want string }{
		{"brand", "brand Bad!", `brand "Bad!"`},
		{"connect_code_ttl", "connect_code_ttl 20m", "connect_code_ttl: expected a duration up to 10m0s, got 20m0s"},
		{"engine price", "web_search {\n\t\t\tengine exa {\n\t\t\t\tprice_per_result -1\n\t\t\t}\n\t\t}", "web_search: engine exa: price_per_result"},
		{"native price", "web_search {\n\t\t\tnative_price cheap\n\t\t}", "web_search: native_price"},
		{"default engine", "web_search {\n\t\t\tdefault_engine exa\n\t\t}", `web_search: default_engine "exa"`},
		{"searxng base_url", "web_search {\n\t\t\tengine searxng\n\t\t}", "web_search: engine searxng: base_url is required"},
	}
	for _, tc := range caddyfiles {
		t.Run(tc.name, func(t *testing.T) {
			caddyfile := "{\n\ttollgate {\n\t\t" + tc.global + "\n\t}\n}" + site
			cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
			if err != nil {
				t.Fatalf("adapt: %v", err)
			}
			wantRefused(t, cfgJSON, tc.want)
		})
	}

	jsonApps := []struct{ name, app, want string }{
		{"gc_interval", `"gc_interval": -1`, "gc_interval: must not be negative"},
		{"generation_retention", `"generation_retention": 1800000000000`, "generation_retention: must be at least 1h, got 30m0s"},
		{"connect_code_ttl", `"connect_code_ttl": "11m"`, "connect_code_ttl: expected a duration up to 10m0s"},
		{"connect_code_ttl negative", `"connect_code_ttl": -1`, "connect_code_ttl: expected a duration up to 10m0s"},
		{"per_minute", `"free_model": {"per_minute": -1}`, "free_model: per_minute"},
		{"per_day", `"free_model": {"per_day": -5}`, "free_model: per_day"},
		{"per_day_paid", `"free_model": {"per_day_paid": -1}`, "free_model: per_day_paid"},
		{"paid_threshold", `"free_model": {"paid_threshold": "-1"}`, "free_model: paid_threshold"},
		{"engine timeout", `"web_search": {"engines": {"exa": {"timeout": -1}}}`, "web_search: engine exa: timeout"},
		{"max_results", `"web_search": {"engines": {"exa": {"max_results": 26}}}`, "web_search: engine exa: max_results"},
		{"engine name", `"web_search": {"engines": {"bing": {}}}`, `web_search: engine "bing": expected exa, firecrawl, parallel or searxng`},
		{"engine option", `"web_search": {"engines": {"exa": {"region": "eu"}}}`, `web_search: engine exa: json: unknown field "region"`},
		{"dialect option", `"models": [{"id": "m", "pricing": {"prompt": "0", "completion": "0"}, "providers": [{"name": "p", "base_url": "http://x", "dialect": {"style": "gemini", "deployment": "d"}}]}]`, `model "m": provider "p": deployment: not an option of style gemini`},
		{"fraction", `"in_flight": {"fraction": "2"}`, "in_flight: fraction"},
		{"settlement_window", `"in_flight": {"settlement_window": -1}`, "in_flight: settlement_window"},
		{"metrics_per_key", `"metrics_per_key": -1`, "metrics_per_key: expected 1 to 100000 keys"},
		{"metrics_per_key bound", `"metrics_per_key": 100001`, "metrics_per_key: expected 1 to 100000 keys"},
		// The Caddyfile adapter refuses these too (testdata/adapt/error_model_*).
		{"model price", `"models": [{"id": "m", "pricing": {"prompt": "x", "completion": "0"}}]`, `model "m": pricing.prompt`},
		{"model pricing missing", `"models": [{"id": "m"}]`, `model "m": pricing.prompt: required`},
		{"provider url", `"models": [{"id": "m", "pricing": {"prompt": "0", "completion": "0"}, "providers": [{"name": "p", "base_url": "ftp://x"}]}]`, `model "m": provider "p": base_url`},
		{"provider style", `"models": [{"id": "m", "pricing": {"prompt": "0", "completion": "0"}, "providers": [{"name": "p", "base_url": "http://x", "style": "claude"}]}]`, `model "m": provider "p": style: unsupported "claude"`},
		{"context_length", `"models": [{"id": "m", "context_length": -1, "pricing": {"prompt": "0", "completion": "0"}}]`, `model "m": context_length`},
		{"redis address missing", `"storage": {"redis": {}}`, "storage: redis: address: required"},
		{"redis address port", `"storage": {"redis": {"address": "localhost:99999"}}`, "storage: redis: address: port"},
		{"redis address placeholder", `"storage": {"redis": {"address": "{env.TOLLGATE_UNSET_REDIS_ADDR}"}}`, "storage: redis: address: required"},
		{"redis db", `"storage": {"redis": {"address": "localhost:6379", "db": -1}}`, "storage: redis: db"},
		{"redis hold_lease", `"storage": {"redis": {"address": "localhost:6379", "hold_lease": 1000}}`, "storage: redis: hold_lease"},
		{"redis address beside cluster", `"storage": {"redis": {"address": "localhost:6379", "cluster": ["localhost:7000"]}}`, "storage: redis: address and cluster"},
		{"redis cluster node", `"storage": {"redis": {"cluster": ["localhost:7000", "nohost"]}}`, `storage: redis: cluster: expected host:port, got "nohost"`},
		{"redis cluster db", `"storage": {"redis": {"cluster": ["localhost:7000"], "db": 2}}`, "storage: redis: db: a Redis Cluster has only database 0"},
	}
	for _, tc := range jsonApps {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, []byte(`{"apps": {"tollgate": {`+tc.app+`}}}`), tc.want)
		})
	}

	t.Run("provider proxy", func(t *testing.T) {
		wantRefused(t, []byte(`{"apps": {"tollgate": {"data_dir": "`+t.TempDir()+`"}, "http": {"servers": {"s": {"listen": [":0"], "routes": [{"handle": [
			{"handler": "tollgate", "https_proxy": {"handler": "static_response"}}]}]}}}}}`), "https_proxy: must be the reverse_proxy handler")
	})

	t.Run("mock latency", func(t *testing.T) {
		wantRefused(t, []byte(`{"apps": {"http": {"servers": {"s": {"listen": [":0"], "routes": [{"handle": [
			{"handler": "tollgate_mock_provider", "latency": -1}]}]}}}}}`), "latency must not be negative")
	})
}

// TestValidateAcceptsDefaults: the zero app is valid, so that a check
// above cannot refuse every config.
func TestValidateAcceptsDefaults(t *testing.T) {
	cfg := loadConfig(t, []byte(`{"apps": {"tollgate": {"data_dir": "`+t.TempDir()+`"}}}`))
	if err := caddy.Validate(cfg); err != nil {
		t.Fatal(err)
	}
}

func wantRefused(t *testing.T, cfgJSON []byte, want string) {
	t.Helper()
	err := caddy.Validate(loadConfig(t, cfgJSON))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate = %v, want an error naming %q", err, want)
	}
}

func loadConfig(t *testing.T, cfgJSON []byte) *caddy.Config {
	t.Helper()
	cfg := new(caddy.Config)
	if err := caddy.StrictUnmarshalJSON(cfgJSON, cfg); err != nil {
		t.Fatalf("config %s: %v", cfgJSON, err)
	}
	return cfg
}
