package handlers

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/rewrite"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

// The placeholders through which the router points reverse_proxy at the
// provider of each attempt (Route.Placeholder).
const (
	upstreamDial       = "{tollgate.upstream.dial}"
	upstreamURI        = "{tollgate.upstream.uri}"
	upstreamServerName = "{tollgate.upstream.server_name}"
)

// providerProxies are Caddy's own reverse_proxy handlers, one for HTTPS
// providers and one for plain HTTP, provisioned inside the tollgate
// handler: no route leads to them, so no request reaches a provider but
// through the meter, and no matcher runs per request to pick one.
type providerProxies struct{ https, http caddyhttp.Handler }

func (p *providerProxies) Forward(pr *catalog.Provider) caddyhttp.Handler {
	if pr.Scheme == "https" {
		return p.https
	}
	return p.http
}

// ConfigureProviderProxy makes rp the pipeline's reverse_proxy: its
// upstream and path are the attempt's provider, and for HTTPS providers it
// speaks TLS (the operator's `transport http { tls ... }` settings, if
// any) to the provider's host name, since a private endpoint is dialed at
// its checked IP address. rp may carry an operator's other settings (header_up,
// timeouts, flush_interval, ...), but no upstreams of its own.
//
// Its flush interval stays Caddy's default: reverse_proxy flushes every
// write of an event stream (text/event-stream), of a body without a
// length and of incremental answers by itself, so streams are never
// buffered; a JSON answer of known length, which the meter holds whole
// anyway, is copied without the per-request flush timer that
// flush_interval -1 would start.
func ConfigureProviderProxy(rp *reverseproxy.Handler, https bool) error {
	if len(rp.Upstreams) > 0 || rp.DynamicUpstreamsRaw != nil {
		return fmt.Errorf("the upstream is the provider the gateway picks for each request; remove to and dynamic")
	}
	rp.Upstreams = reverseproxy.UpstreamPool{{Dial: upstreamDial}}
	rp.Rewrite = &rewrite.Rewrite{URI: upstreamURI}
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
// defaults of ConfigureProviderProxy where the config has none, with a
// lane for the timeouts of each of cat's providers.
func (t *Tollgate) loadProxies(ctx caddy.Context, cat *catalog.Catalog) (*providerProxies, error) {
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
		idleSet := gjson.GetBytes(*proxy.raw, "transport.keep_alive.max_idle_conns_per_host").Exists()
		raw, dial, err := widenDial(*proxy.raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", proxy.name, err)
		}
		*proxy.raw = raw
		mod, err := ctx.LoadModule(t, proxy.field)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", proxy.name, err)
		}
		rp, ok := mod.(*reverseproxy.Handler)
		if !ok {
			return nil, fmt.Errorf("%s: must be the reverse_proxy handler, got %T", proxy.name, mod)
		}
		if err := addProviderKeys(rp, dial); err != nil {
			return nil, fmt.Errorf("%s: %v", proxy.name, err)
		}
		if fb := time.Duration(t.FirstByteTimeout); fb > 0 {
			limits(rp).firstByte = fb
		}
		if !idleSet {
			keepProviderConns(rp)
		}
		if err := limits(rp).addLanes(ctx, []byte(gjson.GetBytes(*proxy.raw, "transport").Raw), idleSet, providersOver(cat, proxy.https)); err != nil {
			return nil, fmt.Errorf("%s: %v", proxy.name, err)
		}
		if loadedProxy != nil {
			loadedProxy(rp)
		}
		*proxy.h = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return rp.ServeHTTP(w, r, answered)
		})
	}
	return p, nil
}

// limits is the timeouts of a proxy addProviderKeys set up.
func limits(rp *reverseproxy.Handler) *upstreamTimeouts { return rp.Transport.(keyTransport).limits }

// providersOver is cat's providers reached over HTTPS, or over HTTP.
func providersOver(cat *catalog.Catalog, https bool) []*catalog.Provider {
	var out []*catalog.Provider
	for _, m := range cat.Models() {
		for _, p := range m.Providers {
			if (p.Scheme == "https") == https {
				out = append(out, p)
			}
		}
	}
	return out
}

// loadedProxy, when set (by tests), sees each provider proxy
// loadProxies provisioned.
var loadedProxy func(*reverseproxy.Handler)

// providerIdleConns is how many idle connections to one provider host
// the provider proxies keep, unless the operator's transport sets
// keep_alive max_idle_conns_per_host. Caddy's default (32) is below a
// busy gateway's concurrency to one provider: each request beyond it
// would open a connection (and a TLS handshake) and close another.
const providerIdleConns = 1024

// keepProviderConns raises a provisioned provider proxy's idle pool per
// host to providerIdleConns, before it serves anything.
func keepProviderConns(rp *reverseproxy.Handler) {
	var ht *reverseproxy.HTTPTransport
	switch tr := rp.Transport.(type) {
	case keyTransport:
		ht = tr.HTTPTransport
	case *reverseproxy.HTTPTransport:
		ht = tr
	}
	if ht != nil {
		keepIdleConns(ht)
	}
}

// keepIdleConns raises ht's idle pool per host to providerIdleConns.
func keepIdleConns(ht *reverseproxy.HTTPTransport) {
	if ht.Transport == nil {
		return
	}
	ht.Transport.MaxIdleConnsPerHost = max(ht.Transport.MaxIdleConnsPerHost, providerIdleConns)
	if ht.KeepAlive != nil {
		ht.KeepAlive.MaxIdleConnsPerHost = ht.Transport.MaxIdleConnsPerHost
	}
}

// addProviderKeys makes a provisioned reverse_proxy send each attempt with
// its provider key and within its provider's timeouts (keyTransport; dial
// is the proxy's default dial timeout), and drops the rewrite to the
// attempt's URI that ConfigureProviderProxy configures: the meter points
// each attempt's request at that URI itself (Route.WithUpstreamURI). A
// rewrite with other settings stays, and rewrites the URI again to the
// same.
func addProviderKeys(rp *reverseproxy.Handler, dial time.Duration) error {
	ht, ok := rp.Transport.(*reverseproxy.HTTPTransport)
	if !ok {
		return fmt.Errorf("providers are reached over HTTP; transport %T is not supported", rp.Transport)
	}
	rp.Transport = keyTransport{ht, upstreamLimits(ht, dial)}
	if onlyUpstreamURI(rp.Rewrite) {
		rp.Rewrite = nil
	}
	return nil
}

// onlyUpstreamURI reports whether rw is ConfigureProviderProxy's rewrite
// and nothing else.
func onlyUpstreamURI(rw *rewrite.Rewrite) bool {
	return rw != nil && rw.URI == upstreamURI && rw.Method == "" && rw.StripPathPrefix == "" &&
		rw.StripPathSuffix == "" && len(rw.URISubstring) == 0 && len(rw.PathRegexp) == 0 && rw.Query == nil
}

// keyTransport is the provider proxies' transport: Caddy's HTTP transport,
// sending the request with the attempt's provider key (the operator's, or
// the account's BYOK key) added to a copy of its header that only the
// transport sees. reverse_proxy logs the request it proxies, its headers
// included, at DEBUG and, when a stream ends early, at WARN; it redacts
// Authorization but not x-api-key, and nothing with log_credentials. The
// key is never on that request, so no log line of any level can hold it.
// Its other interfaces (TLS, PROXY protocol, ...) are HTTPTransport's.
// It bounds each attempt's waits by its provider's timeouts (limits).
type keyTransport struct {
	*reverseproxy.HTTPTransport
	limits *upstreamTimeouts
}

// RoundTrip sends req with its provider key, within its timeouts.
func (t keyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	out, err := withProviderKey(req)
	if err != nil {
		return nil, err
	}
	rt := metering.AttemptRoute(req)
	if rt == nil || t.limits == nil {
		return t.HTTPTransport.RoundTrip(out)
	}
	return t.roundTrip(out, rt.Provider, rt.Stream)
}

// withProviderKey is req, as its provider receives it: a shallow copy
// whose header is a copy with the current attempt's key in the provider's
// dialect (setProviderKey). req itself, which reverse_proxy logs, is not
// changed. Without a route, req is sent as it is. A request its dialect
// cannot sign with the key is not sent: unsigned, the provider would
// answer with a 403 that hides the gateway's own failure.
func withProviderKey(req *http.Request) (*http.Request, error) {
	rt := metering.AttemptRoute(req)
	if rt == nil || rt.Key == "" {
		return req, nil
	}
	out := &rt.Keyed
	if rt.KeyedUsed {
		out = new(http.Request)
	}
	rt.KeyedUsed = true
	*out = *req
	// The runtime copies the map's groups as they are: no entry is hashed
	// and inserted again, as a copy entry by entry would.
	out.Header = maps.Clone(req.Header)
	if out.Header == nil {
		out.Header = make(http.Header, 1)
	}
	if s, ok := rt.Dialect.(dialect.Signer); ok {
		if err := s.Sign(out, rt.Sent, rt.Key); err != nil {
			// The error names the key's expected form, never the key.
			return nil, fmt.Errorf("signing the request to provider %s: %w", rt.Provider.Name, err)
		}
		if v := out.Header["Authorization"]; len(v) > 0 {
			rt.Signature = upstream.SignatureOf(v[0])
		}
	} else if name, value, ok := rt.Provider.KeyEntry(rt.Dialect, rt.Key); ok {
		out.Header[name] = value // made once for the operator's key; only read
	} else {
		rt.Dialect.SetKey(out.Header, rt.Key)
	}
	return out, nil
}

// answered ends the chain after reverse_proxy, which has written the
// answer (its handle_response routes may fall through to it).
var answered = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
