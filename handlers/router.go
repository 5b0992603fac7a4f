package handlers

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
)

// Router prepares inference requests for reverse_proxy: it checks the JSON
// body with a 400 that names the wrong field, so that malformed requests
// never reach a provider, asks the upstream for an identity-encoded answer
// so that the gateway can read usage from it, and sets the placeholder
// {tollgate.upstream.uri}: the request's path below /api/v1 under the
// upstream's base path, with the query, for reverse_proxy's rewrite.
type Router struct {
	// MaxBodyBytes bounds inference request bodies. Default 16 MiB.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// UpstreamBasePath is the upstream's API root. Default "/v1".
	UpstreamBasePath string `json:"upstream_base_path,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*Router) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tollgate_router",
		New: func() caddy.Module { return new(Router) },
	}
}

// Provision sets defaults.
func (rt *Router) Provision(caddy.Context) error {
	if rt.MaxBodyBytes == 0 {
		rt.MaxBodyBytes = 16 << 20
	}
	if rt.UpstreamBasePath == "" {
		rt.UpstreamBasePath = "/v1"
	}
	rt.UpstreamBasePath = strings.TrimSuffix(rt.UpstreamBasePath, "/")
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	kind, sub, ok := classifyRoute(r.URL.Path)
	if !ok || (kind != routeInference && kind != routePublic) {
		return next.ServeHTTP(w, r)
	}
	uri := rt.UpstreamBasePath + sub
	if r.URL.RawQuery != "" {
		uri += "?" + r.URL.RawQuery
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("tollgate.upstream.uri", uri)
	}
	if r.Method != http.MethodPost {
		return next.ServeHTTP(w, r)
	}
	body, apiErr := readBody(w, r, rt.MaxBodyBytes)
	if apiErr == nil {
		apiErr = validateInference(sub, body)
	}
	if apiErr != nil {
		WriteError(w, apiErr)
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	r.Header.Del("Accept-Encoding")
	return next.ServeHTTP(w, r)
}

// validateInference checks the fields every inference route shares and the
// route's own input field.
func validateInference(sub string, body []byte) *APIError {
	f, apiErr := parseObject(body)
	if apiErr != nil {
		return apiErr
	}
	model, ok := f.String("model")
	if f.err == nil && (!ok || model == "") {
		if v, present := f.get("models"); !present || !v.IsArray() {
			return BadRequest("model: required string")
		}
	}
	f.Bool("stream")
	for _, name := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if v, ok := f.get(name); ok && v.Type != gjson.Null && (v.Type != gjson.Number || v.Int() < 1 || v.Float() != float64(v.Int())) {
			f.fail(name, "a positive integer")
		}
	}
	switch sub {
	case "/chat/completions":
		if v, ok := f.get("messages"); !ok || !v.IsArray() {
			f.fail("messages", "an array of messages")
		}
	case "/responses":
		if v, ok := f.get("input"); ok && v.Type != gjson.String && !v.IsArray() {
			f.fail("input", "a string or an array of input items")
		}
	}
	return f.err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Router)(nil)
	_ caddyhttp.MiddlewareHandler = (*Router)(nil)
)
