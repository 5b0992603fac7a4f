package mockprovider

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
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
//     whole prompt as cacheWriteInputTokens, in cacheDetails for its
//     TTL: 5m, or 1h); a cache point's type is default and its ttl 5m
//     or 1h, and a later cache point's TTL is not longer than an
//     earlier one's,
//     "error-429" is a ThrottlingException,
//     "error-garbage" an answer that does not parse, "stream-break" a
//     stream that ends with an exception frame; "mock-tool-call: <name>
//     <args>" of an offered tool is answered with its toolUse. Streams are
//     application/vnd.amazon.eventstream frames;
//   - an Anthropic model's extended thinking
//     (additionalModelRequestFields.thinking enabled) is checked as
//     Bedrock passes on Anthropic's checks (budget_tokens at least 1,024
//     and below maxTokens, no temperature or top_p, no forced tool) and
//     starts the answer with a signed reasoningContent block (streamed as
//     its text, then its signature); a reasoningContent block sent back
//     with another signature is refused, and, with thinking on, so is a
//     tool loop whose final assistant message does not start with its
//     reasoningContent.

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
	return strings.HasPrefix(path, "/model/") && (strings.HasSuffix(path, "/converse") || strings.HasSuffix(path, "/converse-stream") ||
		strings.HasSuffix(path, "/invoke"))
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
	if model, ok := strings.CutSuffix(strings.TrimPrefix(path, "/model/"), "/invoke"); ok {
		serveBedrockEmbeddings(w, model, body)
		return nil
	}
	if msg := checkConverse(body); msg != "" {
		bedrockError(w, http.StatusBadRequest, "ValidationException", msg)
		return nil
	}
	thinking, msg := checkBedrockThinking(body)
	if msg != "" {
		bedrockError(w, http.StatusBadRequest, "ValidationException", "The model returned the following errors: "+msg)
		return nil
	}
	if apiErr := checkContract(r, body); apiErr != nil {
		bedrockError(w, apiErr.Code, "ValidationException", apiErr.Message)
		return nil
	}
	rest := strings.TrimPrefix(path, "/model/")
	model := rest[:strings.LastIndex(rest, "/")]
	q := &mockRequest{model: model, stream: strings.HasSuffix(path, "-stream"), limit: gjson.GetBytes(body, "inferenceConfig.maxTokens").Int()}
	if thinking {
		q.limit -= int64(countWords(mockThought)) // the thinking is output too
	}
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
	m.writeConverse(r.Context(), w, q, newMockAnswer(q), strings.Contains(model, "stream-break"), thinking)
	return nil
}

// serveBedrockEmbeddings answers InvokeModel of an embedding model in its
// own body, as strictly as Bedrock passes it on: Titan's (inputText,
// dimensions 256, 512 or 1024; the multimodal model inputText and/or a
// base64 inputImage, embeddingConfig.outputEmbeddingLength 256, 384 or
// 1024) with inputTextTokenCount, or Cohere's (texts, at most 96, a
// required input_type, embedding_types) with the
// X-Amzn-Bedrock-Input-Token-Count header. Embeddings are 8 values
// (Titan: 1024, or the dimensions asked) derived from the text.
func serveBedrockEmbeddings(w http.ResponseWriter, model string, body []byte) {
	req := gjson.ParseBytes(body)
	fail := func(msg string) { bedrockError(w, http.StatusBadRequest, "ValidationException", msg) }
	extraneous := func(known ...string) bool {
		bad := ""
		req.ForEach(func(k, _ gjson.Result) bool {
			if !slices.Contains(known, k.Str) {
				bad = k.Str
			}
			return bad == ""
		})
		if bad != "" {
			fail(fmt.Sprintf("Malformed input request: #: extraneous key [%s] is not permitted, please reformat your input and try again.", bad))
		}
		return bad != ""
	}
	vector := func(text string, n int) []float64 {
		sum := sha256.Sum256([]byte(text))
		v := make([]float64, n)
		for k := range v {
			v[k] = float64(int(sum[k%len(sum)])-128) / 128
		}
		return v
	}
	switch {
	case strings.Contains(model, "cohere.embed"):
		if extraneous("texts", "images", "input_type", "truncate", "embedding_types") {
			return
		}
		texts := req.Get("texts").Array()
		switch {
		case len(texts) == 0 || len(texts) > 96:
			fail("Malformed input request: #/texts: expected between 1 and 96 texts")
			return
		case !slices.Contains([]string{"search_document", "search_query", "classification", "clustering"}, req.Get("input_type").Str):
			fail("Malformed input request: #: required key [input_type] not found or not one of search_document, search_query, classification, clustering")
			return
		}
		var out [][]float64
		words := 0
		for _, t := range texts {
			out = append(out, vector(t.Str, 8))
			words += countWords(t.Str)
		}
		w.Header().Set("X-Amzn-Bedrock-Input-Token-Count", fmt.Sprint(words))
		var embeddings any = out
		if req.Get("embedding_types").Exists() {
			embeddings = map[string]any{"float": out}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": newID(""), "response_type": "embeddings_floats", "embeddings": embeddings, "texts": req.Get("texts").Value()})
	case strings.Contains(model, "titan-embed-image"):
		if extraneous("inputText", "inputImage", "embeddingConfig") {
			return
		}
		text, image := req.Get("inputText"), req.Get("inputImage")
		n := 1024
		if l := req.Get("embeddingConfig.outputEmbeddingLength"); l.Exists() {
			if !slices.Contains([]int64{256, 384, 1024}, l.Int()) {
				fail("Malformed input request: #/embeddingConfig/outputEmbeddingLength: must be 256, 384 or 1024")
				return
			}
			n = int(l.Int())
		}
		if !text.Exists() && !image.Exists() {
			fail("Malformed input request: #: one of inputText and inputImage is required")
			return
		}
		if image.Exists() {
			if _, err := base64.StdEncoding.DecodeString(image.Str); err != nil || image.Str == "" {
				fail("Malformed input request: #/inputImage: expected a base64 image")
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"embedding": vector(text.Str+image.Str, n), "inputTextTokenCount": countWords(text.Str)})
	case strings.Contains(model, "titan-embed"):
		if extraneous("inputText", "dimensions", "normalize", "embeddingTypes") {
			return
		}
		n := 1024
		if d := req.Get("dimensions"); d.Exists() {
			if !slices.Contains([]int64{256, 512, 1024}, d.Int()) {
				fail("Malformed input request: #/dimensions: must be 256, 512 or 1024")
				return
			}
			n = int(d.Int())
		}
		if req.Get("inputText").Type != gjson.String || req.Get("inputText").Str == "" {
			fail("Malformed input request: #: required key [inputText] not found")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"embedding": vector(req.Get("inputText").Str, n), "inputTextTokenCount": countWords(req.Get("inputText").Str)})
	default:
		fail("The provided model doesn't support embeddings.")
	}
}

// checkBedrockThinking checks an Anthropic model's extended thinking and
// the reasoningContent blocks sent back, as Anthropic checks them behind
// Bedrock: thinking reports whether it is on; msg is the model's refusal
// ("" for none).
func checkBedrockThinking(body []byte) (thinking bool, msg string) {
	req := gjson.ParseBytes(body)
	msgs := req.Get("messages").Array()
	for i, m := range msgs {
		for j, b := range m.Get("content").Array() {
			rc := b.Get("reasoningContent")
			if !rc.Exists() {
				continue
			}
			rt, red := rc.Get("reasoningText"), rc.Get("redactedContent")
			switch {
			case m.Get("role").Str != "assistant":
				return false, fmt.Sprintf("messages.%d.content.%d: thinking blocks are only allowed in assistant messages", i, j)
			case red.Exists() == rt.Exists():
				return false, fmt.Sprintf("messages.%d.content.%d.reasoningContent: exactly one of reasoningText and redactedContent", i, j)
			case red.Exists() && (red.Type != gjson.String || red.Str == ""):
				return false, fmt.Sprintf("messages.%d.content.%d.redacted_thinking.data: Field required", i, j)
			case rt.Exists() && !rt.Get("signature").Exists():
				return false, fmt.Sprintf("messages.%d.content.%d.thinking.signature: Field required", i, j)
			case rt.Exists() && rt.Get("signature").Str != mockSignature:
				return false, fmt.Sprintf("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
	}
	t := req.Get("additionalModelRequestFields.thinking")
	if t.Get("type").Str != "enabled" {
		return false, ""
	}
	budget, limit := t.Get("budget_tokens").Int(), req.Get("inferenceConfig.maxTokens").Int()
	switch {
	case budget < 1024:
		return false, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
	case limit <= budget:
		return false, "`max_tokens` must be greater than `thinking.budget_tokens`"
	case req.Get("inferenceConfig.temperature").Exists() || req.Get("inferenceConfig.topP").Exists():
		return false, "temperature and top_p may not be set when thinking is enabled"
	case req.Get("toolConfig.toolChoice.any").Exists() || req.Get("toolConfig.toolChoice.tool").Exists():
		return false, "Thinking may not be enabled when tool_choice forces tool use."
	}
	// The final assistant message, whose toolUse blocks the last user
	// message answers, starts with its thinking.
	if n := len(msgs); n > 0 && msgs[n-1].Get("content.#.toolResult").IsArray() && len(msgs[n-1].Get("content.#.toolResult").Array()) > 0 {
		for i := n - 1; i >= 0; i-- {
			m := msgs[i]
			if m.Get("role").Str != "assistant" {
				continue
			}
			first := m.Get("content.0")
			found := "text"
			switch {
			case first.Get("reasoningContent").Exists() || !m.Get("content.#.toolUse").IsArray() || len(m.Get("content.#.toolUse").Array()) == 0:
				return true, ""
			case first.Get("toolUse").Exists():
				found = "tool_use"
			}
			return true, fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, "+
				"a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "+
				"We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.", i, found)
		}
	}
	return true, ""
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
	// Cache points: type default, an optional ttl of 5m or 1h, and TTLs
	// that do not grow from one cache point to the next (the system's,
	// then the messages').
	last := ""
	cachePoint := func(where string, cp gjson.Result) string {
		if !cp.Exists() {
			return ""
		}
		if msg := unknown(where, cp, []string{"type", "ttl"}); msg != "" {
			return msg
		}
		if cp.Get("type").Str != "default" {
			return fmt.Sprintf("1 validation error detected: Value at '%s/type' failed to satisfy constraint: Member must satisfy enum value set: [default]", where)
		}
		ttl := cp.Get("ttl")
		if ttl.Exists() && ttl.Str != "5m" && ttl.Str != "1h" {
			return fmt.Sprintf("1 validation error detected: Value '%s' at '%s/ttl' failed to satisfy constraint: Member must satisfy enum value set: [5m, 1h]", ttl.Raw, where)
		}
		t := cmp.Or(ttl.Str, "5m")
		if last == "5m" && t == "1h" {
			return "A cache point with a 1h TTL cannot come after a cache point with a 5m TTL. Cache point TTLs must not increase from one cache point to the next."
		}
		last = t
		return ""
	}
	for j, b := range req.Get("system").Array() {
		if msg := cachePoint(fmt.Sprintf("/system/%d/cachePoint", j), b.Get("cachePoint")); msg != "" {
			return msg
		}
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
			if msg := cachePoint(fmt.Sprintf("/messages/%d/content/%d/cachePoint", i, j), b.Get("cachePoint")); msg != "" {
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
	points := gjson.GetBytes(body, "messages.#.content.#.cachePoint|@flatten").Array()
	if q.cachePoint = len(points) > 0; q.cachePoint {
		q.cacheTTL = cmp.Or(points[len(points)-1].Get("ttl").Str, "5m")
	}
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
func (m *Handler) writeConverse(ctx context.Context, w http.ResponseWriter, q *mockRequest, a *mockAnswer, brk, thinking bool) {
	out := a.completion()
	if thinking {
		out += countWords(mockThought)
	}
	usage := map[string]any{"inputTokens": a.prompt, "outputTokens": out, "totalTokens": a.prompt + out}
	switch {
	case strings.Contains(q.model, "cached"):
		usage["cacheReadInputTokens"] = a.prompt / 2
		usage["inputTokens"] = a.prompt - a.prompt/2
	case q.cachePoint:
		// The prompt up to the cache point, the whole of it, is written
		// for the cache point's TTL (the default 5 minutes, or 1 hour).
		usage["cacheWriteInputTokens"], usage["inputTokens"] = a.prompt, 0
		usage["cacheDetails"] = []map[string]any{{"inputTokens": a.prompt, "ttl": q.cacheTTL}}
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
		if thinking {
			content = append(content, map[string]any{"reasoningContent": map[string]any{"reasoningText": map[string]any{"text": mockThought, "signature": mockSignature}}})
		}
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
	first := 0 // the index of the first block after the thinking
	if thinking {
		send("event", "contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"reasoningContent": map[string]any{"text": mockThought}}})
		send("event", "contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"reasoningContent": map[string]any{"signature": mockSignature}}})
		send("event", "contentBlockStop", map[string]any{"contentBlockIndex": 0})
		first = 1
	}
	for i, c := range a.calls {
		i += first
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
		if !send("event", "contentBlockDelta", map[string]any{"contentBlockIndex": first, "delta": map[string]any{"text": a.delta(i)}}) {
			return
		}
	}
	if len(a.calls) == 0 {
		send("event", "contentBlockStop", map[string]any{"contentBlockIndex": first})
	}
	send("event", "messageStop", map[string]any{"stopReason": stop})
	send("event", "metadata", map[string]any{"usage": usage, "metrics": map[string]any{"latencyMs": 1}})
}
