package plugin_test

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// stamp is a plugin as a third party would write one: it takes a
// price, holds and charges it, and says so in a header of the answer.
type stamp struct {
	Price money.Amount `json:"price,omitempty"`
}

func (*stamp) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tollgate.plugins.test_stamp", New: func() caddy.Module { return new(stamp) }}
}

func (s *stamp) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	for d.NextBlock(0) {
		return d.Errf("unknown option %q", d.Val())
	}
	return nil
}

func (*stamp) Name() string { return "test-stamp" }

func (*stamp) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, "test-stamp", entry, func(name string, v gjson.Result) (bool, *apierror.Error) {
		if name != "mark" {
			return false, nil
		}
		if v.Type != gjson.String {
			return true, apierror.BadRequest(path + ".mark: expected a string")
		}
		return true, nil
	})
}

type stampRun struct{ price money.Amount }

func (r stampRun) Hold() money.Amount   { return r.price }
func (r stampRun) Charge() money.Amount { return r.price }

func (s *stamp) Plan(req *plugin.Request) (plugin.Run, *apierror.Error) {
	if _, i := plugin.Entry(req.Plugins, "test-stamp"); i < 0 {
		return nil, nil
	}
	return &stampRun{price: s.Price}, nil
}

func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Case{
		Plugin: &stamp{Price: 3},
		Kind:   dialect.Chat,
		Asks:   `{"plugins":[{"id":"web"},{"id":"test-stamp","mark":"x"}]}`,
	})
}

func TestEntry(t *testing.T) {
	for body, want := range map[string]int{
		`{"plugins":[{"id":"web"},{"id":"test-stamp"}]}`:                                   1,
		`{"plugins":[{"id":"test-stamp","enabled":false},{"id":"test-stamp","mark":"a"}]}`: 1,
		`{"plugins":[{"id":"test-stamp","enabled":false}]}`:                                -1,
		`{"messages":[{"content":"test-stamp"}],"plugins":[]}`:                             -1,
		`{}`: -1,
	} {
		if _, i := plugin.Entry(gjson.Get(body, "plugins"), "test-stamp"); i != want {
			t.Errorf("Entry(%s) = %d, want %d", body, i, want)
		}
	}
}

func TestCheckMembers(t *testing.T) {
	p := new(stamp)
	for entry, want := range map[string]string{
		`{"id":"test-stamp","mark":"a","enabled":true}`: "",
		`{"id":"test-stamp","mark":1}`:                  "plugins[0].mark: expected a string",
		`{"id":"test-stamp","enabled":"yes"}`:           "plugins[0].enabled: expected a boolean",
		`{"id":"test-stamp","other":1}`:                 "plugins[0].other: unknown field of the test-stamp plugin",
	} {
		apiErr := p.CheckEntry("plugins[0]", gjson.Parse(entry))
		if (apiErr == nil) != (want == "") || (apiErr != nil && apiErr.Message != want) {
			t.Errorf("CheckEntry(%s) = %v, want %q", entry, apiErr, want)
		}
	}
}

func TestSet(t *testing.T) {
	s := plugin.Set{new(stamp)}
	if s.Lookup("test-stamp") == nil || s.Lookup("stamp") != nil {
		t.Fatal("Lookup")
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	s = append(s, new(stamp))
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), `"test-stamp"`) {
		t.Fatalf("Validate of a name taken twice = %v", err)
	}
}

var _ plugin.Plugin = (*stamp)(nil)

// A plugin without options takes its name alone; anything more is refused
// with the plugin's name and the note.
func TestNoOptions(t *testing.T) {
	for in, want := range map[string]string{
		"stamp":                 "",
		"stamp {\n}":            "",
		"stamp extra":           "wrong argument count",
		"stamp {\n\tlevel 2\n}": `unknown option "level" of the stamp plugin (see the global block)`,
	} {
		err := plugin.NoOptions(caddyfile.NewTestDispenser(in), "stamp", " (see the global block)")
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", in, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: got %v, want an error containing %s", in, err, want)
		}
	}
}
