// Package echo is an example third-party plugin, the Caddy module
// tollgate.plugins.echo: a request that asks for it
// ({"plugins":[{"id":"echo","value":"abc"}]}) gets its value back in a
// header of the answer (X-Echo, or the header the operator names). It
// costs nothing and leaves the body alone. It is not linked into the
// gateway's build: `xcaddy build --with` adds it, as examples/xcaddy-echo
// shows.
package echo

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
)

func init() { caddy.RegisterModule(new(Echo)) }

// name is the plugin's id in a request's plugins array.
const name = "echo"

// Echo is the plugin; Header is the answer's header that carries the
// value.
type Echo struct {
	Header string `json:"header,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*Echo) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tollgate.plugins.echo", New: func() caddy.Module { return new(Echo) }}
}

// Provision sets the default header.
func (e *Echo) Provision(caddy.Context) error {
	if e.Header == "" {
		e.Header = "X-Echo"
	}
	return nil
}

// UnmarshalCaddyfile reads the plugin's directive:
//
//	echo {
//		header <name>
//	}
func (e *Echo) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the plugin's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "header":
			if !d.AllArgs(&e.Header) {
				return d.ArgErr()
			}
		default:
			return d.Errf("unknown option %q of the echo plugin", d.Val())
		}
	}
	return nil
}

// Name implements plugin.Plugin.
func (*Echo) Name() string { return name }

// CheckEntry implements plugin.Plugin: value, a short string of visible
// ASCII, is the entry's one member besides id and enabled.
func (*Echo) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, name, entry, func(member string, v gjson.Result) (bool, *apierror.Error) {
		if member != "value" {
			return false, nil
		}
		if v.Type != gjson.String || len(v.Str) > 64 || !visible(v.Str) {
			return true, apierror.BadRequest(path + ".value: expected a string of at most 64 visible ASCII characters")
		}
		return true, nil
	})
}

func visible(s string) bool {
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Plan implements plugin.Plugin: the value to echo, nil when the request
// does not ask for the plugin.
func (e *Echo) Plan(req *plugin.Request) (plugin.Run, *apierror.Error) {
	entry, i := plugin.Entry(req.Plugins, name)
	if i < 0 {
		return nil, nil
	}
	return &run{header: e.Header, value: entry.Get("value").Str}, nil
}

// run is one request's echo.
type run struct{ header, value string }

// WrapAnswer implements plugin.AnswerWrapper: the header is set before
// the answer's own.
func (r *run) WrapAnswer(w http.ResponseWriter) http.ResponseWriter {
	w.Header().Set(r.header, r.value)
	return w
}

// FinishAnswer implements plugin.AnswerWrapper: nothing was held back.
func (*run) FinishAnswer() {}

// Interface guards
var (
	_ plugin.Plugin         = (*Echo)(nil)
	_ caddy.Provisioner     = (*Echo)(nil)
	_ caddyfile.Unmarshaler = (*Echo)(nil)
	_ plugin.AnswerWrapper  = (*run)(nil)
)
