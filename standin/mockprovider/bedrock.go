package mockprovider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/tidwall/gjson"
)

// Amazon Bedrock's Converse API, as strictly as AWS serves it:
//
//   - POST /model/<model>/converse and /model/<model>/converse-stream,
//     every request signed with AWS Signature V4 for service bedrock by
//     the mock's one key pair (BedrockAccessKeyID, BedrockSecretKey):
//     unsigned is 403 MissingAuthenticationTokenException, another key
//     403 UnrecognizedClientException, a signature that does not match
//     the request (its host, path, signed headers and body) 403
//     InvalidSignatureException;
//   - a member Converse does not define is a 400 ValidationException
//     naming it (top level, inferenceConfig, a message, a content block);
//     messages start with a user message and alternate;
//   - the answer echoes the last user text, one token a word, cut at
//     inferenceConfig.maxTokens (stopReason max_tokens), with usage; a
//     model name with "cached" reports half the prompt as
//     cacheReadInputTokens (else a request with a cachePoint reports the
//     whole prompt as cacheWriteInputTokens, in cacheDetails for 5m),
//     "error-429" is a ThrottlingException,
//     "error-garbage" an answer that does not parse, "stream-break" a
//     stream that ends with an exception frame; "mock-tool-call: <name>
//     <args>" of an offered tool is answered with its toolUse. Streams are
//     application/vnd.amazon.eventstream frames.

// The key pair the mock's Bedrock accepts.
const (
	BedrockAccessKeyID = "AKIDTOLLGATEMOCK"
	BedrockSecretKey   = "tollgate-mock-secret-access-key"
)

var (
	bedrockTopLevel = []string{"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig", "additionalModelRequestFields",
		"promptVariables", "additionalModelResponseFieldPaths", "requestMetadata", "performanceConfig"}
	bedrockInference = []string{"maxTokens", "temperature", "topP", "stopSequences"}
	bedrockBlock     = []string{"text", "image", "document", "video", "toolUse", "toolResult", "guardContent", "reasoningContent", "cachePoint"}
)

// isBedrockPath reports whether path is a Converse route.
func isBedrockPath(path string) bool {
	return strings.HasPrefix(path, "/model/") && (strings.HasSuffix(path, "/converse") || strings.HasSuffix(path, "/converse-stream"))
}

func bedrockError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	writeJSON(w, status, map[string]string{"message": msg})
}

func (m *Handler) serveBedrock(w http.ResponseWriter, r *http.Request, path string) error {
	if r.Method != http.MethodPost {
		writeMethodNotAllowed(w, http.MethodPost)
		return nil
	}
	body, apiErr := readMockBody(w, r)
	if apiErr != nil {
		bedrockError(w, apiErr.Code, "ValidationException", apiErr.Message)
		return nil
	}
	if status, typ, msg := checkSigV4(r, body); status != 0 {
		bedrockError(w, status, typ, msg)
		return nil
	}
	if msg := checkConverse(body); msg != "" {
		bedrockError(w, http.StatusBadRequest, "ValidationException", msg)
		return nil
	}
	if apiErr := checkContract(r, body); apiErr != nil {
		bedrockError(w, apiErr.Code, "ValidationException", apiErr.Message)
		return nil
	}
	rest := strings.TrimPrefix(path, "/model/")
	model := rest[:strings.LastIndex(rest, "/")]
	q := &mockRequest{model: model, stream: strings.HasSuffix(path, "-stream"), limit: gjson.GetBytes(body, "inferenceConfig.maxTokens").Int()}
	parseConverse(body, q)
	switch {
	case strings.Contains(model, "error-429"):
		bedrockError(w, http.StatusTooManyRequests, "ThrottlingException", "Too many requests, please wait before trying again.")
		return nil
	case strings.Contains(model, "error-garbage"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"output":{"message":`))
		return nil
	}
	m.writeConverse(r.Context(), w, q, newMockAnswer(q), strings.Contains(model, "stream-break"))
	return nil
}

// checkSigV4 verifies the request's AWS Signature V4 by signing the
// request again with the mock's key: 0 when it matches.
func checkSigV4(r *http.Request, body []byte) (int, string, string) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	cred, _, _ := strings.Cut(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 Credential="), ",")
	scope := strings.Split(cred, "/")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || len(scope) != 5 || scope[3] != "bedrock" || scope[4] != "aws4_request" {
		return http.StatusForbidden, "IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters."
	}
	if scope[0] != BedrockAccessKeyID {
		return http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return http.StatusForbidden, "IncompleteSignatureException", "X-Amz-Date is missing or malformed"
	}
	_, signed, _ := strings.Cut(auth, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	again.Host = r.Host
	if !strings.Contains(";"+signed+";", ";content-length;") {
		again.ContentLength = 0 // the signer signs a known length
	}
	for name := range strings.SplitSeq(signed, ";") {
		if name != "host" {
			again.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	again.Header.Del("Authorization")
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: BedrockAccessKeyID, SecretAccessKey: BedrockSecretKey, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hex.EncodeToString(sum[:]), "bedrock", scope[2], signedAt); err != nil ||
		again.Header.Get("Authorization") != auth {
		return http.StatusForbidden, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
	}
	return 0, "", ""
}

// checkConverse names the first member Converse does not define, or a
// conversation it refuses; "" when the body is a valid request.
func checkConverse(body []byte) string {
	unknown := func(where string, obj gjson.Result, known []string) string {
		msg := ""
		obj.ForEach(func(k, _ gjson.Result) bool {
			if !slices.Contains(known, k.Str) {
				msg = fmt.Sprintf("Malformed input request: #%s: extraneous key [%s] is not permitted, please reformat your input and try again.", where, k.Str)
				return false
			}
			return true
		})
		return msg
	}
	req := gjson.ParseBytes(body)
	if !req.IsObject() {
		return "Malformed input request, please reformat your input and try again."
	}
	if msg := unknown("", req, bedrockTopLevel); msg != "" {
		return msg
	}
	if msg := unknown("/inferenceConfig", req.Get("inferenceConfig"), bedrockInference); msg != "" {
		return msg
	}
	msgs := req.Get("messages").Array()
	if len(msgs) == 0 {
		return "A conversation must start with a user message. Try again with a conversation that starts with a user message."
	}
	for i, m := range msgs {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Get("role").Str != want {
			return "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again."
		}
		if msg := unknown(fmt.Sprintf("/messages/%d", i), m, []string{"role", "content"}); msg != "" {
			return msg
		}
		for j, b := range m.Get("content").Array() {
			if msg := unknown(fmt.Sprintf("/messages/%d/content/%d", i, j), b, bedrockBlock); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// parseConverse reads the prompt, the last user text and the scripted
// tool calls.
func parseConverse(body []byte, q *mockRequest) {
	texts := func(blocks gjson.Result) string {
		var t []string
		for _, b := range blocks.Array() {
			if s := b.Get("text"); s.Exists() {
				t = append(t, s.Str)
			}
			for _, c := range b.Get("toolResult.content").Array() {
				if s := c.Get("text"); s.Exists() {
					t = append(t, s.Str)
				} else {
					t = append(t, c.Get("json").Raw)
				}
			}
		}
		return strings.Join(t, " ")
	}
	q.prompt += countWords(texts(gjson.GetBytes(body, "system")))
	q.cachePoint = gjson.GetBytes(body, "messages.#.content.#.cachePoint|@flatten|#").Int() > 0
	msgs := gjson.GetBytes(body, "messages").Array()
	for _, m := range msgs {
		q.prompt += countWords(texts(m.Get("content"))) + mockMessageOverhead
		if m.Get("role").Str == "user" {
			q.lastUser = texts(m.Get("content"))
		}
	}
	if n := len(msgs); n > 0 && msgs[n-1].Get("content.0.toolResult").Exists() {
		q.lastUser = "tool result " + texts(msgs[n-1].Get("content"))
		return
	}
	var offered []string
	gjson.GetBytes(body, "toolConfig.tools.#.toolSpec.name").ForEach(func(_, n gjson.Result) bool {
		offered = append(offered, n.Str)
		return true
	})
	q.calls = scriptedCalls(q.lastUser, offered)
}

// writeConverse answers with a Converse answer or a ConverseStream.
func (m *Handler) writeConverse(ctx context.Context, w http.ResponseWriter, q *mockRequest, a *mockAnswer, brk bool) {
	usage := map[string]any{"inputTokens": a.prompt, "outputTokens": a.completion(), "totalTokens": a.total()}
	switch {
	case strings.Contains(q.model, "cached"):
		usage["cacheReadInputTokens"] = a.prompt / 2
		usage["inputTokens"] = a.prompt - a.prompt/2
	case q.cachePoint:
		// The prompt up to the cache point, the whole of it, is written
		// for the default 5 minutes.
		usage["cacheWriteInputTokens"], usage["inputTokens"] = a.prompt, 0
		usage["cacheDetails"] = []map[string]any{{"inputTokens": a.prompt, "ttl": "5m"}}
	}
	stop := "end_turn"
	switch {
	case len(a.calls) > 0:
		stop = "tool_use"
	case a.truncated:
		stop = "max_tokens"
	}
	if !q.stream {
		var content []any
		for _, c := range a.calls {
			content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": "tooluse_" + c.ID, "name": c.Name, "input": json.RawMessage(c.Arguments)}})
		}
		if len(a.calls) == 0 {
			content = append(content, map[string]any{"text": a.text()})
		}
		writeJSON(w, http.StatusOK, map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
			"stopReason": stop, "usage": usage, "metrics": map[string]any{"latencyMs": 1}})
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := eventstream.NewEncoder()
	send := func(kind, name string, v any) bool {
		payload, _ := json.Marshal(v)
		var h eventstream.Headers
		h.Set(":message-type", eventstream.StringValue(kind))
		if kind == "event" {
			h.Set(":event-type", eventstream.StringValue(name))
		} else {
			h.Set(":exception-type", eventstream.StringValue(name))
		}
		h.Set(":content-type", eventstream.StringValue("application/json"))
		if enc.Encode(w, eventstream.Message{Headers: h, Payload: payload}) != nil {
			return false
		}
		_ = rc.Flush()
		return true
	}
	send("event", "messageStart", map[string]any{"role": "assistant"})
	for i, c := range a.calls {
		send("event", "contentBlockStart", map[string]any{"contentBlockIndex": i, "start": map[string]any{"toolUse": map[string]any{"toolUseId": "tooluse_" + c.ID, "name": c.Name}}})
		send("event", "contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"toolUse": map[string]any{"input": c.Arguments}}})
		send("event", "contentBlockStop", map[string]any{"contentBlockIndex": i})
	}
	for i := range a.words {
		if len(a.calls) > 0 {
			break
		}
		if brk && i == mockBreakAfter {
			send("exception", "internalServerException", map[string]any{"message": "The server encountered an error processing the request."})
			return
		}
		if i > 0 && !sleepCtx(ctx, time.Duration(m.ChunkDelay)) {
			return
		}
		if !send("event", "contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"text": a.delta(i)}}) {
			return
		}
	}
	if len(a.calls) == 0 {
		send("event", "contentBlockStop", map[string]any{"contentBlockIndex": 0})
	}
	send("event", "messageStop", map[string]any{"stopReason": stop})
	send("event", "metadata", map[string]any{"usage": usage, "metrics": map[string]any{"latencyMs": 1}})
}
