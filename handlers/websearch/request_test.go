package websearch

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const brand = "service"

func TestNormalizeUnchanged(t *testing.T) {
	for _, body := range []string{
		`{"model":"openai/gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"openai/gpt-4o","tools":[{"type":"function","function":{"name":"f"}}],"plugins":[{"id":"file-parser","pdf":{"engine":"mistral-ocr"}}]}`,
		`{"model":"openai/gpt-4o","plugins":[{"id":"web","enabled":false}]}`,
		`{"model":"openai/gpt-4o","x_search_filter":null,"tools":null,"plugins":null}`,
		`{"model":"vendor/online"}`,
		`{"model":"openai/gpt-4o","tools":[{"type":"openrouter:web_search"}]}`,
		`{"model":42}`,
	} {
		out, spec, dep, err := Normalize([]byte(body), brand)
		if err != nil || spec != nil || dep != nil || string(out) != body {
			t.Errorf("%s: got %s %+v %v %v", body, out, spec, dep, err)
		}
	}
}

func TestNormalizeRewrites(t *testing.T) {
	const def = `{"type":"service:web_search","parameters":{"max_results":5}}`
	tests := []struct {
		name, in, out string
		spec          Spec
		dep           []string
		opts          Options
	}{
		{
			name: "server tool, no parameters",
			in:   `{"model":"m/a","input":"hi","tools":[{"type":"service:web_search"}]}`,
			out:  `{"model":"m/a","input":"hi","tools":[` + def + `]}`,
			spec: Spec{MaxResults: 5},
		},
		{
			name: "server tool, all parameters, moved after the other tools and to the end",
			in:   `{"model":"m/a","tools":[{"type":"service:web_search","parameters":{"engine":"exa","max_results":10.0,"allowed_domains":["Example.com","*.sub.org"],"excluded_domains":["spam.com"],"search_prompt":"Found:","mode":"deep","user_location":{ "type": "approximate" },"max_uses":3}},{"type":"function","function":{"name":"f"}}],"input":"hi"}`,
			out:  `{"model":"m/a","input":"hi","tools":[{"type":"function","function":{"name":"f"}},{"type":"service:web_search","parameters":{"engine":"exa","max_results":10,"allowed_domains":["example.com","*.sub.org"],"excluded_domains":["spam.com"],"search_prompt":"Found:","max_uses":3,"mode":"deep","user_location":{"type":"approximate"}}}]}`,
			spec: Spec{Engine: "exa", MaxResults: 10, IncludeDomains: []string{"example.com", "*.sub.org"}, ExcludeDomains: []string{"spam.com"}, SearchPrompt: "Found:",
				Extra: map[string]json.RawMessage{"mode": json.RawMessage(`"deep"`), "user_location": json.RawMessage(`{"type":"approximate"}`), "max_uses": json.RawMessage(`3`)}},
		},
		{
			name: "server tool, plugin-style domain names and auto engine",
			in:   `{"model":"m/a","tools":[{"type":"service:web_search","parameters":{"engine":"auto","include_domains":["a.com"],"exclude_domains":["b.com"]}}]}`,
			out:  `{"model":"m/a","tools":[{"type":"service:web_search","parameters":{"max_results":5,"allowed_domains":["a.com"],"excluded_domains":["b.com"]}}]}`,
			spec: Spec{MaxResults: 5, IncludeDomains: []string{"a.com"}, ExcludeDomains: []string{"b.com"}},
		},
		{
			name: "plugin, all parameters",
			in:   `{"model":"m/a","plugins":[{"id":"web","enabled":true,"engine":"firecrawl","max_results":20,"include_domains":["a.com"],"exclude_domains":["b.com"],"search_prompt":"P"}],"input":"hi"}`,
			out:  `{"model":"m/a","input":"hi","tools":[{"type":"service:web_search","parameters":{"engine":"firecrawl","max_results":20,"allowed_domains":["a.com"],"excluded_domains":["b.com"],"search_prompt":"P"}}]}`,
			spec: Spec{Engine: "firecrawl", MaxResults: 20, IncludeDomains: []string{"a.com"}, ExcludeDomains: []string{"b.com"}, SearchPrompt: "P"},
			dep:  []string{DeprecatedWebPlugin},
		},
		{
			name: "plugin among other plugins",
			in:   `{"model":"m/a","plugins":[{"id":"file-parser"},{"id":"web","engine":"searxng"},{"id":"response-healing"}],"tools":[{"type":"function"}]}`,
			out:  `{"model":"m/a","plugins":[{"id":"file-parser"},{"id":"response-healing"}],"tools":[{"type":"function"},{"type":"service:web_search","parameters":{"engine":"searxng","max_results":5}}]}`,
			spec: Spec{Engine: "searxng", MaxResults: 5},
			dep:  []string{DeprecatedWebPlugin},
		},
		{
			name: "disabled plugin removed when search is asked otherwise",
			in:   `{"model":"m/a:online","plugins":[{"id":"web","enabled":false,"max_results":9}]}`,
			out:  `{"model":"m/a","tools":[` + def + `]}`,
			spec: Spec{MaxResults: 5},
			dep:  []string{DeprecatedOnlineSuffix},
		},
		{
			name: ":online",
			in:   `{"model":"m/a:online","input":"hi"}`,
			out:  `{"model":"m/a","input":"hi","tools":[` + def + `]}`,
			spec: Spec{MaxResults: 5},
			dep:  []string{DeprecatedOnlineSuffix},
		},
		{
			name: ":free:online",
			in:   `{"model":"m/a:free:online"}`,
			out:  `{"model":"m/a:free","tools":[` + def + `]}`,
			spec: Spec{MaxResults: 5},
			dep:  []string{DeprecatedOnlineSuffix},
		},
		{
			name: ":online:free",
			in:   `{"model":"m/a:online:free"}`,
			out:  `{"model":"m/a:free","tools":[` + def + `]}`,
			spec: Spec{MaxResults: 5},
			dep:  []string{DeprecatedOnlineSuffix},
		},
		{
			name: ":nitro:online:free, no vendor",
			in:   `{"model":"a:nitro:online:free"}`,
			out:  `{"model":"a:nitro:free","tools":[` + def + `]}`,
			spec: Spec{MaxResults: 5},
			dep:  []string{DeprecatedOnlineSuffix},
		},
		{
			name: "x_search_filter alone",
			in:   `{"model":"x-ai/grok-4","x_search_filter":{"allowed_x_handles":["a","b"],"from_date":"2026-01-01","to_date":"2026-01-01","enable_image_understanding":true}}`,
			out:  `{"model":"x-ai/grok-4","tools":[{"type":"service:web_search","parameters":{"max_results":5,"x_search":{"allowed_x_handles":["a","b"],"from_date":"2026-01-01","to_date":"2026-01-01","enable_image_understanding":true}}}]}`,
			spec: Spec{MaxResults: 5, XSearch: &XSearch{AllowedXHandles: []string{"a", "b"}, FromDate: "2026-01-01", ToDate: "2026-01-01", EnableImageUnderstanding: true}},
		},
		{
			name: "empty x_search enables X search without filters",
			in:   `{"model":"vendor/grok-mini","plugins":[{"id":"web","x_search":{}}]}`,
			out:  `{"model":"vendor/grok-mini","tools":[{"type":"service:web_search","parameters":{"max_results":5,"x_search":{}}}]}`,
			spec: Spec{MaxResults: 5, XSearch: &XSearch{}},
			dep:  []string{DeprecatedWebPlugin},
		},
		{
			name: "all forms merged: tool > plugin > x_search_filter",
			in:   `{"model":"x-ai/grok-4:online","x_search_filter":{"to_date":"2020-01-01"},"plugins":[{"id":"web","engine":"exa","max_results":7,"x_search":{"excluded_x_handles":["p"]}}],"tools":[{"type":"service:web_search","parameters":{"max_results":3,"allowed_domains":["t.com"]}}]}`,
			out:  `{"model":"x-ai/grok-4","tools":[{"type":"service:web_search","parameters":{"engine":"exa","max_results":3,"allowed_domains":["t.com"],"x_search":{"excluded_x_handles":["p"]}}}]}`,
			spec: Spec{Engine: "exa", MaxResults: 3, IncludeDomains: []string{"t.com"}, XSearch: &XSearch{ExcludedXHandles: []string{"p"}}},
			dep:  []string{DeprecatedOnlineSuffix, DeprecatedWebPlugin},
		},
		{
			name: "tools null",
			in:   `{"tools":null,"model":"m/a:online"}`,
			out:  `{"model":"m/a","tools":[` + def + `]}`,
			spec: Spec{MaxResults: 5},
			dep:  []string{DeprecatedOnlineSuffix},
		},
		{
			name: "default max_results lowered to a configured engine cap",
			in:   `{"tools":[{"type":"service:web_search","parameters":{"engine":"exa"}}]}`,
			out:  `{"tools":[{"type":"service:web_search","parameters":{"engine":"exa","max_results":3}}]}`,
			spec: Spec{Engine: "exa", MaxResults: 3},
			opts: Options{Limits: Limits{MaxResultsByEngine: map[string]int{"exa": 3}}},
		},
		{
			name: "custom x_search support",
			in:   `{"model":"acme/m","x_search_filter":{}}`,
			out:  `{"model":"acme/m","tools":[{"type":"service:web_search","parameters":{"max_results":5,"x_search":{}}}]}`,
			spec: Spec{MaxResults: 5, XSearch: &XSearch{}},
			opts: Options{SupportsXSearch: func(m string) bool { return m == "acme/m" }},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			out, spec, dep, err := NormalizeWith(in, brand, tt.opts)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			if string(in) != tt.in {
				t.Fatalf("input modified")
			}
			if string(out) != tt.out {
				t.Errorf("out\n got %s\nwant %s", out, tt.out)
			}
			if !reflect.DeepEqual(*spec, tt.spec) {
				t.Errorf("spec\n got %+v\nwant %+v", *spec, tt.spec)
			}
			if !slices.Equal(dep, tt.dep) {
				t.Errorf("deprecated got %v want %v", dep, tt.dep)
			}
			// The output is a fixed point.
			out2, spec2, dep2, err := NormalizeWith(out, brand, tt.opts)
			if err != nil || !bytes.Equal(out2, out) || !reflect.DeepEqual(spec2, spec) || dep2 != nil {
				t.Errorf("not idempotent: %s %+v %v %v", out2, spec2, dep2, err)
			}
		})
	}
}

// Every form, for the same parameters, gives the same bytes.
func TestNormalizeFormsIdentical(t *testing.T) {
	groups := [][]string{
		{
			`{"model":"x-ai/grok-4","input":"hi","tools":[{"type":"service:web_search"}]}`,
			`{"model":"x-ai/grok-4","input":"hi","tools":[{"type":"service:web_search","parameters":{"max_results":5}}]}`,
			`{"model":"x-ai/grok-4","input":"hi","plugins":[{"id":"web"}]}`,
			`{"model":"x-ai/grok-4:online","input":"hi"}`,
			`{"model":"x-ai/grok-4:online","input":"hi","plugins":[{"id":"web","max_results":5}]}`,
		},
		{
			`{"model":"x-ai/grok-4:free","input":"hi","tools":[{"type":"service:web_search","parameters":{"x_search":{"allowed_x_handles":["h"],"from_date":"2026-01-01"}}}]}`,
			`{"model":"x-ai/grok-4:free","input":"hi","plugins":[{"id":"web","x_search":{"allowed_x_handles":["h"],"from_date":"2026-01-01"}}]}`,
			`{"model":"x-ai/grok-4:free:online","input":"hi","x_search_filter":{"from_date":"2026-01-01","allowed_x_handles":["h"]}}`,
			`{"model":"x-ai/grok-4:online:free","input":"hi","x_search_filter":{"allowed_x_handles":["h"],"from_date":"2026-01-01"}}`,
			`{"model":"x-ai/grok-4:free","input":"hi","x_search_filter":{"allowed_x_handles":["h"],"from_date":"2026-01-01"}}`,
		},
		{
			`{"model":"m/a","tools":[{"type":"service:web_search","parameters":{"engine":"parallel","max_results":12,"allowed_domains":["a.com"],"excluded_domains":["*.b.com"]}}],"input":"hi"}`,
			`{"model":"m/a","plugins":[{"id":"web","engine":"parallel","max_results":12,"include_domains":["a.com"],"exclude_domains":["*.B.com"]}],"input":"hi"}`,
			`{"model":"m/a:online","input":"hi","plugins":[{"exclude_domains":["*.b.com"],"include_domains":["A.com"],"max_results":12,"engine":"parallel","id":"web"}]}`,
		},
	}
	for gi, g := range groups {
		var want []byte
		for i, body := range g {
			out, _, _, err := Normalize([]byte(body), brand)
			if err != nil {
				t.Fatalf("group %d form %d: %v", gi, i, err)
			}
			if i == 0 {
				want = out
			} else if !bytes.Equal(out, want) {
				t.Errorf("group %d form %d:\n got %s\nwant %s", gi, i, out, want)
			}
		}
	}
}

func TestNormalizeErrors(t *testing.T) {
	tool := func(params string) string {
		return `{"model":"m/a","tools":[{"type":"function"},{"type":"service:web_search","parameters":` + params + `}]}`
	}
	plugin := func(p string) string { return `{"model":"m/a","plugins":[{"id":"other"},` + p + `]}` }
	xs := func(x string) string {
		return `{"model":"x-ai/grok-4","tools":[{"type":"service:web_search","parameters":{"x_search":` + x + `}}]}`
	}
	handles := func(n int) string {
		h := make([]string, n)
		for i := range h {
			h[i] = `"h"`
		}
		return "[" + strings.Join(h, ",") + "]"
	}
	tests := []struct{ in, field, msg string }{
		{`not json`, "", "not valid JSON"},
		{`[1]`, "", "must be a JSON object"},
		{`{"tools":[],"tools":[]}`, "tools", "duplicate field"},
		{`{"model":"a","model":"b:online"}`, "model", "duplicate field"},
		{`{"tool\u0073":[]}`, "tools", "without escapes"},
		{`{"tools":{}}`, "tools", "must be an array"},
		{`{"plugins":"web"}`, "plugins", "must be an array"},
		{`{"model":":online"}`, "model", "needs a model id"},
		{`{"model":"vendor/:online"}`, "model", "needs a model id"},
		{`{"tools":[{"type":"service:web_search"},{"type":"service:web_search"}]}`, "tools[1]", "only one"},
		{`{"tools":[{"type":"service:web_search","type":"x"}]}`, "tools[0].type", "duplicate field"},
		{tool(`[]`), "tools[1].parameters", "must be an object"},
		{tool(`{"engine":"bing"}`), "tools[1].parameters.engine", "must be one of native, exa, firecrawl, parallel, searxng"},
		{tool(`{"engine":"EXA"}`), "tools[1].parameters.engine", "must be one of"},
		{tool(`{"engine":1}`), "tools[1].parameters.engine", "must be a string"},
		{tool(`{"max_results":0}`), "tools[1].parameters.max_results", "must be an integer between 1 and 25"},
		{tool(`{"max_results":26}`), "tools[1].parameters.max_results", "between 1 and 25"},
		{tool(`{"max_results":-1}`), "tools[1].parameters.max_results", "between 1 and 25"},
		{tool(`{"max_results":2.5}`), "tools[1].parameters.max_results", "integer"},
		{tool(`{"max_results":"5"}`), "tools[1].parameters.max_results", "integer"},
		{tool(`{"max_results":1e400}`), "tools[1].parameters.max_results", "integer"},
		{tool(`{"engine":"firecrawl","max_results":21}`), "tools[1].parameters.max_results", "between 1 and 20 with engine firecrawl"},
		{tool(`{"max_results":1,"max_results":2}`), "tools[1].parameters.max_results", "duplicate field"},
		{tool(`{"allowed_domains":"a.com"}`), "tools[1].parameters.allowed_domains", "array of strings"},
		{tool(`{"allowed_domains":["a.com",1]}`), "tools[1].parameters.allowed_domains[1]", "must be a string"},
		{tool(`{"allowed_domains":["https://a.com"]}`), "tools[1].parameters.allowed_domains[0]", "not a domain"},
		{tool(`{"excluded_domains":["a.com/blog"]}`), "tools[1].parameters.excluded_domains[0]", "not a domain"},
		{tool(`{"excluded_domains":["a.com:443"]}`), "tools[1].parameters.excluded_domains[0]", "not a domain"},
		{tool(`{"excluded_domains":["*."]}`), "tools[1].parameters.excluded_domains[0]", "not a domain"},
		{tool(`{"excluded_domains":["*a.com"]}`), "tools[1].parameters.excluded_domains[0]", "not a domain"},
		{tool(`{"excluded_domains":["a.*.com"]}`), "tools[1].parameters.excluded_domains[0]", "not a domain"},
		{tool(`{"excluded_domains":["a..com"]}`), "tools[1].parameters.excluded_domains[0]", "not a domain"},
		{tool(`{"excluded_domains":["-a.com"]}`), "tools[1].parameters.excluded_domains[0]", "not a domain"},
		{tool(`{"excluded_domains":["münchen.de"]}`), "tools[1].parameters.excluded_domains[0]", "not a domain"},
		{tool(`{"excluded_domains":[""]}`), "tools[1].parameters.excluded_domains[0]", "not a domain"},
		{tool(`{"allowed_domains":["a.com"],"include_domains":["b.com"]}`), "tools[1].parameters.include_domains", "cannot be used together with allowed_domains"},
		{tool(`{"search_prompt":5}`), "tools[1].parameters.search_prompt", "must be a string"},
		{tool(`{"x_search":{}}`), "tools[1].parameters.x_search", `not supported by model "m/a"`},
		{plugin(`{"id":"Web"}`), "plugins[1].id", `must be "web"`},
		{plugin(`{"id":"web_search","max_results":3}`), "plugins[1].id", `must be "web"`},
		{plugin(`{"engine":"exa"}`), "plugins[1].id", `must be "web"`},
		{plugin(`{"id":5,"max_results":3}`), "plugins[1].id", `must be "web"`},
		{plugin(`{"id":"web","enabled":"yes"}`), "plugins[1].enabled", "must be a boolean"},
		{plugin(`{"id":"web"},{"id":"web"}`), "plugins[2]", "only one"},
		{plugin(`{"id":"web","engine":"perplexity"}`), "plugins[1].engine", "must be one of"},
		{plugin(`{"id":"web","max_results":100}`), "plugins[1].max_results", "between 1 and 25"},
		{plugin(`{"id":"web","include_domains":["http://x"]}`), "plugins[1].include_domains[0]", "not a domain"},
		{plugin(`{"id":"web","exclude_domains":[null]}`), "plugins[1].exclude_domains[0]", "must be a string"},
		{plugin(`{"id":"web","x_search":{}}`), "plugins[1].x_search", "not supported by model"},
		{`{"model":"m/a","plugins":[{"id":"web","max_results":21}],"tools":[{"type":"service:web_search","parameters":{"engine":"firecrawl"}}]}`, "plugins[0].max_results", "between 1 and 20 with engine firecrawl"},
		{`{"model":"openai/gpt-4o","x_search_filter":{}}`, "x_search_filter", "not supported by model"},
		{`{"model":"openai/gpt-4o:online","x_search_filter":{}}`, "x_search_filter", `not supported by model "openai/gpt-4o"`},
		{`{"model":5,"x_search_filter":{}}`, "x_search_filter", "not supported by model"},
		{`{"model":"x-ai/grok-4","x_search_filter":true}`, "x_search_filter", "must be an object"},
		{xs(`[]`), "tools[0].parameters.x_search", "must be an object"},
		{xs(`{"handles":[]}`), "tools[0].parameters.x_search.handles", "unknown field"},
		{xs(`{"allowed_x_handles":` + handles(21) + `}`), "tools[0].parameters.x_search.allowed_x_handles", "at most 20"},
		{xs(`{"excluded_x_handles":` + handles(21) + `}`), "tools[0].parameters.x_search.excluded_x_handles", "at most 20"},
		{xs(`{"allowed_x_handles":"h"}`), "tools[0].parameters.x_search.allowed_x_handles", "array of strings"},
		{xs(`{"allowed_x_handles":["h",""]}`), "tools[0].parameters.x_search.allowed_x_handles[1]", "non-empty string"},
		{xs(`{"allowed_x_handles":["a"],"excluded_x_handles":["b"]}`), "tools[0].parameters.x_search.excluded_x_handles", "cannot be used together"},
		{xs(`{"from_date":"2026/01/01"}`), "tools[0].parameters.x_search.from_date", "YYYY-MM-DD"},
		{xs(`{"to_date":"2026-13-01"}`), "tools[0].parameters.x_search.to_date", "YYYY-MM-DD"},
		{xs(`{"to_date":"2026-01-01T00:00:00Z"}`), "tools[0].parameters.x_search.to_date", "YYYY-MM-DD"},
		{xs(`{"from_date":20260101}`), "tools[0].parameters.x_search.from_date", "YYYY-MM-DD"},
		{xs(`{"from_date":"2026-02-01","to_date":"2026-01-31"}`), "tools[0].parameters.x_search.from_date", "must not be after to_date"},
		{xs(`{"enable_image_understanding":1}`), "tools[0].parameters.x_search.enable_image_understanding", "must be a boolean"},
		{xs(`{"enable_video_understanding":"true"}`), "tools[0].parameters.x_search.enable_video_understanding", "must be a boolean"},
		{`{"model":"x-ai/grok-4","x_search_filter":{"from_date":"x"}}`, "x_search_filter.from_date", "YYYY-MM-DD"},
	}
	for _, tt := range tests {
		out, spec, _, err := Normalize([]byte(tt.in), brand)
		if err == nil {
			t.Errorf("%s: no error, got %s", tt.in, out)
			continue
		}
		if err.Field != tt.field || !strings.Contains(err.Message, tt.msg) {
			t.Errorf("%s:\n got %q\nwant %s: ...%s...", tt.in, err.Error(), tt.field, tt.msg)
		}
		if spec != nil || string(out) != tt.in {
			t.Errorf("%s: error with output %s %+v", tt.in, out, spec)
		}
	}
}

func TestLimits(t *testing.T) {
	l := Limits{MaxResultsByEngine: map[string]int{"exa": 10, "parallel": 99, "native": 0}}
	for e, want := range map[string]int{"exa": 10, "parallel": 25, "native": 25, "": 25, "firecrawl": 25} {
		if got := l.max(e); got != want {
			t.Errorf("%q: %d, want %d", e, got, want)
		}
	}
	if got := (Limits{}).max("firecrawl"); got != 20 {
		t.Errorf("default firecrawl cap %d", got)
	}
	if got := (Limits{}).max("exa"); got != 25 {
		t.Errorf("default exa cap %d", got)
	}
}

func TestFieldErrorString(t *testing.T) {
	if s := (&FieldError{"a.b", "bad"}).Error(); s != "a.b: bad" {
		t.Error(s)
	}
	if s := (&FieldError{"", "bad"}).Error(); s != "bad" {
		t.Error(s)
	}
}
