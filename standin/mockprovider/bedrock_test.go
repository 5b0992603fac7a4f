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
	req, _ := http.NewRequest("POST", srv.URL+"/model/claude-mock/"+route, strings.NewReader(sent))
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
		{"ok", ok, key, false, http.StatusOK, ""},
	} {
		res, body := bedrockPost(t, srv, "converse", tc.body, tc.key, tc.tamper)
		if res.StatusCode != tc.status || !strings.HasPrefix(res.Header.Get("X-Amzn-Errortype"), tc.typ) {
			t.Errorf("%s: %d %s %s", tc.name, res.StatusCode, res.Header.Get("X-Amzn-Errortype"), body)
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
