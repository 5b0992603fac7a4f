package messages

import (
	"encoding/json"
	"testing"
)

// FuzzMessagesToChat checks that the hand-written translation of any JSON
// object is either an error or valid JSON.
//
//	go test ./messages -run '^$' -fuzz FuzzMessagesToChat -fuzztime 30s
func FuzzMessagesToChat(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"a\"b\\n"}],"messages":[{"role":"user","content":"hi"}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":"\u00e9"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":[{"type":"text","text":"x\ty"},
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}}]}]},{"role":"system","content":"s"}],
		"tools":[{"name":"f","description":"d\"","input_schema":{"type":"object"}}],"thinking":{"type":"adaptive"}}`))
	f.Add(claudeCodeRequest(f))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		out, err := MessagesToChat(body)
		if err == nil && !json.Valid(out) {
			t.Fatalf("invalid JSON out of %s:\n%s", body, out)
		}
	})
}
