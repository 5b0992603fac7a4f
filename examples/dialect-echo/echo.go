// Package echo is an example third-party dialect: a provider that speaks
// OpenAI's chat completions but takes its key in X-Echo-Key and a
// greeting header of the operator's choosing. It is one package and one
// registration (init); a gateway built with it (xcaddy build --with
// .../examples/dialect-echo) takes
//
//	provider echo https://echo.example/v1 {
//		style echo {
//			greeting hello
//		}
//	}
package echo

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/openai"
)

func init() { caddy.RegisterModule(Module{}) }

// Style is the dialect's name: the module tollgate.dialects.echo.
const Style = "echo"

// Module is the echo dialect's module; its field is its one option.
type Module struct {
	// Greeting is sent in X-Echo-Greeting with every request.
	Greeting string `json:"greeting,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: dialect.Namespace + "." + Style, New: func() caddy.Module { return new(Module) }}
}

// UnmarshalCaddyfile reads `echo { greeting <text> }`.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return dialect.UnmarshalOptions(d, Style, map[string]*string{"greeting": &m.Greeting})
}

// Validate refuses a greeting longer than the vendor takes.
func (m *Module) Validate() error {
	if len(m.Greeting) > 64 {
		return errors.New("greeting: at most 64 bytes")
	}
	return nil
}

// New builds the dialect of one provider block.
func (m *Module) New(o dialect.Options) (dialect.Dialect, error) {
	base, err := openai.New(o)
	if err != nil {
		return nil, err
	}
	return &Dialect{Dialect: base.(*openai.Dialect), greeting: m.Greeting}, nil
}

// Dialect is OpenAI's, with its own key and greeting headers.
type Dialect struct {
	*openai.Dialect
	greeting string
}

// Name implements dialect.Dialect.
func (d *Dialect) Name() string { return Style }

// SetHeaders implements dialect.Dialect: the greeting, and no credential.
func (d *Dialect) SetHeaders(h http.Header) {
	d.Dialect.SetHeaders(h)
	delete(h, "X-Echo-Key")
	if d.greeting != "" {
		h["X-Echo-Greeting"] = []string{d.greeting}
	}
}

// SetKey implements dialect.Dialect: the key in X-Echo-Key.
func (d *Dialect) SetKey(h http.Header, key string) { h["X-Echo-Key"] = []string{key} }

var (
	_ dialect.Module        = (*Module)(nil)
	_ caddy.Validator       = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
)
