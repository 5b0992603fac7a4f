package export

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// Supported are the destination types the gateway exports to: webhook (a
// signed JSON POST) and the services that ingest OTLP/HTTP traces.
var Supported = []string{"grafana", "langfuse", "otel-collector", "webhook"}

// IsSupported reports whether the gateway can export to type t.
func IsSupported(t string) bool {
	for _, s := range Supported {
		if s == t {
			return true
		}
	}
	return false
}

// SignatureHeader carries a webhook body's signature: "sha256=" and the
// hex HMAC-SHA256 of the exact body bytes, keyed with the destination's
// secret.
const SignatureHeader = "X-Tollgate-Signature"

// DeliveryHeader carries a webhook batch's id, the same on every retry of
// that batch, so that a receiver can drop a repeated delivery.
const DeliveryHeader = "X-Tollgate-Delivery"

// Config is a destination's settings, with its secrets.
type Config map[string]any

// secretFields are the config fields masked in API answers, per type;
// header values are always masked.
var secretFields = map[string][]string{
	"webhook":  {"secret"},
	"langfuse": {"publicKey", "secretKey"},
	"grafana":  {"apiKey"},
}

// PrepareConfig checks a destination's config for its type and fills in
// defaults. prev is the current full config on update (nil on create): a
// webhook keeps its previous secret when the new config names none. It
// returns the full config (to seal) and whether a webhook secret was
// generated (to show once).
func PrepareConfig(typ string, raw json.RawMessage, prev Config) (Config, bool, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil || c == nil {
		return nil, false, fmt.Errorf("config: expected an object")
	}
	str := func(name string, required bool, def string) (string, error) {
		v, ok := c[name]
		if !ok || v == nil {
			if required {
				return "", fmt.Errorf("config.%s: required string for type %s", name, typ)
			}
			if def != "" {
				c[name] = def
			}
			return def, nil
		}
		s, ok := v.(string)
		if !ok || (required && strings.TrimSpace(s) == "") {
			return "", fmt.Errorf("config.%s: expected a non-empty string", name)
		}
		return s, nil
	}
	httpURL := func(name, s string) error {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("config.%s: expected an http or https URL", name)
		}
		return nil
	}
	if h, ok := c["headers"]; ok && h != nil {
		m, ok := h.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("config.headers: expected an object of strings")
		}
		for k, v := range m {
			if _, ok := v.(string); !ok || k == "" {
				return nil, false, fmt.Errorf("config.headers.%s: expected a string", k)
			}
		}
	}
	generated := false
	switch typ {
	case "webhook":
		u, err := str("url", true, "")
		if err == nil {
			err = httpURL("url", u)
		}
		if err != nil {
			return nil, false, err
		}
		m, err := str("method", false, "POST")
		if err != nil {
			return nil, false, err
		}
		if m = strings.ToUpper(m); m != "POST" && m != "PUT" {
			return nil, false, fmt.Errorf("config.method: expected POST or PUT")
		}
		c["method"] = m
		sec, err := str("secret", false, "")
		if err != nil {
			return nil, false, err
		}
		if sec == "" {
			if old, _ := prev["secret"].(string); old != "" {
				c["secret"] = old
			} else {
				var b [24]byte
				_, _ = rand.Read(b[:]) // crypto/rand does not fail (it panics if the system's source breaks)
				c["secret"] = "whsec_" + hex.EncodeToString(b[:])
				generated = true
			}
		}
	case "otel-collector":
		e, err := str("endpoint", true, "")
		if err == nil {
			err = httpURL("endpoint", e)
		}
		if err != nil {
			return nil, false, err
		}
	case "langfuse", "grafana":
		def := map[string]string{"langfuse": "https://us.cloud.langfuse.com", "grafana": "https://otlp-gateway-prod-us-west-0.grafana.net"}[typ]
		b, err := str("baseUrl", false, def)
		if err == nil {
			err = httpURL("baseUrl", b)
		}
		if err != nil {
			return nil, false, err
		}
		need := map[string][]string{"langfuse": {"publicKey", "secretKey"}, "grafana": {"instanceId", "apiKey"}}[typ]
		for _, n := range need {
			if _, err := str(n, true, ""); err != nil {
				return nil, false, err
			}
		}
	default:
		return nil, false, fmt.Errorf("type: the gateway cannot export to %q; supported types: %s", typ, strings.Join(Supported, ", "))
	}
	return c, generated, nil
}

// Public returns the config as API answers show it: secrets and header
// values masked.
func Public(typ string, c Config) Config {
	out := make(Config, len(c))
	for k, v := range c {
		out[k] = v
	}
	for _, f := range secretFields[typ] {
		if s, ok := out[f].(string); ok {
			out[f] = Mask(s)
		}
	}
	if h, ok := out["headers"].(map[string]any); ok {
		m := make(map[string]any, len(h))
		for k, v := range h {
			s, _ := v.(string)
			m[k] = Mask(s)
		}
		out["headers"] = m
	}
	return out
}

// Mask shows a few characters of each end of a long secret, none of a
// short one, e.g. "sk-l...AbCd".
func Mask(s string) string {
	r := []rune(s)
	if len(r) >= 16 {
		return string(r[:4]) + "..." + string(r[len(r)-4:])
	}
	return "..."
}

// otlpTarget is where an OTLP destination's traces go, with its headers.
func otlpTarget(typ string, c Config) (endpoint string, headers map[string]string) {
	headers = map[string]string{}
	if h, ok := c["headers"].(map[string]any); ok {
		keys := make([]string, 0, len(h))
		for k := range h {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			headers[k], _ = h[k].(string)
		}
	}
	s := func(name string) string { v, _ := c[name].(string); return v }
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	switch typ {
	case "otel-collector":
		endpoint = s("endpoint")
		if u, err := url.Parse(endpoint); err == nil && (u.Path == "" || u.Path == "/") {
			endpoint = strings.TrimSuffix(endpoint, "/") + "/v1/traces"
		}
	case "langfuse":
		endpoint = strings.TrimSuffix(s("baseUrl"), "/") + "/api/public/otel/v1/traces"
		headers["Authorization"] = basic(s("publicKey"), s("secretKey"))
	case "grafana":
		endpoint = strings.TrimSuffix(s("baseUrl"), "/") + "/otlp/v1/traces"
		headers["Authorization"] = basic(s("instanceId"), s("apiKey"))
	}
	return endpoint, headers
}

// URLField names the field of a prepared config that holds the URL the
// exporter connects to, and its value ("" when the type has none).
func URLField(typ string, c Config) (name, value string) {
	switch typ {
	case "webhook":
		name = "url"
	case "otel-collector":
		name = "endpoint"
	case "langfuse", "grafana":
		name = "baseUrl"
	default:
		return "", ""
	}
	value, _ = c[name].(string)
	return name, value
}
