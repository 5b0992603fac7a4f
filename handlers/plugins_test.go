package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// pricedPlugin is a plugin from outside the gateway: it costs its price
// and marks the answer.
type pricedPlugin struct{ price money.Amount }

func (*pricedPlugin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tollgate.plugins.test_priced", New: func() caddy.Module { return new(pricedPlugin) }}
}
func (*pricedPlugin) UnmarshalCaddyfile(*caddyfile.Dispenser) error { return nil }
func (*pricedPlugin) Name() string                                  { return "test-priced" }
func (*pricedPlugin) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, "test-priced", entry, nil)
}
func (p *pricedPlugin) Plan(req *plugin.Request) (plugin.Run, *apierror.Error) {
	if _, i := plugin.Entry(req.Plugins, "test-priced"); i < 0 {
		return nil, nil
	}
	return &pricedRun{price: p.price}, nil
}

type pricedRun struct {
	price    money.Amount
	w        http.ResponseWriter
	finished bool
}

func (r *pricedRun) Hold() money.Amount   { return r.price }
func (r *pricedRun) Charge() money.Amount { return r.price }
func (r *pricedRun) WrapAnswer(w http.ResponseWriter) http.ResponseWriter {
	w.Header().Set("X-Test-Priced", "yes")
	r.w = w
	return w
}
func (r *pricedRun) FinishAnswer() { r.finished = true }

// A plugin the gateway loads is asked for by its name, checked, held and
// charged by the meter, and wraps the answer; a name no plugin takes is
// still a 400.
func TestPluginSeam(t *testing.T) {
	f := newStoreFixture(t)
	const price = 7 * money.AmountScale / 100
	f.tg.plugins = append(plugin.Set{&pricedPlugin{price: price}}, f.tg.plugins...)
	f.tg.router.Plugins = f.tg.plugins
	usage := func() money.Amount {
		k, _ := f.gw.Storage.APIKey(storage.HashSecret(f.regular))
		return k.Usage.Total
	}
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]`
	if res := f.send(t, "POST", "/api/v1/chat/completions", f.regular, body+`}`); res.Status != http.StatusOK || res.Header.Get("X-Test-Priced") != "" {
		t.Fatalf("without the plugin: %d %v %s", res.Status, res.Header, res.Body)
	}
	plain := usage()
	res := f.send(t, "POST", "/api/v1/chat/completions", f.regular, body+`,"plugins":[{"id":"test-priced"}]}`)
	if res.Status != http.StatusOK || res.Header.Get("X-Test-Priced") != "yes" {
		t.Fatalf("with the plugin: %d %v %s", res.Status, res.Header, res.Body)
	}
	if got := usage() - plain; got != plain+price {
		t.Fatalf("the request with the plugin charged %s, want %s and the plugin's %s", got, plain, money.Amount(price))
	}
	f.send(t, "POST", "/api/v1/chat/completions", f.regular, body+`,"plugins":[{"id":"test-priced","x":1}]}`).
		WantError(t, http.StatusBadRequest, "plugins[0].x: unknown field of the test-priced plugin")
	f.send(t, "POST", "/api/v1/chat/completions", f.regular, body+`,"plugins":[{"id":"test-unknown"}]}`).
		WantError(t, http.StatusBadRequest, `plugins[0].id: unknown plugin "test-unknown"`)
}

// The handler's own directive reads the plugins block as the tollgate
// directive does: each plugin by its module name, with its own directive.
func TestUnmarshalPlugins(t *testing.T) {
	tg := new(Tollgate)
	d := caddyfile.NewTestDispenser("tollgate {\n\tmax_body_bytes 10\n\tplugins {\n\t\tresponse_healing\n\t\tfile_parser\n\t}\n\tper_key 1 1m\n}")
	if err := tg.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if len(tg.PluginsRaw) != 2 || string(tg.PluginsRaw["response_healing"]) != "{}" || tg.MaxBodyBytes != 10 || tg.PerKey == nil {
		t.Fatalf("read %+v", tg)
	}
	for input, want := range map[string]string{
		"tollgate {\n\tplugins {\n\t\tno_such\n\t}\n}":                                  "module not registered: tollgate.plugins.no_such",
		"tollgate {\n\tplugins {\n\t\tresponse_healing x\n\t}\n}":                       "wrong argument count",
		"tollgate {\n\tplugins {\n\t\tfile_parser\n\t\tfile_parser\n\t}\n}":             "plugins: file_parser configured twice",
		"tollgate {\n\tplugins {\n\t\tresponse_healing {\n\t\t\tlevel 2\n\t\t}\n\t}\n}": `unknown option "level" of the response_healing plugin`,
	} {
		err := new(Tollgate).UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", input, err, want)
		}
	}
}
