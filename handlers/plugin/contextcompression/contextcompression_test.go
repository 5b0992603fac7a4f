package contextcompression

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
)

func TestConformance(t *testing.T) {
	turns := make([]string, 0, 12)
	for range 10 {
		turns = append(turns, `{"role":"user","content":"`+strings.Repeat("filler ", 10)+`"}`)
	}
	plugintest.Run(t, plugintest.Case{
		Plugin: new(Compression),
		Kind:   dialect.Chat,
		Fits:   `{"model":"m","plugins":[{"id":"context-compression"}],"messages":[` + strings.Join(turns, ",") + `]}`,
	})
}

func TestAsked(t *testing.T) {
	for _, tc := range []struct {
		transforms, plugins string
		asked               bool
		err                 string
	}{
		{`["middle-out"]`, ``, true, ""},
		{``, `[{"id":"context-compression"}]`, true, ""},
		{``, `[{"id":"context-compression","enabled":false}]`, false, ""},
		{``, `[{"id":"context-compression","enabled":false},{"id":"context-compression"}]`, true, ""},
		{`[]`, ``, false, ""},
		{`null`, ``, false, ""},
		{`["fuzz"]`, ``, false, `transforms[0]: unknown transform "fuzz"`},
		{`["middle-out",3]`, ``, false, `transforms[1]: unknown transform 3`},
		{`"middle-out"`, ``, false, "transforms: expected an array"},
	} {
		ask, apiErr := asked(gjson.Parse(tc.transforms), gjson.Parse(tc.plugins))
		if tc.err != "" {
			if apiErr == nil || !strings.HasPrefix(apiErr.Message, tc.err) {
				t.Errorf("%s %s: %v, want %q", tc.transforms, tc.plugins, apiErr, tc.err)
			}
			continue
		}
		if apiErr != nil || ask != tc.asked {
			t.Errorf("%s %s: %v %v", tc.transforms, tc.plugins, ask, apiErr)
		}
	}
}

func TestEngine(t *testing.T) {
	c := new(Compression)
	if apiErr := c.CheckEntry("plugins[0]", gjson.Parse(`{"id":"context-compression","engine":"middle-out"}`)); apiErr != nil {
		t.Error(apiErr)
	}
	for _, e := range []string{`"summary"`, `null`, `1`} {
		if apiErr := c.CheckEntry("plugins[0]", gjson.Parse(`{"id":"context-compression","engine":`+e+`}`)); apiErr == nil || !strings.HasPrefix(apiErr.Message, `plugins[0].engine: expected "middle-out"`) {
			t.Errorf("engine %s: %v", e, apiErr)
		}
	}
}

// Compression is served on chat only, the field that asked named.
func TestChatOnly(t *testing.T) {
	for body, want := range map[string]string{
		`{"transforms":["middle-out"],"input":"hi"}`:              "transforms: middle-out compression is served on /chat/completions only",
		`{"plugins":[{"id":"context-compression"}],"input":"hi"}`: "plugins: middle-out compression is served on /chat/completions only",
	} {
		_, _, apiErr := new(Compression).FitPrompt(plugintest.FitRequest(dialect.Responses, body))
		if apiErr == nil || apiErr.Message != want {
			t.Errorf("%s: %v, want %q", body, apiErr, want)
		}
	}
}
