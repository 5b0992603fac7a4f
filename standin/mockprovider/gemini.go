package mockprovider

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// Google's Gemini API, as strictly as Google serves it:
//
//   - POST .../models/<model>:generateContent and
//     :streamGenerateContent?alt=sse, at Google AI Studio's paths
//     (/v1beta/models/...) with the x-goog-api-key header (403 without),
//     or at Vertex AI's (/v1/projects/<p>/locations/<l>/publishers/google/
//     models/...) with a bearer access token the mock's own token endpoint
//     issued (401 otherwise);
//   - a member the API does not define is a 400 INVALID_ARGUMENT naming it
//     ("Unknown name"), at the top level, in generationConfig, a content
//     or a part; contents is required, roles are user and model;
//   - the answer echoes the last user text ("Mock answer from <model>:
//     ..."), one token a word, cut at generationConfig.maxOutputTokens
//     (finishReason MAX_TOKENS), with usageMetadata; a model name with
//     "safety" is blocked (finishReason SAFETY, no content), "thinking"
//     adds a thought part and thoughtsTokenCount, "cached" reports half the
//     prompt as cachedContentTokenCount; "error-429", "error-500",
//     "error-garbage" and "stream-break" inject those faults; a user text
//     "mock-tool-call: <name> <args>" of an offered function is answered
//     with its functionCall;
//   - a thinking model ("thinking" in its name, or a thinkingConfig that
//     asks for thought) signs its functionCall parts (thoughtSignature),
//     and, as Gemini 3 does, refuses a turn of a tool loop whose function
//     call parts come back without their signature, or with another; a
//     thinkingConfig with both a budget and a level, or an unknown level,
//     is refused.
//
// POST /token is an OAuth token endpoint for service accounts (the JWT
// bearer grant): it checks the assertion's form and claims and issues an
// access token for the key's client_email.

var geminiTopLevel = []string{"contents", "tools", "toolConfig", "safetySettings", "systemInstruction", "generationConfig", "cachedContent", "labels"}
var geminiGenerationConfig = []string{"stopSequences", "responseMimeType", "responseSchema", "responseJsonSchema", "candidateCount",
	"maxOutputTokens", "temperature", "topP", "topK", "seed", "presencePenalty", "frequencyPenalty", "responseLogprobs", "logprobs",
	"thinkingConfig", "responseModalities", "mediaResolution", "speechConfig"}
var geminiPart = []string{"text", "inlineData", "fileData", "functionCall", "functionResponse", "thought", "thoughtSignature",
	"executableCode", "codeExecutionResult", "videoMetadata"}

// geminiError writes Google's error shape.
func geminiError(w http.ResponseWriter, code int, status, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}

// isGeminiPath reports whether path is a model method of the Gemini API.
func isGeminiPath(path string) bool {
	i := strings.LastIndex(path, "/models/")
	return i >= 0 && (strings.HasSuffix(path, ":generateContent") || strings.HasSuffix(path, ":streamGenerateContent") ||
		strings.HasSuffix(path, ":batchEmbedContents"))
}

func (m *Handler) serveGemini(w http.ResponseWriter, r *http.Request, path string) error {
	rest := path[strings.LastIndex(path, "/models/")+len("/models/"):]
	model, method, _ := strings.Cut(rest, ":")
	vertex := strings.HasPrefix(path, "/v1/projects/")
	switch {
	case r.Method != http.MethodPost:
		writeMethodNotAllowed(w, http.MethodPost)
		return nil
	case vertex && !m.validToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")):
		geminiError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.")
		return nil
	case !vertex && r.Header.Get("X-Goog-Api-Key") == "":
		geminiError(w, http.StatusForbidden, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		return nil
	case r.Header.Get("Authorization") != "" && !vertex:
		geminiError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token.")
		return nil
	case method == "streamGenerateContent" && r.URL.Query().Get("alt") != "sse":
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "mock: streamGenerateContent is served with alt=sse only")
		return nil
	}
	body, apiErr := readMockBody(w, r)
	if apiErr != nil {
		geminiError(w, apiErr.Code, "INVALID_ARGUMENT", apiErr.Message)
		return nil
	}
	if method == "batchEmbedContents" {
		serveGeminiEmbeddings(w, model, body)
		return nil
	}
	if msg := checkGemini(body); msg != "" {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg)
		return nil
	}
	if apiErr := checkContract(r, body); apiErr != nil {
		geminiError(w, apiErr.Code, "INVALID_ARGUMENT", apiErr.Message)
		return nil
	}
	thinking := geminiThinks(model, body)
	if msg := checkThoughtSignatures(body, thinking); msg != "" {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg)
		return nil
	}
	q := &mockRequest{model: model, stream: method == "streamGenerateContent", limit: gjson.GetBytes(body, "generationConfig.maxOutputTokens").Int()}
	parseGeminiRequest(body, q)
	switch {
	case strings.Contains(model, "error-429"):
		geminiError(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).")
		return nil
	case strings.Contains(model, "error-500"):
		geminiError(w, http.StatusInternalServerError, "INTERNAL", "An internal error has occurred.")
		return nil
	case strings.Contains(model, "error-garbage"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"candidates":[{"content":`))
		return nil
	}
	m.writeGemini(r.Context(), w, q, newMockAnswer(q), strings.Contains(model, "stream-break"), thinking)
	return nil
}

// checkGemini names the first member the API does not define, as Google
// refuses it; "" when the body is a valid request.
func checkGemini(body []byte) string {
	unknown := func(where string, obj gjson.Result, known []string) string {
		msg := ""
		obj.ForEach(func(k, _ gjson.Result) bool {
			if !slices.Contains(known, k.Str) {
				msg = fmt.Sprintf("Invalid JSON payload received. Unknown name %q at '%s': Cannot find field.", k.Str, where)
				return false
			}
			return true
		})
		return msg
	}
	req := gjson.ParseBytes(body)
	if !req.IsObject() {
		return "Invalid JSON payload received."
	}
	if msg := unknown("", req, geminiTopLevel); msg != "" {
		return msg
	}
	if msg := unknown("generation_config", req.Get("generationConfig"), geminiGenerationConfig); msg != "" {
		return msg
	}
	contents := req.Get("contents").Array()
	if len(contents) == 0 {
		return "* GenerateContentRequest.contents: contents is not specified"
	}
	check := func(where string, c gjson.Result) string {
		if msg := unknown(where, c, []string{"role", "parts"}); msg != "" {
			return msg
		}
		for j, p := range c.Get("parts").Array() {
			if msg := unknown(fmt.Sprintf("%s.parts[%d]", where, j), p, geminiPart); msg != "" {
				return msg
			}
		}
		return ""
	}
	for i, c := range contents {
		if role := c.Get("role").Str; role != "user" && role != "model" {
			return fmt.Sprintf("Please use a valid role: user, model. (contents[%d].role %q)", i, role)
		}
		if msg := check(fmt.Sprintf("contents[%d]", i), c); msg != "" {
			return msg
		}
	}
	if s := req.Get("systemInstruction"); s.Exists() {
		return check("system_instruction", s)
	}
	return ""
}

// serveGeminiEmbeddings answers batchEmbedContents as strictly as Google:
// requests (at most 100) each naming this model, a content of text
// parts, and only the members the API defines; each embedding is 8
// values (outputDimensionality when set) derived from its text.
func serveGeminiEmbeddings(w http.ResponseWriter, model string, body []byte) {
	req := gjson.ParseBytes(body)
	fail := func(msg string) { geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg) }
	var unknown string
	req.ForEach(func(k, _ gjson.Result) bool {
		if k.Str != "requests" {
			unknown = k.Str
		}
		return unknown == ""
	})
	if unknown != "" {
		fail(fmt.Sprintf("Invalid JSON payload received. Unknown name %q: Cannot find field.", unknown))
		return
	}
	reqs := req.Get("requests").Array()
	if len(reqs) == 0 || len(reqs) > 100 {
		fail("* BatchEmbedContentsRequest.requests: between 1 and 100 requests")
		return
	}
	var out []map[string]any
	for i, r := range reqs {
		bad := ""
		r.ForEach(func(k, _ gjson.Result) bool {
			if !slices.Contains([]string{"model", "content", "taskType", "title", "outputDimensionality"}, k.Str) {
				bad = k.Str
			}
			return bad == ""
		})
		switch {
		case bad != "":
			fail(fmt.Sprintf("Invalid JSON payload received. Unknown name %q at 'requests[%d]': Cannot find field.", bad, i))
			return
		case r.Get("model").Str != "models/"+model:
			fail(fmt.Sprintf("Model names should be the same in BatchEmbedContentsRequest and EmbedContentRequest. (requests[%d].model %q)", i, r.Get("model").Str))
			return
		case len(r.Get("content.parts").Array()) == 0:
			fail(fmt.Sprintf("* BatchEmbedContentsRequest.requests[%d].content.parts: contents.parts must not be empty.", i))
			return
		}
		var text strings.Builder
		for j, p := range r.Get("content.parts").Array() {
			if !p.Get("text").Exists() || len(p.Map()) != 1 {
				fail(fmt.Sprintf("* BatchEmbedContentsRequest.requests[%d].content.parts[%d]: only text parts are supported by this model", i, j))
				return
			}
			text.WriteString(p.Get("text").Str)
		}
		if t := r.Get("taskType"); t.Exists() && !slices.Contains([]string{"RETRIEVAL_QUERY", "RETRIEVAL_DOCUMENT", "SEMANTIC_SIMILARITY",
			"CLASSIFICATION", "CLUSTERING", "QUESTION_ANSWERING", "FACT_VERIFICATION", "CODE_RETRIEVAL_QUERY"}, t.Str) {
			fail(fmt.Sprintf("Invalid value at 'requests[%d].task_type' (type.googleapis.com/google.ai.generativelanguage.v1beta.TaskType), %q", i, t.Str))
			return
		}
		n := 8
		if d := r.Get("outputDimensionality"); d.Exists() {
			if d.Int() < 1 || d.Int() > 3072 {
				fail(fmt.Sprintf("* BatchEmbedContentsRequest.requests[%d].output_dimensionality: must be between 1 and 3072", i))
				return
			}
			n = int(d.Int())
		}
		sum := sha256.Sum256([]byte(text.String()))
		values := make([]float64, n)
		for k := range values {
			values[k] = float64(int(sum[k%len(sum)])-128) / 128
		}
		out = append(out, map[string]any{"values": values})
	}
	writeJSON(w, http.StatusOK, map[string]any{"embeddings": out})
}

// mockThoughtSignature signs the mock's function calls when it thinks.
const mockThoughtSignature = "bW9jay10aG91Z2h0LXNpZ25hdHVyZQ=="

// geminiThinks reports whether the model thinks: a thinking model, or a
// thinkingConfig asking for thought.
func geminiThinks(model string, body []byte) bool {
	tc := gjson.GetBytes(body, "generationConfig.thinkingConfig")
	return strings.Contains(model, "thinking") || tc.Get("thinkingBudget").Int() != 0 || tc.Get("thinkingLevel").Exists()
}

// checkThoughtSignatures refuses what Gemini refuses of thinking: a
// budget and a level together, an unknown level, a signature it did not
// give, and, when the model thinks, a function call of the current turn
// (the contents since the last user text) whose first functionCall part
// comes back without its signature. "" when none.
func checkThoughtSignatures(body []byte, thinking bool) string {
	tc := gjson.GetBytes(body, "generationConfig.thinkingConfig")
	if tc.Get("thinkingBudget").Exists() && tc.Get("thinkingLevel").Exists() {
		return "You can only set one of thinking budget and thinking level."
	}
	if l := tc.Get("thinkingLevel"); l.Exists() && !slices.Contains([]string{"minimal", "low", "medium", "high"}, l.Str) {
		return fmt.Sprintf("Invalid value at 'generation_config.thinking_config.thinking_level' (type.googleapis.com/google.ai.generativelanguage.v1beta.ThinkingConfig.ThinkingLevel), %q", l.Str)
	}
	contents := gjson.GetBytes(body, "contents").Array()
	turn := 0
	for i, c := range contents {
		for _, p := range c.Get("parts").Array() {
			if sig := p.Get("thoughtSignature"); sig.Exists() && sig.Str != mockThoughtSignature {
				return fmt.Sprintf("Corrupted thought signature. (contents[%d])", i)
			}
		}
		if c.Get("role").Str == "user" && c.Get("parts.#.text").IsArray() && len(c.Get("parts.#.text").Array()) > 0 {
			turn = i
		}
	}
	if !thinking {
		return ""
	}
	for i := turn; i < len(contents); i++ {
		c := contents[i]
		if c.Get("role").Str != "model" {
			continue
		}
		for j, p := range c.Get("parts").Array() {
			if !p.Get("functionCall").Exists() {
				continue
			}
			if !p.Get("thoughtSignature").Exists() {
				return fmt.Sprintf("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, "+
					"and missing thought_signature may lead to degraded model performance. Additional data, function call `%s` , position %d. "+
					"Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", p.Get("functionCall.name").Str, j+1)
			}
			break // only a step's first call is signed
		}
	}
	return ""
}

// parseGeminiRequest reads the prompt, the last user text, and the tool
// calls a user text scripts.
func parseGeminiRequest(body []byte, q *mockRequest) {
	texts := func(c gjson.Result) string {
		var t []string
		for _, p := range c.Get("parts").Array() {
			if s := p.Get("text"); s.Exists() {
				t = append(t, s.Str)
			}
			if fr := p.Get("functionResponse.response"); fr.Exists() {
				if c := fr.Get("content"); c.Type == gjson.String {
					t = append(t, c.Str)
				} else {
					t = append(t, fr.Raw)
				}
			}
		}
		return strings.Join(t, " ")
	}
	if s := gjson.GetBytes(body, "systemInstruction"); s.Exists() {
		q.prompt += countWords(texts(s))
	}
	contents := gjson.GetBytes(body, "contents").Array()
	for _, c := range contents {
		q.prompt += countWords(texts(c)) + mockMessageOverhead
		if c.Get("role").Str == "user" {
			q.lastUser = texts(c)
		}
	}
	if n := len(contents); n > 0 && contents[n-1].Get("parts.0.functionResponse").Exists() {
		q.lastUser = "tool result " + texts(contents[n-1])
		return
	}
	var offered []string
	gjson.GetBytes(body, "tools.#.functionDeclarations.#.name").ForEach(func(_, names gjson.Result) bool {
		names.ForEach(func(_, n gjson.Result) bool { offered = append(offered, n.Str); return true })
		return true
	})
	q.calls = scriptedCalls(q.lastUser, offered)
}

// writeGemini answers with a GenerateContentResponse, or its SSE events.
func (m *Handler) writeGemini(ctx context.Context, w http.ResponseWriter, q *mockRequest, a *mockAnswer, brk, signs bool) {
	blocked := strings.Contains(q.model, "safety")
	thinking := strings.Contains(q.model, "thinking")
	usage := map[string]any{"promptTokenCount": a.prompt, "candidatesTokenCount": a.completion(), "totalTokenCount": a.total()}
	if strings.Contains(q.model, "cached") {
		usage["cachedContentTokenCount"] = a.prompt / 2
	}
	var thought []map[string]any
	if thinking {
		thought = []map[string]any{{"text": "Considering the question.", "thought": true}}
		usage["thoughtsTokenCount"] = 5
		usage["totalTokenCount"] = a.total() + 5
	}
	finish := "STOP"
	if a.truncated {
		finish = "MAX_TOKENS"
	}
	var calls []map[string]any
	for i, c := range a.calls {
		call := map[string]any{"functionCall": map[string]any{"name": c.Name, "args": json.RawMessage(c.Arguments)}}
		if signs && i == 0 {
			call["thoughtSignature"] = mockThoughtSignature
		}
		calls = append(calls, call)
	}
	answer := func(parts []map[string]any, finish string, usage map[string]any) map[string]any {
		cand := map[string]any{"index": 0}
		if parts != nil {
			cand["content"] = map[string]any{"role": "model", "parts": parts}
		}
		if finish != "" {
			cand["finishReason"] = finish
		}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": q.model, "responseId": "mock-" + newID("")[:12]}
		if usage != nil {
			out["usageMetadata"] = usage
		}
		return out
	}
	if blocked {
		usage = map[string]any{"promptTokenCount": a.prompt, "totalTokenCount": a.prompt}
		res := answer(nil, "SAFETY", usage)
		res["candidates"].([]any)[0].(map[string]any)["safetyRatings"] = []any{map[string]any{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": true}}
		if q.stream {
			newSSEWriter(w).send("", res)
		} else {
			writeJSON(w, http.StatusOK, res)
		}
		return
	}
	if !q.stream {
		parts := append([]map[string]any{}, thought...)
		if len(calls) > 0 {
			parts = append(parts, calls...)
		} else {
			parts = append(parts, map[string]any{"text": a.text()})
		}
		writeJSON(w, http.StatusOK, answer(parts, finish, usage))
		return
	}
	s := newSSEWriter(w)
	if thinking {
		s.send("", answer(thought, "", nil))
	}
	if len(calls) > 0 {
		s.send("", answer(calls, finish, usage))
		return
	}
	n := 0
	if !streamDeltas(ctx, s, a, time.Duration(m.ChunkDelay), brk, func(d string) {
		n++
		if n == len(a.words) {
			return // the last words go with the finish
		}
		s.send("", answer([]map[string]any{{"text": d}}, "", map[string]any{"promptTokenCount": a.prompt}))
	}) {
		return
	}
	last := ""
	if len(a.words) > 0 {
		last = a.delta(len(a.words) - 1)
	}
	s.send("", answer([]map[string]any{{"text": last}}, finish, usage))
}

// serveToken is the OAuth token endpoint of service account keys: the JWT
// bearer grant, its assertion signed by the key (RS256), with the
// cloud-platform scope. The signature is not verified (the mock does not
// know the key); the form and the claims are.
func (m *Handler) serveToken(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return nil
	}
	if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return nil
	}
	seg := strings.Split(r.PostForm.Get("assertion"), ".")
	var head, claims struct {
		Alg   string `json:"alg"`
		Iss   string `json:"iss"`
		Scope string `json:"scope"`
		Aud   string `json:"aud"`
		Exp   int64  `json:"exp"`
	}
	if len(seg) != 3 || decodeSeg(seg[0], &head) != nil || decodeSeg(seg[1], &claims) != nil || head.Alg != "RS256" ||
		claims.Iss == "" || claims.Exp == 0 || !strings.Contains(claims.Scope, "https://www.googleapis.com/auth/cloud-platform") {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "Invalid JWT"})
		return nil
	}
	sum := sha256.Sum256([]byte(claims.Iss))
	tok := "ya29.mock-" + hex.EncodeToString(sum[:8])
	issuedTokens.Store(tok, true)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3599})
	return nil
}

func decodeSeg(s string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// issuedTokens are the access tokens the token endpoint issued, valid at
// every mock of the process.
var issuedTokens sync.Map

// validToken reports whether the token endpoint issued tok.
func (m *Handler) validToken(tok string) bool {
	_, ok := issuedTokens.Load(tok)
	return ok
}
