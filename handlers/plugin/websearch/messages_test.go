package websearch

import "testing"

func TestAnthropicSearchTools(t *testing.T) {
	in := `{"model":"m","tools":[{"name":"f","input_schema":{}},{"type":"web_search_20250305","name":"web_search","max_uses":3,` +
		`"allowed_domains":["a.test"],"blocked_domains":null,"user_location":{"type":"approximate"}},` +
		`{"type":"web_search_20260209","name":"web_search","blocked_domains":["b.test"]}]}`
	out, apiErr := anthropicSearchTools([]byte(in), "service")
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	want := `{"model":"m","tools":[{"name":"f","input_schema":{}},{"type":"service:web_search","parameters":{"allowed_domains":["a.test"]}},` +
		`{"type":"service:web_search","parameters":{"excluded_domains":["b.test"]}}]}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	plain := `{"model":"m","tools":[{"name":"web_search_helper","input_schema":{}}]}`
	if out, _ := anthropicSearchTools([]byte(plain), "service"); string(out) != plain {
		t.Fatalf("a client tool was rewritten: %s", out)
	}
}

func TestLastMessagesUserText(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"first question"},{"role":"assistant","content":"x"},
		{"role":"user","content":[{"type":"text","text":" Caddy news "}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`
	if got := lastMessagesUserText([]byte(body)); got != "Caddy news" {
		t.Fatalf("query %q", got)
	}
	if got := lastMessagesUserText([]byte(`{"messages":[{"role":"assistant","content":"x"}]}`)); got != "" {
		t.Fatalf("query %q", got)
	}
}
