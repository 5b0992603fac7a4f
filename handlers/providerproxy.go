package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/rewrite"

	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
)

// The placeholders through which the router points reverse_proxy at the
// provider of each attempt (Route.placeholder).
const (
	upstreamDial       = "{tollgate.upstream.dial}"
	upstreamURI        = "{tollgate.upstream.uri}"
	upstreamServerName = "{tollgate.upstream.server_name}"
)

// providers is where the meter sends each attempt: the handler that
// carries a request to the attempt's provider.
type providers interface {
	forward(p *catalog.Provider) caddyhttp.Handler
}

// providerProxies are Caddy's own reverse_proxy handlers, one for HTTPS
// providers and one for plain HTTP, provisioned inside the tollgate
// handler: no route leads to them, so no request reaches a provider but
// through the meter, and no matcher runs per request to pick one.
type providerProxies struct{ https, http caddyhttp.Handler }

func (p *providerProxies) forward(pr *catalog.Provider) caddyhttp.Handler {
	if pr.Scheme == "https" {
		return p.https
	}
	return p.http
}

// ConfigureProviderProxy makes rp the pipeline's reverse_proxy: its
// upstream and path are the attempt's provider, it flushes every write
// (streams are never buffered), and for HTTPS providers it speaks TLS (the
// operator's `transport http { tls ... }` settings, if any) to the
// provider's host name, since a private endpoint is dialed at its checked
// IP address. rp may carry an operator's other settings (header_up,
// timeouts, ...), but no upstreams of its own.
func ConfigureProviderProxy(rp *reverseproxy.Handler, https bool) error {
	if len(rp.Upstreams) > 0 || rp.DynamicUpstreamsRaw != nil {
		return fmt.Errorf("the upstream is the provider the gateway picks for each request; remove to and dynamic")
	}
	rp.Upstreams = reverseproxy.UpstreamPool{{Dial: upstreamDial}}
	rp.Rewrite = &rewrite.Rewrite{URI: upstreamURI}
	rp.FlushInterval = -1
	var transport reverseproxy.HTTPTransport
	if rp.TransportRaw != nil {
		var proto struct {
			Protocol string `json:"protocol"`
		}
		if err := json.Unmarshal(rp.TransportRaw, &proto); err != nil {
			return err
		}
		if proto.Protocol != "http" {
			return fmt.Errorf("providers are reached over HTTP; transport %q is not supported", proto.Protocol)
		}
		if err := json.Unmarshal(rp.TransportRaw, &transport); err != nil {
			return err
		}
	}
	switch {
	case !https:
		transport.TLS = nil
	case transport.TLS == nil:
		transport.TLS = &reverseproxy.TLSConfig{ServerName: upstreamServerName}
	case transport.TLS.ServerName == "":
		transport.TLS.ServerName = upstreamServerName
	}
	if https || rp.TransportRaw != nil {
		rp.TransportRaw = caddyconfig.JSONModuleObject(transport, "protocol", "http", nil)
	}
	return nil
}

// loadProxies provisions the handler's reverse_proxy handlers, the
// defaults of ConfigureProviderProxy where the config has none.
func (t *Tollgate) loadProxies(ctx caddy.Context) (*providerProxies, error) {
	p := new(providerProxies)
	for _, proxy := range []struct {
		name, field string // the JSON name and the struct field
		raw         *json.RawMessage
		https       bool
		h           *caddyhttp.Handler
	}{
		{"https_proxy", "HTTPSProxyRaw", &t.HTTPSProxyRaw, true, &p.https},
		{"http_proxy", "HTTPProxyRaw", &t.HTTPProxyRaw, false, &p.http},
	} {
		if *proxy.raw == nil {
			rp := new(reverseproxy.Handler)
			if err := ConfigureProviderProxy(rp, proxy.https); err != nil {
				return nil, err
			}
			*proxy.raw = caddyconfig.JSONModuleObject(rp, "handler", "reverse_proxy", nil)
		}
		mod, err := ctx.LoadModule(t, proxy.field)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", proxy.name, err)
		}
		rp, ok := mod.(*reverseproxy.Handler)
		if !ok {
			return nil, fmt.Errorf("%s: must be the reverse_proxy handler, got %T", proxy.name, mod)
		}
		*proxy.h = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return rp.ServeHTTP(w, r, answered)
		})
	}
	return p, nil
}

// answered ends the chain after reverse_proxy, which has written the
// answer (its handle_response routes may fall through to it).
var answered = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
