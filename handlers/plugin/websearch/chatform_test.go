package websearch

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	search "github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
)

// nativeResponsesRoute is a Responses request with a function tool and the
// family's native search written by the middleware, routed to attempts
// with the given APIs.
func nativeResponsesRoute(t *testing.T, family string, spec *search.Spec, apis ...string) (*upstream.Route, *searchPlan) {
	t.Helper()
	body := []byte(`{"model":"m","input":"Zürich?","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`)
	out, apiErr := nativeTranslate(body, "responses", family, spec)
	if apiErr != nil {
		t.Fatal(apiErr.Message)
	}
	plan := &searchPlan{spec: spec, engine: "native", family: family, kind: "responses",
		nativeTools: gjson.GetBytes(out, "tools.#").Int() - 1}
	rt := &upstream.Route{Kind: "responses", Body: out}
	for _, api := range apis {
		rt.Attempts = append(rt.Attempts, upstream.Attempt{Model: &catalog.Model{ID: "m"}, Provider: &catalog.Provider{Name: api, API: api}})
	}
	if apiErr := rt.TranslateFor(); apiErr != nil {
		t.Fatal(apiErr.Message)
	}
	return rt, plan
}

func TestChatSearchNativeChatForm(t *testing.T) {
	for _, tc := range []struct {
		family string
		spec   *search.Spec
		check  string // gjson path that must exist in the chat body
		tools  int64  // tools left in the chat body
	}{
		{"openai", &search.Spec{MaxResults: 5}, "web_search_options", 1},
		{"anthropic", &search.Spec{MaxResults: 5, ExcludeDomains: []string{"spam.example"}}, `tools.#(type=="web_search_20250305").blocked_domains`, 2},
		{"x", &search.Spec{MaxResults: 3}, `search_parameters.sources.#(type=="web")`, 1},
		{"x", &search.Spec{MaxResults: 3, XSearch: &search.XSearch{AllowedXHandles: []string{"a"}}}, `search_parameters.sources.#(type=="x").included_x_handles`, 1},
	} {
		rt, plan := nativeResponsesRoute(t, tc.family, tc.spec, dialect.APIChat, "")
		if apiErr := chatSearch(rt, plan); apiErr != nil {
			t.Fatalf("%s: %s", tc.family, apiErr.Message)
		}
		chat := gjson.ParseBytes(rt.ChatBody)
		if !chat.Get(tc.check).Exists() || chat.Get("tools.#").Int() != tc.tools || chat.Get("tools.0.function.name").Str != "f" {
			t.Fatalf("%s: chat body %s", tc.family, rt.ChatBody)
		}
		for _, tool := range chat.Get("tools").Array() {
			if typ := tool.Get("type").Str; typ == "web_search" || typ == "x_search" {
				t.Fatalf("%s: Responses tool left in %s", tc.family, rt.ChatBody)
			}
		}
		// The Responses body is untouched for the attempts that speak it.
		if !gjson.GetBytes(rt.Body, `tools.#(type=="web_search")`).Exists() && tc.family != "anthropic" {
			t.Fatalf("%s: Responses body %s", tc.family, rt.Body)
		}
		if len(rt.Attempts) != 2 {
			t.Fatalf("%s: %d attempts", tc.family, len(rt.Attempts))
		}
	}
}

func TestChatSearchWithoutChatForm(t *testing.T) {
	spec := &search.Spec{MaxResults: 5, IncludeDomains: []string{"meteo.example"}}
	// A provider that speaks Responses serves the request alone.
	rt, plan := nativeResponsesRoute(t, "openai", spec, dialect.APIChat, "")
	if apiErr := chatSearch(rt, plan); apiErr != nil || len(rt.Attempts) != 1 || rt.Attempts[0].Provider.ChatOnly() || rt.ChatBody != nil {
		t.Fatalf("attempts %v, error %v", rt.Attempts, apiErr)
	}
	// None: 400 naming the field.
	rt, plan = nativeResponsesRoute(t, "openai", spec, dialect.APIChat)
	if apiErr := chatSearch(rt, plan); apiErr == nil || apiErr.Status != 400 || !strings.HasPrefix(apiErr.Message, "allowed_domains:") {
		t.Fatalf("error %v", apiErr)
	}
	// Gateway engines and chat requests are left alone.
	rt, plan = nativeResponsesRoute(t, "openai", &search.Spec{MaxResults: 5}, dialect.APIChat)
	chat := rt.ChatBody
	plan.engine = "exa"
	if apiErr := chatSearch(rt, plan); apiErr != nil || string(rt.ChatBody) != string(chat) {
		t.Fatalf("gateway engine: %s", rt.ChatBody)
	}
	if apiErr := chatSearch(rt, nil); apiErr != nil {
		t.Fatal(apiErr.Message)
	}
}
