package mockprovider

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/bedrock"
)

// bedrockPost sends body to the mock's Converse route, signed with key
// ("" unsigned); tamper changes the body after signing.
func bedrockPost(t *testing.T, srv *httptest.Server, route, body, key string, tamper bool) (*http.Response, []byte) {
	t.Helper()
	d, err := bedrock.New(dialect.Options{Model: "claude-mock", Settings: map[string]string{"aws_region": "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	sent := body
	if tamper {
		sent = strings.Replace(body, "hello", "HELLO", 1)
	}
	path := "/model/claude-mock/" + route
	if strings.HasPrefix(route, "/") {
		path = route // another model's
	}
	req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(sent))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		if err := d.(dialect.Signer).Sign(req, []byte(body), key); err != nil {
			t.Fatal(err)
		}
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

func TestBedrockRefusesWhatAWSRefuses(t *testing.T) {
	srv := mockServer(t, &Handler{})
	key := BedrockAccessKeyID + ":" + BedrockSecretKey
	const ok = `{"messages":[{"role":"user","content":[{"text":"hello"}]}]}`
	for _, tc := range []struct {
		name, body, key string
		tamper          bool
		status          int
		typ             string
	}{
		{"unsigned", ok, "", false, http.StatusForbidden, "MissingAuthenticationTokenException"},
		{"another key", ok, "AKIDOTHER:" + BedrockSecretKey, false, http.StatusForbidden, "UnrecognizedClientException"},
		{"wrong secret", ok, BedrockAccessKeyID + ":wrong", false, http.StatusForbidden, "InvalidSignatureException"},
		{"body changed after signing", ok, key, true, http.StatusForbidden, "InvalidSignatureException"},
		{"unknown member", `{"model":"x","messages":[{"role":"user","content":[{"text":"hello"}]}]}`, key, false, http.StatusBadRequest, "ValidationException"},
		{"unknown block", `{"messages":[{"role":"user","content":[{"type":"text","text":"hello"}]}]}`, key, false, http.StatusBadRequest, "ValidationException"},
		{"unknown inference member", `{"messages":[{"role":"user","content":[{"text":"hello"}]}],"inferenceConfig":{"max_tokens":3}}`, key, false, http.StatusBadRequest, "ValidationException"},
		{"assistant first", `{"messages":[{"role":"assistant","content":[{"text":"hello"}]}]}`, key, false, http.StatusBadRequest, "ValidationException"},
		{"cache point of another type", `{"messages":[{"role":"user","content":[{"text":"hello"},{"cachePoint":{"type":"ephemeral"}}]}]}`, key, false, http.StatusBadRequest, "ValidationException"},
		{"cache point TTL not 5m or 1h", `{"messages":[{"role":"user","content":[{"text":"hello"},{"cachePoint":{"type":"default","ttl":"2h"}}]}]}`, key, false, http.StatusBadRequest, "ValidationException"},
		{"unknown cache point member", `{"messages":[{"role":"user","content":[{"text":"hello"},{"cachePoint":{"type":"default","scope":"x"}}]}]}`, key, false, http.StatusBadRequest, "ValidationException"},
		{"cache point TTL growing", `{"system":[{"text":"s"},{"cachePoint":{"type":"default"}}],"messages":[{"role":"user","content":[{"text":"hello"},{"cachePoint":{"type":"default","ttl":"1h"}}]}]}`, key, false, http.StatusBadRequest, "ValidationException"},
		{"cache points of 1h then 5m", `{"system":[{"text":"s"},{"cachePoint":{"type":"default","ttl":"1h"}}],"messages":[{"role":"user","content":[{"text":"hello"},{"cachePoint":{"type":"default","ttl":"5m"}}]}]}`, key, false, http.StatusOK, ""},
		{"ok", ok, key, false, http.StatusOK, ""},
	} {
		res, body := bedrockPost(t, srv, "converse", tc.body, tc.key, tc.tamper)
		if res.StatusCode != tc.status || !strings.HasPrefix(res.Header.Get("X-Amzn-Errortype"), tc.typ) {
			t.Errorf("%s: %d %s %s", tc.name, res.StatusCode, res.Header.Get("X-Amzn-Errortype"), body)
		}
	}
	// The cache writes are reported for the last cache point's TTL.
	for ttl, want := range map[string]string{``: "5m", `,"ttl":"5m"`: "5m", `,"ttl":"1h"`: "1h"} {
		res, body := bedrockPost(t, srv, "converse", `{"messages":[{"role":"user","content":[{"text":"hello"},{"cachePoint":{"type":"default"`+ttl+`}}]}]}`, key, false)
		u := gjson.GetBytes(body, "usage")
		if res.StatusCode != 200 || u.Get("cacheDetails.0.ttl").Str != want || u.Get("cacheDetails.0.inputTokens").Int() != u.Get("cacheWriteInputTokens").Int() {
			t.Errorf("ttl %q: %d %s", ttl, res.StatusCode, body)
		}
	}
	// A stream is event-stream frames, decoded by the SDK's decoder.
	res, body := bedrockPost(t, srv, "converse-stream", `{"messages":[{"role":"user","content":[{"text":"hello"}]}],"inferenceConfig":{"maxTokens":2}}`, key, false)
	if res.Header.Get("Content-Type") != "application/vnd.amazon.eventstream" {
		t.Fatalf("stream %d %s", res.StatusCode, res.Header)
	}
	dec, r := eventstream.NewDecoder(), bytes.NewReader(body)
	var types []string
	for r.Len() > 0 {
		m, err := dec.Decode(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, m.Headers.Get(":event-type").String())
		if m.Headers.Get(":event-type").String() == "messageStop" && gjson.GetBytes(m.Payload, "stopReason").Str != "max_tokens" {
			t.Errorf("stop %s", m.Payload)
		}
	}
	if strings.Join(types, ",") != "messageStart,contentBlockDelta,contentBlockDelta,contentBlockStop,messageStop,metadata" {
		t.Errorf("events %v", types)
	}
}

// With an Anthropic model's extended thinking, the answer starts with a
// signed reasoningContent block, and a tool loop must send it back first
// in the final assistant message, signature unchanged, as Bedrock
// requires.
func TestBedrockThinking(t *testing.T) {
	srv := mockServer(t, &Handler{})
	key := BedrockAccessKeyID + ":" + BedrockSecretKey
	const on = `"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}},"inferenceConfig":{"maxTokens":2000}`
	tools := `"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}}}}]}`
	res, body := bedrockPost(t, srv, "converse", `{"messages":[{"role":"user","content":[{"text":"mock-tool-call: f {}"}]}],`+on+`,`+tools+`}`, key, false)
	content := gjson.GetBytes(body, "output.message.content")
	if res.StatusCode != 200 || content.Get("0.reasoningContent.reasoningText.signature").Str != mockSignature || !content.Get("1.toolUse").Exists() {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	thought := `{"reasoningContent":{"reasoningText":{"text":"t","signature":"` + mockSignature + `"}}}`
	call := `{"toolUse":{"toolUseId":"x","name":"f","input":{}}}`
	loop := func(assistant string) string {
		return `{"messages":[{"role":"user","content":[{"text":"go"}]},{"role":"assistant","content":[` + assistant + `]},` +
			`{"role":"user","content":[{"toolResult":{"toolUseId":"x","content":[{"text":"ok"}]}}]}],` + on + `,` + tools + `}`
	}
	for _, tc := range []struct {
		name, body string
		status     int
		msg        string
	}{
		{"kept", loop(thought + `,` + call), 200, ""},
		{"redacted kept", loop(`{"reasoningContent":{"redactedContent":"ZGF0YQ=="}},` + call), 200, ""},
		{"lost", loop(call), 400, "Expected `thinking` or `redacted_thinking`, but found `tool_use`"},
		{"no signature", loop(`{"reasoningContent":{"reasoningText":{"text":"t"}}},` + call), 400, "thinking.signature: Field required"},
		{"another signature", loop(`{"reasoningContent":{"reasoningText":{"text":"t","signature":"forged"}}},` + call), 400, "Invalid `signature`"},
		{"small budget", `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":10}},"inferenceConfig":{"maxTokens":2000}}`, 400, "budget_tokens"},
		{"temperature", `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}},"inferenceConfig":{"maxTokens":2000,"temperature":0.5}}`, 400, "temperature"},
	} {
		res, body := bedrockPost(t, srv, "converse", tc.body, key, false)
		if res.StatusCode != tc.status || !strings.Contains(gjson.GetBytes(body, "message").Str, tc.msg) {
			t.Errorf("%s: %d %s", tc.name, res.StatusCode, body)
		}
	}
	// Streamed: the thinking's text, then its signature, as block 0.
	res, body = bedrockPost(t, srv, "converse-stream", `{"messages":[{"role":"user","content":[{"text":"hello"}]}],`+on+`}`, key, false)
	dec, r := eventstream.NewDecoder(), bytes.NewReader(body)
	var reasoning []string
	texts := 0
	for r.Len() > 0 {
		m, err := dec.Decode(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := gjson.ParseBytes(m.Payload)
		if rc := p.Get("delta.reasoningContent"); rc.Exists() && p.Get("contentBlockIndex").Int() == 0 {
			reasoning = append(reasoning, rc.Raw)
		}
		if p.Get("delta.text").Exists() && p.Get("contentBlockIndex").Int() == 1 {
			texts++
		}
	}
	if res.StatusCode != 200 || len(reasoning) != 2 || !strings.Contains(reasoning[1], mockSignature) || texts == 0 {
		t.Errorf("stream %d reasoning %v texts %d", res.StatusCode, reasoning, texts)
	}
}

// InvokeModel of an embedding model in its own body, signed as every
// Bedrock call: Titan's one input, Cohere's batch with its token count
// header; what the model's schema does not define is refused.
func TestBedrockEmbeddings(t *testing.T) {
	srv := mockServer(t, &Handler{})
	key := BedrockAccessKeyID + ":" + BedrockSecretKey
	res, body := bedrockPost(t, srv, "/model/amazon.titan-embed-text-v2:0/invoke", `{"inputText":"hello there","dimensions":256}`, key, false)
	if res.StatusCode != 200 || len(gjson.GetBytes(body, "embedding").Array()) != 256 || gjson.GetBytes(body, "inputTextTokenCount").Int() != 2 {
		t.Errorf("titan %d %s", res.StatusCode, body)
	}
	res, body = bedrockPost(t, srv, "/model/cohere.embed-english-v3/invoke", `{"texts":["a b","c"],"input_type":"search_query","embedding_types":["float"]}`, key, false)
	if res.StatusCode != 200 || len(gjson.GetBytes(body, "embeddings.float").Array()) != 2 || res.Header.Get("X-Amzn-Bedrock-Input-Token-Count") != "3" {
		t.Errorf("cohere %d %s %v", res.StatusCode, body, res.Header)
	}
	for _, tc := range []struct{ path, body, key, typ string }{
		{"/model/amazon.titan-embed-text-v2:0/invoke", `{"inputText":"a","dimensions":300}`, key, "ValidationException"},
		{"/model/amazon.titan-embed-text-v2:0/invoke", `{"texts":["a"]}`, key, "ValidationException"},
		{"/model/amazon.titan-embed-image-v1/invoke", `{"inputImage":"not base64!"}`, key, "ValidationException"},
		{"/model/cohere.embed-english-v3/invoke", `{"texts":["a"]}`, key, "ValidationException"},
		{"/model/cohere.embed-english-v3/invoke", `{"texts":["a"],"input_type":"search_query"}`, "", "MissingAuthenticationTokenException"},
	} {
		res, body := bedrockPost(t, srv, tc.path, tc.body, tc.key, false)
		if res.StatusCode < 400 || !strings.HasPrefix(res.Header.Get("X-Amzn-Errortype"), tc.typ) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, res.StatusCode, body)
		}
	}
}
