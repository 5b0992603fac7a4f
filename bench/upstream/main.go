// Command upstream is bench/run.sh's upstream: the gateway's binary (Caddy
// with the tollgate plugin, whose mock provider answers the requests) plus
// a listener wrapper that counts the connections the server accepts, read
// from the admin API at /bench/conns. The benchmark reads the count before
// and after each gateway's turn: the connections that gateway opened to its
// upstream, which show whether its idle pool reuses them.
package main

import (
	"fmt"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/tollgate-dev/caddy-tollgate"
	_ "github.com/tollgate-dev/caddy-tollgate/standin"
)

func init() {
	caddy.RegisterModule(ConnCount{})
	caddy.RegisterModule(ConnCountAPI{})
}

func main() { caddycmd.Main() }

// accepted counts the connections every ConnCount listener accepted.
var accepted atomic.Uint64

// ConnCount is a listener wrapper counting accepted connections:
// `servers { listener_wrappers { bench_conns } }`.
type ConnCount struct{}

// CaddyModule returns the Caddy module information.
func (ConnCount) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.listeners.bench_conns", New: func() caddy.Module { return new(ConnCount) }}
}

// WrapListener counts what ln accepts.
func (ConnCount) WrapListener(ln net.Listener) net.Listener { return countingListener{ln} }

// UnmarshalCaddyfile takes no options.
func (*ConnCount) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

type countingListener struct{ net.Listener }

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		accepted.Add(1)
	}
	return c, err
}

// ConnCountAPI serves the count at the admin API's /bench/conns.
type ConnCountAPI struct{}

// CaddyModule returns the Caddy module information.
func (ConnCountAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.bench_conns", New: func() caddy.Module { return new(ConnCountAPI) }}
}

// Routes implements caddy.AdminRouter.
func (ConnCountAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{
		Pattern: "/bench/conns",
		Handler: caddy.AdminHandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
			_, err := fmt.Fprintln(w, accepted.Load())
			return err
		}),
	}}
}

// Interface guards
var (
	_ caddy.ListenerWrapper = ConnCount{}
	_ caddyfile.Unmarshaler = (*ConnCount)(nil)
	_ caddy.AdminRouter     = ConnCountAPI{}
)
