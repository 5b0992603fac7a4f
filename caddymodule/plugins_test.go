package caddymodule

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
)

// outsidePlugin is a plugin module registered from outside the gateway's
// packages, as a module built in with xcaddy build --with is.
type outsidePlugin struct {
	Word string `json:"word,omitempty"`
}

// outsideProvisioned counts the plugin's provisionings, and outsideWord
// is the word the last one was configured with.
var (
	outsideProvisioned atomic.Int32
	outsideWord        atomic.Value
)

func init() {
	caddy.RegisterModule(new(outsidePlugin))
}

func (*outsidePlugin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tollgate.plugins.test_outside", New: func() caddy.Module { return new(outsidePlugin) }}
}

func (p *outsidePlugin) Provision(caddy.Context) error {
	if p.Word == "refuse" {
		return errors.New("test_outside: refused")
	}
	outsideProvisioned.Add(1)
	outsideWord.Store(p.Word)
	return nil
}

func (*outsidePlugin) UnmarshalCaddyfile(*caddyfile.Dispenser) error { return nil }
func (*outsidePlugin) Name() string                                  { return "test-outside" }
func (*outsidePlugin) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, "test-outside", entry, nil)
}
func (*outsidePlugin) Plan(*plugin.Request) (plugin.Run, *apierror.Error) { return nil, nil }

// The handler loads every registered plugin module, the built-in ones
// and one from outside, each provisioned once; a plugin named in the
// handler's plugins map gets its configuration, and one that fails to
// provision, or is not registered, fails the config.
func TestHandlerLoadsPlugins(t *testing.T) {
	handler := func(plugins string) []byte {
		return []byte(`{"apps": {"tollgate": {"data_dir": "` + t.TempDir() + `"}, "http": {"servers": {"s": {"listen": [":0"], "routes": [{"handle": [
			{"handler": "tollgate"` + plugins + `}]}]}}}}}`)
	}
	outsideProvisioned.Store(0)
	if err := caddy.Validate(loadConfig(t, handler(""))); err != nil {
		t.Fatal(err)
	}
	if n := outsideProvisioned.Load(); n != 1 || outsideWord.Load() != "" {
		t.Fatalf("the outside plugin was provisioned %d times, word %q", n, outsideWord.Load())
	}
	outsideProvisioned.Store(0)
	if err := caddy.Validate(loadConfig(t, handler(`, "plugins": {"test_outside": {"word": "hello"}, "response_healing": {}}`))); err != nil {
		t.Fatal(err)
	}
	if n := outsideProvisioned.Load(); n != 1 || outsideWord.Load() != "hello" {
		t.Fatalf("the configured plugin was provisioned %d times, word %q", n, outsideWord.Load())
	}
	wantRefused(t, handler(`, "plugins": {"test_outside": {"word": "refuse"}}`), "test_outside: refused")
	wantRefused(t, handler(`, "plugins": {"no_such": {}}`), "tollgate.plugins.no_such")
	for _, info := range caddy.GetModules(plugin.Namespace) {
		if _, ok := info.New().(plugin.Plugin); !ok {
			t.Errorf("module %s is not a plugin", info.ID)
		}
	}
}
