// Package mockprovider is a stand-in OpenAI-compatible provider, and
// stand-ins of the web search engines' APIs, served by Caddy itself for
// demos, tests and benchmarks. It is not a real provider: answers echo the
// request and count one token per word.
package mockprovider

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect/contract"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/standin/searchapis"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// Handler is an OpenAI-compatible upstream served by Caddy itself, for
// demos, tests and benchmarks: the module tollgate_mock_provider. It answers, by path suffix, so that both
// /v1/... and /api/v1/... work:
//
//	POST .../chat/completions  Chat Completions, plain or streamed
//	POST .../responses         Responses API, plain or streamed
//	POST .../messages          Anthropic's Messages API, plain or streamed,
//	                           always strict (serveAnthropic)
//	GET  .../models            a fixed model list
//	POST .../moderations       OpenAI's moderation shape, strict
//	                           (serveModeration)
//	/search-api/...            stand-ins of the Exa, Firecrawl, Parallel and
//	                           SearXNG search APIs (searchapis.APIs), so
//	                           web search works offline
//	GET  /pages/...            a small web site (servePage), so web fetch
//	                           works offline
//
// and passes every other path to the next handler.
//
// The answer is deterministic: "Mock answer from <model>: " followed by the
// last user message echoed back (at most mockEchoWords words), cut to
// max_tokens / max_completion_tokens / max_output_tokens words, in which case
// finish_reason is "length" (Responses: status "incomplete").
//
// Tokens are counted as one token per whitespace-separated word of text.
// Completion tokens are the words of the answer. Prompt tokens are the words
// of every input message (Responses: instructions count as one message) plus
// 4 per message. With PromptTokens "bytes" the prompt is counted as the
// worst a byte-level tokenizer can do instead: a token per UTF-8 byte of
// every text and name, 4 per message, 3 to prime the answer, and
// mediaPartTokens per image or audio part. Streamed and plain answers to the
// same request report the same usage; streamed chat completions end with a
// usage chunk (in strict mode only when stream_options.include_usage asks).
//
// With Strict, requests are checked as OpenAI checks them (checkStrict).
//
// The request's model name injects faults (substring match, so they combine
// with any prefix, as in "gpt-4o-slow-error-500"):
//
//	error-400      400 invalid_request_error, as for a request the provider refuses
//	error-429      429 rate_limit_error with Retry-After: 1
//	error-500      500 server_error
//	error-502      502 bad gateway
//	error-garbage  200 with a body that is not JSON
//	stream-break   streamed: a few chunks, then the connection is cut with no
//	               usage and no [DONE]; plain: half of the JSON body, then cut
//	slow           an extra 2s before answering
//
// and others ask for other kinds of output (tool calls, reasoning,
// refusals, audio, images), a stream that stalls, a usage report that is
// wrong, or an empty answer (mockShape).
//
// A request header X-Mock-Latency (a duration such as 250ms) overrides the
// configured latency for that request.
type Handler struct {
	// Latency is the delay before the first byte of every answer.
	Latency caddy.Duration `json:"latency,omitempty"`
	// ChunkDelay is the delay between two streamed text chunks. Default: 0.
	ChunkDelay caddy.Duration `json:"chunk_delay,omitempty"`
	// PromptTokens is how prompt tokens are counted: "words" (default),
	// "bytes" (the adversarial count of dense text), or an OpenAI
	// encoding ("o200k_base", "cl100k_base"): as OpenAI bills a model of
	// that encoding (OpenAIPromptTokens).
	PromptTokens string `json:"prompt_tokens,omitempty"`
	// Strict validates requests as OpenAI does (checkStrict): unknown
	// parameters are refused, streams report usage only when asked, and
	// answers name a dated model.
	Strict bool `json:"strict,omitempty"`
	// NonReasoningModels are models (by name prefix) that, in strict
	// mode, refuse reasoning_effort on chat completions as OpenAI's
	// gpt-4o and gpt-4.1 do (400 unsupported_parameter).
	NonReasoningModels []string `json:"non_reasoning_models,omitempty"`
	// NoSystemMessages: the Messages mode refuses system messages inside
	// messages, and the mid-conversation-system beta, as an
	// Anthropic-style API without that beta does.
	NoSystemMessages bool `json:"no_system_messages,omitempty"`

	// anthropicCache is the Anthropic mode's prompt cache.
	anthropicCache *anthropicCache
}

const (
	// mockEchoWords caps the echoed part of the answer so that a huge prompt
	// does not produce a huge answer.
	mockEchoWords = 128
	// mockMessageOverhead is the prompt tokens charged per message on top of
	// its words, like the role and separators of real chat templates.
	mockMessageOverhead = 4
	// mockPrimingTokens is what a template adds to prime the answer,
	// counted with PromptTokens "bytes".
	mockPrimingTokens = 3
	// mockBreakAfter is how many text chunks stream-break sends before it
	// cuts the connection.
	mockBreakAfter = 3
	// mockSlowDelay is the extra delay of "slow" models.
	mockSlowDelay = 2 * time.Second
	// mockMaxBody bounds the request body read into memory.
	mockMaxBody = 8 << 20
	// mockLatencyHeader overrides Latency for one request.
	mockLatencyHeader = "X-Mock-Latency"
	// mockModelsCreated is the fixed creation time of the listed models.
	mockModelsCreated = 1735689600 // 2025-01-01
	// mockNoUserText stands in for the echo when there is no user text.
	mockNoUserText = "(no user message)"
	// mediaPartTokens is what an image or audio part counts with
	// PromptTokens "bytes": the gateway's default bound of a media part
	// (prompt.DefaultMediaPartTokens), so that its prompt bound holds.
	mediaPartTokens = 8192
)

// mockFingerprint is the mock's system_fingerprint.
const mockFingerprint = "fp_tollgate_mock"

// mockModels are listed by GET .../models; any other name works as well.
var mockModels = []string{
	"tollgate-mock",
	"tollgate-mock-slow",
	"tollgate-mock-stream-break",
	"tollgate-mock-error-400",
	"tollgate-mock-error-429",
	"tollgate-mock-error-500",
	"tollgate-mock-error-502",
	"tollgate-mock-error-garbage",
}

// CaddyModule returns the Caddy module information.
func (*Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tollgate_mock_provider",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Validate refuses negative delays and an unknown prompt_tokens.
func (m *Handler) Validate() error {
	if m.Latency < 0 {
		return fmt.Errorf("latency must not be negative: %v", time.Duration(m.Latency))
	}
	if m.ChunkDelay < 0 {
		return fmt.Errorf("chunk_delay must not be negative: %v", time.Duration(m.ChunkDelay))
	}
	if !validPromptTokens(m.PromptTokens) {
		return fmt.Errorf(`prompt_tokens must be "words", "bytes", "o200k_base" or "cl100k_base": %q`, m.PromptTokens)
	}
	return nil
}

// ServeHTTP answers the mock routes and passes anything else to next.
func (m *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case strings.HasPrefix(path, mockSearchPrefix+"/"):
		// Offline search engines (searchapis.APIs), e.g. SearXNG at
		// <mock>/search-api/search.
		http.StripPrefix(mockSearchPrefix, mockSearchAPI).ServeHTTP(w, r)
		return nil
	case strings.HasPrefix(path, mockPagesPrefix+"/"):
		servePage(w, r)
		return nil
	case strings.Contains(path, azurePrefix):
		return m.serveAzure(w, r, path)
	case isGeminiPath(path):
		return m.serveGemini(w, r, path)
	case isBedrockPath(path):
		return m.serveBedrock(w, r, path)
	case path == "/token":
		return m.serveToken(w, r)
	case strings.HasSuffix(path, "/v2/rerank"):
		return m.serveCohereRerank(w, r)
	case strings.HasSuffix(path, "/images/generations"):
		return m.serveOpenAIImages(w, r)
	case strings.HasSuffix(path, "/audio/speech"):
		return m.serveOpenAISpeech(w, r)
	case strings.HasSuffix(path, "/audio/transcriptions"):
		return m.serveOpenAITranscriptions(w, r)
	case strings.HasSuffix(path, "/chat/completions"):
		return m.serveGeneration(w, r, "chat", parseChatRequest, m.writeChat)
	case strings.HasSuffix(path, "/responses"):
		return m.serveGeneration(w, r, "responses", parseResponsesRequest, m.writeResponses)
	case strings.HasSuffix(path, "/models"):
		return m.serveModels(w, r)
	case strings.HasSuffix(path, "/messages"):
		return m.serveAnthropic(w, r)
	case strings.HasSuffix(path, "/moderations"):
		return m.serveModeration(w, r)
	}
	return next.ServeHTTP(w, r)
}

// mockSearchPrefix is where the mock serves stand-ins of the search
// engines' APIs (searchapis.APIs).
const mockSearchPrefix = "/search-api"

var mockSearchAPI = searchapis.New()

// mockRequest is what the mock needs from a generation request.
type mockRequest struct {
	model    string
	stream   bool
	limit    int64 // max completion tokens; 0 is unlimited
	prompt   int   // prompt tokens
	bytes    bool  // count prompt tokens as bytes (Handler.PromptTokens)
	lastUser string
	// cachePoint: a Converse request marks a prefix to cache, for
	// cacheTTL (5m or 1h: its last cache point's).
	cachePoint bool
	cacheTTL   string
	// Responses only, echoed back on the response object.
	instructions    *string
	maxOutputTokens *int64
	// search is the request's web search, answered with cited sources.
	search mockSearch
	// answerModel is the model named in the answer.
	answerModel string
	// streamUsage: a stream ends with a usage chunk (chat completions).
	streamUsage bool
	// calls are the scripted tool calls that answer (scriptedCalls).
	calls []mockToolCall
}

// mockAnswer is the generated text, split into stream chunks.
type mockAnswer struct {
	words     []string
	verbatim  bool // words hold their own spaces (a scripted answer)
	truncated bool
	prompt    int
	calls     []mockToolCall // an answer of tool calls has no words
}

func (a *mockAnswer) text() string {
	if a.verbatim {
		return strings.Join(a.words, "")
	}
	return strings.Join(a.words, " ")
}
func (a *mockAnswer) completion() int {
	n := len(a.words)
	for _, c := range a.calls {
		n += c.tokens()
	}
	return n
}

func (a *mockAnswer) total() int { return a.prompt + a.completion() }

// delta is the i-th stream chunk; the chunks concatenate to text().
func (a *mockAnswer) delta(i int) string {
	if i == 0 || a.verbatim {
		return a.words[i]
	}
	return " " + a.words[i]
}

func newMockAnswer(q *mockRequest) *mockAnswer {
	if len(q.calls) > 0 {
		return &mockAnswer{prompt: q.prompt, calls: q.calls}
	}
	if text, ok := scriptedAnswer(q.lastUser); ok {
		a := &mockAnswer{words: verbatimPieces(text), verbatim: true, prompt: q.prompt}
		if q.limit > 0 && int64(len(a.words)) > q.limit {
			a.words, a.truncated = a.words[:q.limit], true
		}
		return a
	}
	echo := strings.Fields(q.lastUser)
	if len(echo) > mockEchoWords {
		echo = echo[:mockEchoWords]
	}
	if len(echo) == 0 {
		echo = strings.Fields(mockNoUserText)
	}
	// Fields again so that a model name with spaces is still counted by the
	// one-token-per-word rule.
	words := strings.Fields("Mock answer from " + q.model + ": " + strings.Join(echo, " "))
	if mockCites(q.model) {
		words = append(words, mockCiteWords()...)
	}
	words = append(words, q.search.citeWords()...)
	a := &mockAnswer{words: words, prompt: q.prompt}
	if q.limit > 0 && int64(len(words)) > q.limit {
		a.words, a.truncated = words[:q.limit], true
	}
	return a
}

// countWords is the token counting rule: one token per whitespace-separated
// word.
func countWords(s string) int { return len(strings.Fields(s)) }

// contentText returns the text of a message content: a string, or the text
// fields of an array of parts, joined by spaces so that words of adjacent
// parts stay apart. Parts without text, such as images, count nothing.
func contentText(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.Str
	}
	if !content.IsArray() {
		return ""
	}
	var b strings.Builder
	for _, part := range content.Array() {
		if t := part.Get("text"); t.Type == gjson.String {
			b.WriteString(t.Str)
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// positiveInt reads an optional positive integer field; 0 means absent.
func positiveInt(body []byte, field string) int64 {
	if v := gjson.GetBytes(body, field); v.Type == gjson.Number && v.Int() > 0 {
		return v.Int()
	}
	return 0
}

func parseChatRequest(body []byte, q *mockRequest) {
	q.limit = positiveInt(body, "max_completion_tokens")
	if q.limit == 0 {
		q.limit = positiveInt(body, "max_tokens")
	}
	for _, msg := range gjson.GetBytes(body, "messages").Array() {
		text := contentText(msg.Get("content"))
		q.prompt += q.messageTokens(text, msg)
		if msg.Get("role").Str == "user" {
			q.lastUser = text
		}
	}
	q.prime()
	q.scriptTurn(body)
}

// messageTokens counts a message of the text, or of msg's content and
// name when counting bytes.
func (q *mockRequest) messageTokens(text string, msg gjson.Result) int {
	if !q.bytes {
		return countWords(text) + mockMessageOverhead
	}
	n := len(msg.Get("name").Str) + mockMessageOverhead
	content := msg.Get("content")
	if !content.IsArray() {
		return n + len(content.Str)
	}
	for _, part := range content.Array() {
		switch part.Get("type").Str {
		case "image_url", "input_image", "input_audio":
			n += mediaPartTokens
		default:
			n += len(part.Get("text").Str)
		}
	}
	return n
}

// textTokens counts a text standing as a message (instructions, a string
// input).
func (q *mockRequest) textTokens(text string) int {
	if q.bytes {
		return len(text) + mockMessageOverhead
	}
	return countWords(text) + mockMessageOverhead
}

// prime adds the tokens that prime the answer, when counting bytes.
func (q *mockRequest) prime() {
	if q.bytes {
		q.prompt += mockPrimingTokens
	}
}

func parseResponsesRequest(body []byte, q *mockRequest) {
	if n := positiveInt(body, "max_output_tokens"); n > 0 {
		q.limit, q.maxOutputTokens = n, &n
	}
	q.prime()
	if ins := gjson.GetBytes(body, "instructions"); ins.Type == gjson.String {
		q.instructions = &ins.Str
		q.prompt += q.textTokens(ins.Str)
	}
	input := gjson.GetBytes(body, "input")
	if input.Type == gjson.String {
		q.prompt += q.textTokens(input.Str)
		q.lastUser = input.Str
		return
	}
	// Items without content (function calls and their outputs) count only
	// the per-message overhead.
	for _, item := range input.Array() {
		text := contentText(item.Get("content"))
		q.prompt += q.messageTokens(text, item)
		if item.Get("role").Str == "user" {
			q.lastUser = text
		}
	}
}

// serveGeneration reads and checks a generation request, waits, injects the
// model's fault if any, and lets write answer.
func (m *Handler) serveGeneration(w http.ResponseWriter, r *http.Request, api string,
	parse func([]byte, *mockRequest), write func(context.Context, http.ResponseWriter, *mockRequest, *mockAnswer, bool),
) error {
	if r.Method != http.MethodPost {
		writeMethodNotAllowed(w, http.MethodPost)
		return nil
	}
	latency, apiErr := m.requestLatency(r)
	if apiErr != nil {
		writeError(w, apiErr)
		return nil
	}
	body, apiErr := readMockBody(w, r)
	if apiErr != nil {
		writeError(w, apiErr)
		return nil
	}
	q := &mockRequest{
		model:  gjson.GetBytes(body, "model").Str,
		stream: gjson.GetBytes(body, "stream").Bool(),
		bytes:  m.PromptTokens == "bytes",
	}
	if q.model == "" {
		writeError(w, badRequest("model is required"))
		return nil
	}
	q.answerModel, q.streamUsage = q.model, true
	if m.Strict {
		if !checkStrict(w, r.Header, body, api) || !m.checkReasoning(w, body, q.model, api) {
			return nil
		}
		q.answerModel += strictDated
		q.streamUsage = gjson.GetBytes(body, "stream_options.include_usage").Bool()
	}
	if apiErr := checkContract(r, body); apiErr != nil {
		writeError(w, apiErr)
		return nil
	}
	parse(body, q)
	if enc, err := tokenizer.Get(m.PromptTokens); err == nil {
		q.prompt = OpenAIPromptTokens(enc, api, body)
	}
	parseMockSearch(body, q)
	shape, shaped := shapeOf(q.model)
	if shaped {
		if e := shape.check(body, api); e != nil {
			writeError(w, e)
			return nil
		}
	}

	if strings.Contains(q.model, "slow") {
		latency += mockSlowDelay
	}
	if !sleepCtx(r.Context(), latency) {
		return nil // the client left; nobody reads an answer
	}
	if writeInjectedError(w, q.model) {
		return nil
	}
	if shaped {
		m.writeShaped(r.Context(), w, q, newMockAnswer(q), shape, api)
		return nil
	}
	write(r.Context(), w, q, newMockAnswer(q), strings.Contains(q.model, "stream-break"))
	return nil
}

// requestLatency is the configured latency, or the X-Mock-Latency header's.
func (m *Handler) requestLatency(r *http.Request) (time.Duration, *apiError) {
	v := r.Header.Get(mockLatencyHeader)
	if v == "" {
		return time.Duration(m.Latency), nil
	}
	d, err := caddy.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, badRequest("invalid " + mockLatencyHeader + " header: " + strconv.Quote(v))
	}
	return d, nil
}

// readMockBody reads the body and checks that it is a JSON object.
func readMockBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, mockMaxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return nil, &apiError{Code: http.StatusRequestEntityTooLarge, Message: "request body too large"}
			}
			return nil, badRequest("reading request body: " + err.Error())
		}
	}
	if !jsoncheck.Valid(body) || !gjson.ParseBytes(body).IsObject() {
		return nil, badRequest("request body must be a JSON object")
	}
	return body, nil
}

// checkContract refuses, as the real provider would, a body its API's
// contract (package contract) refuses: a translation that breaks a
// provider's contract fails its test at once. It runs after the mock's own
// checks, whose messages are the provider's words.
func checkContract(r *http.Request, body []byte) *apiError {
	if api := contract.APIOf(r.URL.Path); api != "" {
		if err := contract.Validate(api, body); err != nil {
			return badRequest("contract: " + err.Error())
		}
	}
	return nil
}

// openAIError is OpenAI's error body, which clients of a real upstream
// parse; the mock's own refusals use apiError instead.
type openAIError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

// writeInjectedError answers the fault the model name asks for, if any.
func writeInjectedError(w http.ResponseWriter, model string) bool {
	var status int
	var e openAIError
	switch {
	case strings.Contains(model, "error-400"):
		status = http.StatusBadRequest
		e.Error.Message, e.Error.Type, e.Error.Code = "Invalid request", "invalid_request_error", "invalid_value"
	case strings.Contains(model, "error-429"):
		status = http.StatusTooManyRequests
		e.Error.Message, e.Error.Type, e.Error.Code = "Rate limit exceeded", "rate_limit_error", "rate_limit_exceeded"
		w.Header().Set("Retry-After", "1")
	case strings.Contains(model, "error-500"):
		status = http.StatusInternalServerError
		e.Error.Message, e.Error.Type, e.Error.Code = "The server had an error while processing your request", "server_error", "internal_error"
	case strings.Contains(model, "error-502"):
		status = http.StatusBadGateway
		e.Error.Message, e.Error.Type, e.Error.Code = "Bad gateway", "server_error", "bad_gateway"
	case strings.Contains(model, "error-garbage"):
		// A JSON content type on a broken body is the nastier, more
		// realistic case for a client.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("<html>upstream hiccup: this is not JSON {\"id\": \n"))
		return true
	default:
		return false
	}
	writeJSON(w, status, e)
	return true
}

func writeMethodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, &apiError{Code: http.StatusMethodNotAllowed, Message: "method not allowed"})
}

// apiError is a request the mock refuses, in the gateway's error shape
// {"error":{"code","message"}}, so that a refusal reads the same whether
// the gateway or its upstream made it.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func badRequest(msg string) *apiError { return &apiError{Code: http.StatusBadRequest, Message: msg} }

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Code, struct {
		Error *apiError `json:"error"`
	}{e})
}

// writeJSON writes v as a JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// sleepCtx waits d and reports whether ctx is still alive.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// abortResponse cuts the connection mid-response; net/http and Caddy treat
// this panic value as a deliberate abort and do not log it.
func abortResponse() { panic(http.ErrAbortHandler) }

// writeBrokenJSON sends the first half of a JSON body with the full
// Content-Length, then cuts the connection.
func writeBrokenJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b[:len(b)/2])
	_ = http.NewResponseController(w).Flush()
	abortResponse()
}

// sseWriter writes server-sent events, flushing each one.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// send writes one event; event, if not empty, is written as an "event:"
// line. Once a write fails, later sends do nothing.
func (s *sseWriter) send(event string, v any) {
	if s.err != nil {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		s.err = err
		return
	}
	s.raw(event, data)
}

func (s *sseWriter) raw(event string, data []byte) {
	if s.err != nil {
		return
	}
	var b []byte
	if event != "" {
		b = append(append(append(b, "event: "...), event...), '\n')
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	if _, s.err = s.w.Write(b); s.err == nil {
		// A writer that cannot flush still gets the whole stream, later.
		_ = s.rc.Flush()
	}
}

// streamDeltas sends every text chunk with send, waiting delay between
// chunks; with brk it cuts the connection after mockBreakAfter chunks. It
// reports whether the stream may go on.
func streamDeltas(ctx context.Context, s *sseWriter, a *mockAnswer, delay time.Duration, brk bool, send func(string)) bool {
	for i := range a.words {
		if brk && i == mockBreakAfter {
			break
		}
		if i > 0 && !sleepCtx(ctx, delay) {
			return false
		}
		send(a.delta(i))
		if s.err != nil {
			return false
		}
	}
	if brk {
		abortResponse()
	}
	return true
}

func newID(prefix string) string { return prefix + rand.Text() }

// Chat Completions wire types.

type chatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
	// SystemFingerprint is set as OpenAI does (the public SDK requires it).
	SystemFingerprint string `json:"system_fingerprint,omitempty"`
	// Citations is the X vendor's list of cited URLs.
	Citations []string `json:"citations,omitempty"`
}

type chatChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Delta        *chatMessage `json:"delta,omitempty"`
	Logprobs     any          `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type chatMessage struct {
	Role        string         `json:"role,omitempty"`
	Content     *string        `json:"content,omitempty"`
	ToolCalls   []chatToolCall `json:"tool_calls,omitempty"`
	Annotations []any          `json:"annotations,omitempty"`
}

type chatUsage struct {
	PromptTokens     int                `json:"prompt_tokens"`
	CompletionTokens int                `json:"completion_tokens"`
	TotalTokens      int                `json:"total_tokens"`
	ServerToolUse    *mockServerToolUse `json:"server_tool_use,omitempty"`
	XSearchUsage     *mockXUsage        `json:"x_search_usage,omitempty"`
	NumSourcesUsed   int                `json:"num_sources_used,omitempty"`
}

func (m *Handler) writeChat(ctx context.Context, w http.ResponseWriter, q *mockRequest, a *mockAnswer, brk bool) {
	finish := "stop"
	if a.truncated {
		finish = "length"
	}
	if len(a.calls) > 0 {
		finish = "tool_calls"
	}
	usage := &chatUsage{PromptTokens: a.prompt, CompletionTokens: a.completion(), TotalTokens: a.total()}
	usage.ServerToolUse, usage.XSearchUsage, usage.NumSourcesUsed = q.search.usageExtras()
	base := chatCompletion{ID: newID("chatcmpl-"), Created: time.Now().Unix(), Model: q.answerModel, SystemFingerprint: mockFingerprint}
	// The citing model's own annotations, else those of a native search.
	anns := a.chatAnnotations()
	if anns == nil && q.search.annotates(false) {
		anns = chatAnnotationsOf(a.text())
	}

	if !q.stream {
		c := base
		c.Object = "chat.completion"
		msg := &chatMessage{Role: "assistant", Content: new(a.text()), Annotations: anns}
		if len(a.calls) > 0 {
			msg.Content, msg.ToolCalls = nil, chatToolCalls(a.calls)
		}
		c.Choices = []chatChoice{{Message: msg, FinishReason: &finish}}
		c.Usage = usage
		c.Citations = q.search.citations()
		if brk {
			writeBrokenJSON(w, c)
			return
		}
		writeJSON(w, http.StatusOK, c)
		return
	}

	base.Object = "chat.completion.chunk"
	chunk := func(choice chatChoice) chatCompletion {
		c := base
		c.Choices = []chatChoice{choice}
		return c
	}
	s := newSSEWriter(w)
	s.send("", chunk(chatChoice{Delta: &chatMessage{Role: "assistant", Content: new("")}}))
	for _, d := range chatToolCallDeltas(a.calls) {
		s.send("", chunk(chatChoice{Delta: &chatMessage{ToolCalls: d}}))
	}
	ok := streamDeltas(ctx, s, a, time.Duration(m.ChunkDelay), brk, func(d string) {
		s.send("", chunk(chatChoice{Delta: &chatMessage{Content: &d}}))
	})
	if !ok {
		return
	}
	if len(anns) > 0 {
		s.send("", chunk(chatChoice{Delta: &chatMessage{Annotations: anns}}))
	}
	s.send("", chunk(chatChoice{Delta: &chatMessage{}, FinishReason: &finish}))
	// Usage ends the stream when stream_options.include_usage asks for it;
	// outside strict mode always, as if it were set.
	if !q.streamUsage {
		s.raw("", []byte("[DONE]"))
		return
	}
	final := base
	final.Choices = []chatChoice{}
	final.Usage = usage
	final.Citations = q.search.citations()
	s.send("", final)
	s.raw("", []byte("[DONE]"))
}

// Responses API wire types.

type responseObject struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	CreatedAt         int64              `json:"created_at"`
	Model             string             `json:"model"`
	Status            string             `json:"status"`
	Error             any                `json:"error"`
	IncompleteDetails *incompleteDetails `json:"incomplete_details"`
	Instructions      *string            `json:"instructions"`
	MaxOutputTokens   *int64             `json:"max_output_tokens"`
	Metadata          map[string]string  `json:"metadata"`
	Output            []responseItem     `json:"output"`
	ParallelToolCalls bool               `json:"parallel_tool_calls"`
	Temperature       *float64           `json:"temperature"`
	ToolChoice        string             `json:"tool_choice"`
	Tools             []any              `json:"tools"`
	TopP              *float64           `json:"top_p"`
	Usage             *responseUsage     `json:"usage"`
	// Required (nullable) by @openrouter/sdk's schema.
	CompletedAt      *int64   `json:"completed_at"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	FrequencyPenalty *float64 `json:"frequency_penalty"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responseItem struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

// responseUsage carries the detail objects because the openai SDKs require
// them.
type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens   int                `json:"total_tokens"`
	ServerToolUse *mockServerToolUse `json:"server_tool_use,omitempty"`
	XSearchUsage  *mockXUsage        `json:"x_search_usage,omitempty"`
}

// responseEvent is every Responses streaming event; each type fills the
// fields OpenAI sends with it.
type responseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       *responseObject `json:"response,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	Item           *responseItem   `json:"item,omitempty"`
	Part           *outputText     `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Logprobs       *[]any          `json:"logprobs,omitempty"` // set (to []) on text events: the SDKs require it
	// response.output_text.annotation.added
	AnnotationIndex *int `json:"annotation_index,omitempty"`
	Annotation      any  `json:"annotation,omitempty"`
}

func (m *Handler) writeResponses(ctx context.Context, w http.ResponseWriter, q *mockRequest, a *mockAnswer, brk bool) {
	status, final := "completed", "response.completed"
	var incomplete *incompleteDetails
	if a.truncated {
		// OpenAI ends a stream cut by max_output_tokens with
		// response.incomplete.
		status, final = "incomplete", "response.incomplete"
		incomplete = &incompleteDetails{Reason: "max_output_tokens"}
	}
	usage := &responseUsage{InputTokens: a.prompt, OutputTokens: a.completion(), TotalTokens: a.total()}
	usage.ServerToolUse, usage.XSearchUsage, _ = q.search.usageExtras()
	part := outputText{Type: "output_text", Text: a.text(), Annotations: a.responsesAnnotations()}
	if len(part.Annotations) == 0 && q.search.annotates(true) {
		part.Annotations = responsesAnnotationsOf(part.Text)
	}
	item := responseItem{Type: "message", ID: newID("msg_"), Status: status, Role: "assistant", Content: []outputText{part}}
	resp := responseObject{
		ID:                newID("resp_"),
		Object:            "response",
		CreatedAt:         time.Now().Unix(),
		Model:             q.answerModel,
		Status:            status,
		IncompleteDetails: incomplete,
		Instructions:      q.instructions,
		MaxOutputTokens:   q.maxOutputTokens,
		Metadata:          map[string]string{},
		Output:            []responseItem{item},
		ParallelToolCalls: true,
		ToolChoice:        "auto",
		Tools:             []any{},
		Usage:             usage,
	}
	if status == "completed" {
		resp.CompletedAt = new(time.Now().Unix())
	}

	if !q.stream {
		if brk {
			writeBrokenJSON(w, resp)
			return
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}

	s := newSSEWriter(w)
	seq := 0
	send := func(ev responseEvent) {
		ev.SequenceNumber = seq
		seq++
		s.send(ev.Type, ev)
	}
	zero := 0
	pending := resp
	pending.Status, pending.IncompleteDetails, pending.Output, pending.Usage, pending.CompletedAt = "in_progress", nil, []responseItem{}, nil, nil
	send(responseEvent{Type: "response.created", Response: &pending})
	send(responseEvent{Type: "response.in_progress", Response: &pending})
	send(responseEvent{Type: "response.output_item.added", OutputIndex: &zero,
		Item: &responseItem{Type: "message", ID: item.ID, Status: "in_progress", Role: "assistant", Content: []outputText{}}})
	send(responseEvent{Type: "response.content_part.added", ItemID: item.ID, OutputIndex: &zero, ContentIndex: &zero,
		Part: &outputText{Type: "output_text", Annotations: []any{}}})
	ok := streamDeltas(ctx, s, a, time.Duration(m.ChunkDelay), brk, func(d string) {
		send(responseEvent{Type: "response.output_text.delta", ItemID: item.ID, OutputIndex: &zero, ContentIndex: &zero,
			Delta: &d, Logprobs: &[]any{}})
	})
	if !ok {
		return
	}
	for i, ann := range part.Annotations {
		send(responseEvent{Type: "response.output_text.annotation.added", ItemID: item.ID, OutputIndex: &zero, ContentIndex: &zero,
			AnnotationIndex: &i, Annotation: ann})
	}
	send(responseEvent{Type: "response.output_text.done", ItemID: item.ID, OutputIndex: &zero, ContentIndex: &zero,
		Text: &part.Text, Logprobs: &[]any{}})
	send(responseEvent{Type: "response.content_part.done", ItemID: item.ID, OutputIndex: &zero, ContentIndex: &zero, Part: &part})
	send(responseEvent{Type: "response.output_item.done", OutputIndex: &zero, Item: &item})
	send(responseEvent{Type: final, Response: &resp})
	s.raw("", []byte("[DONE]"))
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelInfo `json:"data"`
}

type modelInfo struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (m *Handler) serveModels(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeMethodNotAllowed(w, "GET, HEAD")
		return nil
	}
	latency, apiErr := m.requestLatency(r)
	if apiErr != nil {
		writeError(w, apiErr)
		return nil
	}
	if !sleepCtx(r.Context(), latency) {
		return nil
	}
	list := modelList{Object: "list", Data: make([]modelInfo, len(mockModels))}
	for i, id := range mockModels {
		list.Data[i] = modelInfo{ID: id, Object: "model", Created: mockModelsCreated, OwnedBy: "tollgate-mock"}
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// Interface guards
var (
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
