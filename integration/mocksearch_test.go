package integration

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// The mock provider's stand-in search engines (its /search-api/ paths) let
// Caddyfile.example's web search run offline: the gateway queries the mock's
// SearXNG, the mock model cites what it was given, and the answer carries
// url_citation annotations whose spans are exactly the cited links.
func TestMockSearchEngineServesWebSearch(t *testing.T) {
	startInProcessWith(t, func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tbrand service\n", "\t\tbrand service\n"+
			"\t\tweb_search {\n\t\t\tdefault_engine searxng\n\t\t\tengine searxng {\n"+
			"\t\t\t\tbase_url http://"+mockAddr+"/search-api\n\t\t\t}\n\t\t}\n")
	})
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"searcher"}`)

	res := c.mustPost("/responses", key, `{"model":"tollgate-mock:online","input":"caddy gateway news"}`, nil)
	if res.Header.Get("Deprecation") == "" {
		t.Error("the :online form answered without a Deprecation header")
	}
	text := res.JSON.Get("output.0.content.0.text").String()
	anns := res.JSON.Get("output.0.content.0.annotations").Array()
	if len(anns) == 0 {
		t.Fatalf("no annotations in %s", res.Body)
	}
	runes := []rune(text)
	for _, a := range anns {
		s, e := int(a.Get("start_index").Int()), int(a.Get("end_index").Int())
		if a.Get("type").String() != "url_citation" || s < 0 || e > len(runes) || s >= e {
			t.Fatalf("bad annotation %s for a text of %d code points", a.Raw, utf8.RuneCountInString(text))
		}
		span := string(runes[s:e])
		if !strings.HasPrefix(span, "[") || !strings.HasSuffix(span, "("+a.Get("url").String()+")") {
			t.Errorf("annotation %s spans %q, not the link to its url", a.Raw, span)
		}
	}
	// Five results (the default max_results) at the default 0.004 each.
	if got := gjson.Get(res.JSON.Raw, "usage.server_tool_use_details.web_search_results").Int(); got != 5 {
		t.Errorf("web_search_results = %d, want 5 (usage %s)", got, res.JSON.Get("usage").Raw)
	}
}
