package mockprovider

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// Anthropic mode: POST .../v1/messages speaks Anthropic's Messages API, as
// strictly as Anthropic checks requests, so that a gateway's tests see what
// the real provider would refuse:
//
//   - the x-api-key header is required (401 authentication_error), and the
//     anthropic-version header (400);
//   - model, messages and max_tokens are required; an unknown top-level
//     parameter, role, content block type (per role), image source, tool
//     definition or tool_choice is a 400 invalid_request_error naming it;
//     texts must not be empty, every tool_use must be answered by a
//     tool_result of the next (user) message and every tool_result must
//     answer a tool_use of the previous (assistant) message;
//   - an anthropic-beta value it does not know is a 400, and
//     context_management needs its beta (context-management-2025-06-27);
//     system messages may come anywhere in messages (Claude Code's),
//     unless NoSystemMessages: then, as an Anthropic-style API without
//     the mid-conversation-system beta, a system role is a 400 and so is
//     that beta;
//     output_config.effort must be low, medium, high, xhigh or max, and
//     thinking may be adaptive;
//   - errors are {"type":"error","error":{"type","message"}}.
//
// The answer (msg_ id, content blocks, stop_reason, usage) follows the
// OpenAI mode's rules: "Mock answer from <model>: " and the last user text,
// one token per word, cut at max_tokens (stop_reason max_tokens) or before
// a stop sequence (stop_sequence). A user message of the current turn with
// "mock-tool-call: <name> <json>" lines is answered with those tool_use
// blocks (scriptedCalls). Otherwise, with custom tools, a last user message
// that names a tool (or a tool_choice of any or tool) is answered with a
// tool_use block calling it with {"query": <the user text>} (stop_reason
// tool_use); a last message of tool results is answered with their text.
// With the web_search_20250305 tool, the answer is a server_tool_use
// block, its web_search_tool_result (the two mockSources), and a text
// block per source citing it (web_search_result_location), and usage
// reports server_tool_use.web_search_requests 1.
//
// Extended thinking (thinking.type enabled) is checked as Anthropic does
// (budget_tokens at least 1,024 and below max_tokens; no temperature
// other than 1, no top_k, no forced tool) and starts the answer with a
// thinking block (streamed as thinking_delta and signature_delta). As
// Anthropic, it refuses a thinking block sent back without the signature
// it gave, and, with thinking on, a tool loop whose final assistant
// message does not start with its thinking block.
//
// Prompt caching: the prompt is counted in order (tools, system, messages,
// each block); the blocks up to the last one carrying cache_control are
// the cached prefix. The first request with a prefix (by model and exact
// content) writes it (cache_creation_input_tokens), later ones read it
// (cache_read_input_tokens); input_tokens is the rest of the prompt. A
// top-level cache_control (automatic caching) ends the prefix after the
// whole prompt. Writes are split by TTL in cache_creation: the tokens up
// to the last breakpoint with ttl "1h" are ephemeral_1h_input_tokens, the
// rest ephemeral_5m_input_tokens; as Anthropic, a cache_control of
// another type or TTL, or a 1h breakpoint after a 5m one, is refused.
//
// The model name's faults apply (error-400, error-429, error-500,
// error-502 in Anthropic's shape; error-garbage, stream-break, slow), and
// stream-stall: the first content block's deltas (a few words of text),
// then a ping, then nothing until the client leaves.

// anthropicParams are the Messages API's request parameters.
var anthropicParams = paramSet(
	"model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
	"temperature", "top_p", "top_k", "tools", "tool_choice", "thinking", "service_tier",
	"container", "mcp_servers", "output_config", "context_management", "cache_control",
)

// anthropicBetas are the anthropic-beta values the mock knows, as
// Anthropic knows its own: any other is refused.
var anthropicBetas = paramSet(
	"claude-code-20250219", "interleaved-thinking-2025-05-14", "fine-grained-tool-streaming-2025-05-14",
	"token-efficient-tools-2025-02-19", "output-128k-2025-02-19", "context-management-2025-06-27",
	"effort-2025-11-24", "advanced-tool-use-2025-11-20", "structured-outputs-2025-11-13",
	"prompt-caching-scope-2026-01-05", "mid-conversation-system-2026-04-07",
	"mid-conversation-tool-changes-2026-07-01", "thinking-token-count-2026-05-13",
	"context-1m-2025-08-07", "extended-cache-ttl-2025-04-11", "web-fetch-2025-09-10",
	"files-api-2025-04-14", "mcp-client-2025-11-20", "code-execution-2025-08-25", "skills-2025-10-02",
)

// betaMidConversationSystem lets system messages come inside messages.
const betaMidConversationSystem = "mid-conversation-system-2026-04-07"

// betaContextManagement is the beta context_management needs.
const betaContextManagement = "context-management-2025-06-27"

// checkBetas refuses an unknown anthropic-beta value and returns the set
// the request sent.
func checkBetas(h http.Header, noSystem bool) (map[string]bool, *anthropicRefusal) {
	sent := map[string]bool{}
	for _, v := range h.Values("Anthropic-Beta") {
		for _, b := range strings.Split(v, ",") {
			b = strings.TrimSpace(b)
			if !anthropicBetas[b] || noSystem && b == betaMidConversationSystem {
				return nil, invalidRequest("Unexpected value(s) `%s` for the `anthropic-beta` header. Please consult our documentation at docs.claude.com or try again without the header.", b)
			}
			sent[b] = true
		}
	}
	return sent, nil
}

// anthropicBlockTypes are the content block types each role may send.
var anthropicBlockTypes = map[string]map[string]bool{
	"user":      paramSet("text", "image", "document", "tool_result", "search_result"),
	"assistant": paramSet("text", "tool_use", "server_tool_use", "web_search_tool_result", "thinking", "redacted_thinking"),
}

// anthropicEfforts are output_config.effort's values.
var anthropicEfforts = paramSet("low", "medium", "high", "xhigh", "max")

// anthropicImageMedia are the image media types Anthropic takes.
var anthropicImageMedia = paramSet("image/jpeg", "image/png", "image/gif", "image/webp")

// anthropicCache is the mock's prompt cache: the prefixes seen, per
// handler instance (a config reload starts empty).
type anthropicCache struct {
	mu   sync.Mutex
	seen map[[32]byte]bool
}

// cacheMu guards the lazy creation of the handlers' caches.
var cacheMu sync.Mutex

// cache is the handler's prompt cache, made on first use.
func (m *Handler) cache() *anthropicCache {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if m.anthropicCache == nil {
		m.anthropicCache = &anthropicCache{seen: map[[32]byte]bool{}}
	}
	return m.anthropicCache
}

// sawBefore records key and reports whether it was there already.
func (c *anthropicCache) sawBefore(key [32]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[key] {
		return true
	}
	c.seen[key] = true
	return false
}

// anthropicRefusal is a request the mock refuses, in Anthropic's shape.
type anthropicRefusal struct {
	status int
	typ    string
	msg    string
}

func invalidRequest(format string, a ...any) *anthropicRefusal {
	return &anthropicRefusal{http.StatusBadRequest, "invalid_request_error", fmt.Sprintf(format, a...)}
}

func writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

// anthropicRequest is what the mock needs from a Messages request.
type anthropicRequest struct {
	noSystem   bool // system messages in messages are refused
	model      string
	stream     bool
	maxTokens  int64
	stops      []string
	lastUser   string
	toolText   string // the text of the last message's tool results
	lastTools  bool   // the last message holds tool results
	tools      []string
	force      string // a tool the tool_choice forces ("" none)
	search     bool   // the web_search_20250305 tool is offered
	thinking   bool   // extended thinking: the answer starts with a thinking block
	betas      map[string]bool
	calls      []mockToolCall // scripted tool calls
	prompt     int            // all prompt tokens
	prefix     int            // of prompt, the cached prefix's
	prefixHour int            // of prefix, cached for an hour
	prefixKey  [32]byte
}

// serveAnthropic answers POST .../v1/messages.
func (m *Handler) serveAnthropic(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeAnthropicError(w, http.StatusMethodNotAllowed, "invalid_request_error", "Method not allowed")
		return nil
	}
	if r.Header.Get("X-Api-Key") == "" {
		writeAnthropicError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return nil
	}
	if r.Header.Get("Anthropic-Version") == "" {
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required")
		return nil
	}
	latency, apiErr := m.requestLatency(r)
	if apiErr == nil {
		var body []byte
		if body, apiErr = readMockBody(w, r); apiErr == nil {
			betas, refusal := checkBetas(r.Header, m.NoSystemMessages)
			var q *anthropicRequest
			if refusal == nil {
				q, refusal = parseAnthropic(body, betas, m.NoSystemMessages)
			}
			if refusal != nil {
				writeAnthropicError(w, refusal.status, refusal.typ, refusal.msg)
				return nil
			}
			if apiErr := checkContract(r, body); apiErr != nil {
				writeAnthropicError(w, apiErr.Code, "invalid_request_error", apiErr.Message)
				return nil
			}
			m.answerAnthropic(w, r, q, latency)
			return nil
		}
	}
	writeAnthropicError(w, apiErr.Code, "invalid_request_error", apiErr.Message)
	return nil
}

// answerAnthropic waits, injects the model's fault, and answers.
func (m *Handler) answerAnthropic(w http.ResponseWriter, r *http.Request, q *anthropicRequest, latency time.Duration) {
	if strings.Contains(q.model, "slow") {
		latency += mockSlowDelay
	}
	if !sleepCtx(r.Context(), latency) || writeAnthropicFault(w, q.model) {
		return
	}
	var read, write int
	if q.prefix > 0 {
		if m.cache().sawBefore(q.prefixKey) {
			read = q.prefix
		} else {
			write = q.prefix
		}
	}
	msg := newAnthropicMessage(q)
	msg.Usage.InputTokens = q.prompt - q.prefix
	msg.Usage.CacheReadInputTokens, msg.Usage.CacheCreationInputTokens = read, write
	if write > 0 {
		hour := min(q.prefixHour, write)
		msg.Usage.CacheCreation = &anthropicCacheCreation{FiveMinutes: write - hour, OneHour: hour}
	}
	brk := strings.Contains(q.model, "stream-break")
	if !q.stream {
		if brk {
			writeBrokenJSON(w, msg)
			return
		}
		writeJSON(w, http.StatusOK, msg)
		return
	}
	fault := streamComplete
	switch {
	case brk:
		fault = streamCut
	case strings.Contains(q.model, "stream-stall"):
		fault = streamStall
	}
	streamAnthropic(r.Context(), newSSEWriter(w), msg, time.Duration(m.ChunkDelay), fault)
}

// writeAnthropicFault answers the fault the model name asks for, if any.
func writeAnthropicFault(w http.ResponseWriter, model string) bool {
	switch {
	case strings.Contains(model, "error-400"):
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "Invalid request")
	case strings.Contains(model, "error-429"):
		w.Header().Set("Retry-After", "1")
		writeAnthropicError(w, http.StatusTooManyRequests, "rate_limit_error", "Rate limit exceeded")
	case strings.Contains(model, "error-500"):
		writeAnthropicError(w, http.StatusInternalServerError, "api_error", "Internal server error")
	case strings.Contains(model, "error-502"):
		writeAnthropicError(w, http.StatusBadGateway, "api_error", "Bad gateway")
	case strings.Contains(model, "error-garbage"):
		return writeInjectedError(w, model)
	default:
		return false
	}
	return true
}

// parseAnthropic checks a Messages request as Anthropic does and reads
// what the answer needs.
func parseAnthropic(body []byte, betas map[string]bool, noSystem bool) (*anthropicRequest, *anthropicRefusal) {
	req := gjson.ParseBytes(body)
	var refusal *anthropicRefusal
	req.ForEach(func(k, _ gjson.Result) bool {
		if !anthropicParams[k.Str] {
			refusal = invalidRequest("%s: Extra inputs are not permitted", k.Str)
		}
		return refusal == nil
	})
	if refusal != nil {
		return nil, refusal
	}
	q := &anthropicRequest{model: req.Get("model").Str, stream: req.Get("stream").Bool(), noSystem: noSystem}
	if q.model == "" {
		return nil, invalidRequest("model: Field required")
	}
	mt := req.Get("max_tokens")
	if !mt.Exists() {
		return nil, invalidRequest("max_tokens: Field required")
	}
	if mt.Type != gjson.Number || mt.Int() < 1 || float64(mt.Int()) != mt.Float() {
		return nil, invalidRequest("max_tokens: Input should be a valid positive integer")
	}
	q.maxTokens = mt.Int()
	if t := req.Get("temperature"); t.Exists() && (t.Type != gjson.Number || t.Float() < 0 || t.Float() > 1) {
		return nil, invalidRequest("temperature: Input should be less than or equal to 1")
	}
	if req.Get("context_management").Exists() && !betas[betaContextManagement] {
		return nil, invalidRequest("context_management: Extra inputs are not permitted")
	}
	if e := req.Get("output_config.effort"); e.Exists() && !anthropicEfforts[e.Str] {
		return nil, invalidRequest("output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'")
	}
	q.betas = betas
	if th := req.Get("thinking"); th.Exists() {
		if refusal := checkThinking(req, th, q.maxTokens); refusal != nil {
			return nil, refusal
		}
		q.thinking = th.Get("type").Str != "disabled"
	}
	if s := req.Get("stop_sequences"); s.Exists() {
		if !s.IsArray() {
			return nil, invalidRequest("stop_sequences: Input should be a valid list")
		}
		for _, v := range s.Array() {
			if v.Type != gjson.String {
				return nil, invalidRequest("stop_sequences: Input should be a valid list of strings")
			}
			q.stops = append(q.stops, v.Str)
		}
	}
	c := &promptCounter{}
	if refusal := q.parseTools(req.Get("tools"), req.Get("tool_choice"), c); refusal != nil {
		return nil, refusal
	}
	if refusal := parseSystem(req.Get("system"), c); refusal != nil {
		return nil, refusal
	}
	if refusal := q.parseMessages(req.Get("messages"), c); refusal != nil {
		return nil, refusal
	}
	q.prompt = c.tokens
	if cc := req.Get("cache_control"); cc.Exists() {
		// Automatic caching: the whole prompt is the prefix.
		c.mark(cc)
	}
	if c.refusal != nil {
		return nil, c.refusal
	}
	if c.cachedUpTo >= 0 {
		q.prefix, q.prefixHour = c.cachedTokens, c.hourTokens
		q.prefixKey = sha256.Sum256([]byte(q.model + "\x00" + c.content.String()[:c.cachedUpTo]))
	}
	return q, nil
}

// promptCounter counts the prompt in order and marks its cached prefix.
type promptCounter struct {
	tokens       int
	content      strings.Builder // what the prefix key hashes
	cachedUpTo   int             // content length at the last cache_control; -1 none
	cachedTokens int
	// hourTokens: of cachedTokens, those up to the last breakpoint with
	// ttl "1h"; fiveMinutes: a 5m breakpoint came (1h ones must precede).
	hourTokens  int
	fiveMinutes bool
	refusal     *anthropicRefusal // a cache_control of a wrong shape
	started     bool
}

// add counts a piece of the prompt; a cache_control (cc) marks the end
// of a prefix.
func (c *promptCounter) add(raw string, tokens int, cc gjson.Result) {
	c.init()
	c.tokens += tokens
	c.content.WriteString(raw)
	if cc.Exists() {
		c.mark(cc)
	}
}

// mark ends a cached prefix at the prompt counted so far, with cc's TTL
// (5 minutes unless "1h"); a cache_control Anthropic refuses is noted.
func (c *promptCounter) mark(cc gjson.Result) {
	c.init()
	ttl := cc.Get("ttl")
	switch {
	case c.refusal != nil:
		return
	case !cc.IsObject() || cc.Get("type").Str != "ephemeral":
		c.refusal = invalidRequest("cache_control.type: Input should be 'ephemeral'")
		return
	case ttl.Exists() && ttl.Str != "5m" && ttl.Str != "1h":
		c.refusal = invalidRequest("cache_control.ttl: Input should be '5m' or '1h'")
		return
	case ttl.Str == "1h" && c.fiveMinutes:
		c.refusal = invalidRequest("a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block")
		return
	case ttl.Str == "1h":
		c.hourTokens = c.tokens
	default:
		c.fiveMinutes = true
	}
	c.cachedUpTo, c.cachedTokens = c.content.Len(), c.tokens
}

func (c *promptCounter) init() {
	if !c.started {
		c.started, c.cachedUpTo = true, -1
	}
}

// cacheOf is a block's cache_control (absent: none).
func cacheOf(v gjson.Result) gjson.Result { return v.Get("cache_control") }

// parseTools checks the tool definitions and the tool_choice.
func (q *anthropicRequest) parseTools(tools, choice gjson.Result, c *promptCounter) *anthropicRefusal {
	c.init()
	if tools.Exists() && !tools.IsArray() {
		return invalidRequest("tools: Input should be a valid list")
	}
	for i, t := range tools.Array() {
		switch typ := t.Get("type").Str; {
		case typ == "web_search_20250305":
			if t.Get("name").Str != "web_search" {
				return invalidRequest("tools.%d.name: Input should be 'web_search'", i)
			}
			q.search = true
		case typ == "" || typ == "custom":
			if t.Get("name").Str == "" {
				return invalidRequest("tools.%d.custom.name: Field required", i)
			}
			if !t.Get("input_schema").IsObject() {
				return invalidRequest("tools.%d.custom.input_schema: Field required", i)
			}
			q.tools = append(q.tools, t.Get("name").Str)
		default:
			return invalidRequest("tools.%d: Input tag '%s' found using 'type' does not match any of the expected tags", i, typ)
		}
		c.add(t.Raw, mockMessageOverhead+countWords(t.Get("name").Str+" "+t.Get("description").Str), cacheOf(t))
	}
	if !choice.Exists() {
		return nil
	}
	switch choice.Get("type").Str {
	case "auto", "none":
	case "any":
		if len(q.tools) > 0 {
			q.force = q.tools[0]
		}
	case "tool":
		name := choice.Get("name").Str
		if name == "" {
			return invalidRequest("tool_choice.tool.name: Field required")
		}
		q.force = name
	default:
		return invalidRequest("tool_choice: Input tag '%s' found using 'type' does not match any of the expected tags", choice.Get("type").Str)
	}
	if len(q.tools) == 0 && !q.search {
		return invalidRequest("tool_choice: may only be specified while providing tools")
	}
	return nil
}

// parseSystem checks and counts the system prompt.
func parseSystem(system gjson.Result, c *promptCounter) *anthropicRefusal {
	switch {
	case !system.Exists():
	case system.Type == gjson.String:
		c.add(system.Raw, mockMessageOverhead+countWords(system.Str), gjson.Result{})
	case system.IsArray():
		for i, b := range system.Array() {
			if b.Get("type").Str != "text" {
				return invalidRequest("system.%d.type: Input should be 'text'", i)
			}
			if b.Get("text").Str == "" {
				return invalidRequest("system: text content blocks must be non-empty")
			}
			c.add(b.Raw, mockMessageOverhead+countWords(b.Get("text").Str), cacheOf(b))
		}
	default:
		return invalidRequest("system: Input should be a valid string or list")
	}
	return nil
}

// parseMessages checks and counts the messages and reads the last turn.
func (q *anthropicRequest) parseMessages(msgs gjson.Result, c *promptCounter) *anthropicRefusal {
	if !msgs.IsArray() {
		return invalidRequest("messages: Field required")
	}
	list := msgs.Array()
	if len(list) == 0 {
		return invalidRequest("messages: at least one message is required")
	}
	var pendingUses map[string]bool // tool_use ids of the previous assistant message
	for i, msg := range list {
		role := msg.Get("role").Str
		kinds, ok := anthropicBlockTypes[role]
		if role == "system" && !q.noSystem {
			// System messages in the conversation (Claude Code sends them
			// with or without the mid-conversation-system beta).
			if refusal := parseSystem(msg.Get("content"), c); refusal != nil {
				return refusal
			}
			continue
		}
		if !ok {
			return invalidRequest("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		content := msg.Get("content")
		var blocks []gjson.Result
		switch {
		case content.Type == gjson.String:
			if content.Str == "" && (i < len(list)-1 || role == "user") {
				return invalidRequest("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
			}
			blocks = []gjson.Result{gjson.Parse(`{"type":"text","text":` + content.Raw + `}`)}
		case content.IsArray():
			blocks = content.Array()
		default:
			return invalidRequest("messages.%d.content: Input should be a valid string or list", i)
		}
		c.add(`{"role":"`+role+`"}`, mockMessageOverhead, gjson.Result{})
		uses := map[string]bool{}
		answered := map[string]bool{}
		text, toolText := "", ""
		hasResults := false
		for j, b := range blocks {
			typ := b.Get("type").Str
			if !kinds[typ] {
				return invalidRequest("messages.%d.content.%d: Input tag '%s' found using 'type' does not match any of the expected tags", i, j, typ)
			}
			words := 0
			switch typ {
			case "text":
				if b.Get("text").Str == "" {
					return invalidRequest("messages: text content blocks must be non-empty")
				}
				text += b.Get("text").Str + " "
				words = countWords(b.Get("text").Str)
			case "image":
				if refusal := checkImageSource(b.Get("source"), i, j); refusal != nil {
					return refusal
				}
			case "document":
				if src := b.Get("source"); src.Get("type").Str != "base64" || src.Get("media_type").Str != "application/pdf" || src.Get("data").Str == "" {
					if src.Get("type").Str != "url" && src.Get("type").Str != "text" {
						return invalidRequest("messages.%d.content.%d.document.source: expected a base64 PDF, a url or a text source", i, j)
					}
				}
			case "thinking":
				// Anthropic checks the signature of the thinking it gave.
				switch sig := b.Get("signature"); {
				case !sig.Exists():
					return invalidRequest("messages.%d.content.%d.thinking.signature: Field required", i, j)
				case sig.Str != mockSignature:
					return invalidRequest("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
				}
			case "redacted_thinking":
				if b.Get("data").Type != gjson.String {
					return invalidRequest("messages.%d.content.%d.redacted_thinking.data: Field required", i, j)
				}
			case "tool_use":
				if b.Get("id").Str == "" || b.Get("name").Str == "" || !b.Get("input").IsObject() {
					return invalidRequest("messages.%d.content.%d.tool_use: id, name and input (an object) are required", i, j)
				}
				uses[b.Get("id").Str] = true
			case "tool_result":
				id := b.Get("tool_use_id").Str
				if !pendingUses[id] {
					return invalidRequest("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, id)
				}
				answered[id], hasResults = true, true
				t := contentText(b.Get("content"))
				if b.Get("content").Type == gjson.String {
					t = b.Get("content").Str
				}
				toolText += t + " "
				words = countWords(t)
			}
			c.add(b.Raw, words, cacheOf(b))
		}
		for id := range pendingUses {
			if !answered[id] {
				return invalidRequest("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, id)
			}
		}
		pendingUses = uses
		if role == "assistant" {
			q.calls = nil
		}
		if role == "user" && !hasResults {
			q.calls = append(q.calls, scriptedCalls(text, q.tools)...)
		}
		if role == "user" {
			q.lastUser, q.toolText, q.lastTools = strings.TrimSpace(text), strings.TrimSpace(toolText), hasResults
			if text == "" && !hasResults {
				q.lastUser = ""
			}
		}
	}
	if len(pendingUses) > 0 && list[len(list)-1].Get("role").Str == "assistant" {
		// A final assistant message is a prefill the answer continues;
		// its tool_use blocks would need results first.
		return invalidRequest("messages: the final assistant message cannot hold tool_use blocks")
	}
	if q.thinking && q.lastTools {
		return checkThinkingKept(list)
	}
	return nil
}

// checkThinkingKept refuses, as Anthropic does with thinking on, a tool
// loop whose final assistant message (the one whose tool_use blocks the
// last user message answers) does not start with its thinking block.
func checkThinkingKept(list []gjson.Result) *anthropicRefusal {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Get("role").Str != "assistant" {
			continue
		}
		first := list[i].Get("content.0.type").Str
		if first == "thinking" || first == "redacted_thinking" || !list[i].Get(`content.#(type=="tool_use")`).Exists() {
			return nil
		}
		if first == "" {
			first = "text"
		}
		return invalidRequest("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, "+
			"a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "+
			"We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.", i, first)
	}
	return nil
}

// checkThinking checks extended thinking as Anthropic does: a budget of
// at least 1,024 tokens below max_tokens, no temperature but 1, no top_k,
// no forced tool.
func checkThinking(req, th gjson.Result, maxTokens int64) *anthropicRefusal {
	switch th.Get("type").Str {
	case "disabled":
		return nil
	case "adaptive":
		if req.Get("tool_choice.type").Str == "any" || req.Get("tool_choice.type").Str == "tool" {
			return invalidRequest("Thinking may not be enabled when tool_choice forces tool use.")
		}
		return nil
	case "enabled":
	default:
		return invalidRequest("thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'")
	}
	budget := th.Get("budget_tokens")
	switch {
	case budget.Type != gjson.Number || budget.Int() < 1024:
		return invalidRequest("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
	case budget.Int() >= maxTokens:
		return invalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`")
	case req.Get("temperature").Exists() && req.Get("temperature").Float() != 1:
		return invalidRequest("`temperature` may only be set to 1 when thinking is enabled")
	case req.Get("top_k").Exists():
		return invalidRequest("`top_k` is not supported when thinking is enabled")
	case req.Get("tool_choice.type").Str == "any" || req.Get("tool_choice.type").Str == "tool":
		return invalidRequest("Thinking may not be enabled when tool_choice forces tool use.")
	}
	return nil
}

// checkImageSource checks an image block's source.
func checkImageSource(src gjson.Result, i, j int) *anthropicRefusal {
	switch src.Get("type").Str {
	case "base64":
		if !anthropicImageMedia[src.Get("media_type").Str] {
			return invalidRequest("messages.%d.content.%d.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", i, j)
		}
		if src.Get("data").Str == "" {
			return invalidRequest("messages.%d.content.%d.image.source.base64.data: Field required", i, j)
		}
	case "url":
		if u := src.Get("url").Str; !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return invalidRequest("messages.%d.content.%d.image.source.url.url: expected an http(s) URL", i, j)
		}
	default:
		return invalidRequest("messages.%d.content.%d.image.source: Input tag '%s' found using 'type' does not match any of the expected tags: 'base64', 'url'", i, j, src.Get("type").Str)
	}
	return nil
}

// Messages API wire types.

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Citations []any           `json:"citations,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []any           `json:"content,omitempty"`
}

type anthropicUsage struct {
	InputTokens              int                     `json:"input_tokens"`
	CacheCreationInputTokens int                     `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int                     `json:"cache_read_input_tokens"`
	CacheCreation            *anthropicCacheCreation `json:"cache_creation,omitempty"`
	OutputTokens             int                     `json:"output_tokens"`
	ServerToolUse            *anthropicServerToolUse `json:"server_tool_use,omitempty"`
}

// anthropicCacheCreation splits the cache writes by TTL.
type anthropicCacheCreation struct {
	FiveMinutes int `json:"ephemeral_5m_input_tokens"`
	OneHour     int `json:"ephemeral_1h_input_tokens"`
}

type anthropicServerToolUse struct {
	WebSearchRequests int `json:"web_search_requests"`
}

// newAnthropicMessage builds the answer (usage's input figures are set by
// the caller); with extended thinking it starts with a thinking block,
// tool_use answers too, as Anthropic's do.
func newAnthropicMessage(q *anthropicRequest) *anthropicMessage {
	msg := answerBlocks(q)
	if q.thinking {
		thought := mockThought
		msg.Content = append([]anthropicBlock{{Type: "thinking", Thinking: &thought, Signature: mockSignature}}, msg.Content...)
		msg.Usage.OutputTokens += countWords(thought)
	}
	return msg
}

// answerBlocks is the answer without its thinking.
func answerBlocks(q *anthropicRequest) *anthropicMessage {
	msg := &anthropicMessage{ID: newID("msg_"), Type: "message", Role: "assistant", Model: q.model + strictDated}
	stop := "end_turn"
	if len(q.calls) > 0 && !q.lastTools {
		for _, c := range q.calls {
			msg.Content = append(msg.Content, anthropicBlock{Type: "tool_use", ID: newID("toolu_"), Name: c.Name, Input: json.RawMessage(c.Arguments)})
			msg.Usage.OutputTokens += c.tokens()
		}
		stop = "tool_use"
		msg.StopReason = &stop
		return msg
	}
	if tool := q.toolToCall(); tool != "" {
		input, _ := json.Marshal(map[string]string{"query": q.lastUser})
		msg.Content = []anthropicBlock{{Type: "tool_use", ID: newID("toolu_"), Name: tool, Input: input}}
		msg.Usage.OutputTokens = countWords(string(input)) + mockMessageOverhead
		stop = "tool_use"
		msg.StopReason = &stop
		return msg
	}
	echo := q.lastUser
	if q.lastTools {
		echo = "tool result " + q.toolText
	}
	if strings.TrimSpace(echo) == "" {
		echo = mockNoUserText
	}
	words := strings.Fields(echo)
	if len(words) > mockEchoWords {
		words = words[:mockEchoWords]
	}
	texts := []string{"Mock answer from " + q.model + ": " + strings.Join(words, " ")}
	var cites []mockSource
	if q.search {
		query, _ := json.Marshal(map[string]string{"query": q.lastUser})
		id := newID("srvtoolu_")
		var results []any
		for _, s := range mockSources {
			results = append(results, map[string]any{"type": "web_search_result", "url": s.url, "title": s.title,
				"encrypted_content": "enc", "page_age": "April 1, 2025"})
		}
		msg.Content = append(msg.Content,
			anthropicBlock{Type: "server_tool_use", ID: id, Name: "web_search", Input: query},
			anthropicBlock{Type: "web_search_tool_result", ToolUseID: id, Content: results})
		msg.Usage.ServerToolUse = &anthropicServerToolUse{WebSearchRequests: 1}
		for _, s := range mockSources {
			texts = append(texts, " "+s.content)
			cites = append(cites, s)
		}
	}
	// Cut at max_tokens words, or before a stop sequence.
	left := int(min(q.maxTokens, int64(1<<30)))
	var stopSeq *string
	for i, t := range texts {
		if left == 0 {
			break
		}
		if k, seq := firstStop(t, q.stops); k >= 0 {
			t, stopSeq = t[:k], &seq
		}
		if w := strings.Fields(t); len(w) > left {
			t, stop = cutWords(t, left), "max_tokens"
		}
		left -= countWords(t)
		block := anthropicBlock{Type: "text", Text: &t}
		if i > 0 {
			s := cites[i-1]
			block.Citations = []any{map[string]any{"type": "web_search_result_location", "url": s.url, "title": s.title,
				"cited_text": s.content, "encrypted_index": "idx"}}
		}
		if t != "" {
			msg.Content = append(msg.Content, block)
			msg.Usage.OutputTokens += countWords(t)
		}
		if stopSeq != nil {
			stop = "stop_sequence"
			break
		}
		if stop == "max_tokens" {
			break
		}
	}
	msg.StopReason, msg.StopSequence = &stop, stopSeq
	return msg
}

// mockSignature signs the mock's thinking blocks; a thinking block sent
// back with another is refused.
const mockSignature = "mock-signature"

// mockThought is the thinking block of an answer with extended thinking.
const mockThought = "The mock thinks briefly."

// toolToCall is the custom tool the answer calls, if any: the forced one,
// or one the last user message names (not when it carries tool results).
func (q *anthropicRequest) toolToCall() string {
	if q.lastTools {
		return ""
	}
	if q.force != "" {
		return q.force
	}
	for _, t := range q.tools {
		if strings.Contains(q.lastUser, t) {
			return t
		}
	}
	return ""
}

// firstStop finds the earliest stop sequence in t.
func firstStop(t string, stops []string) (int, string) {
	at, seq := -1, ""
	for _, s := range stops {
		if k := strings.Index(t, s); s != "" && k >= 0 && (at < 0 || k < at) {
			at, seq = k, s
		}
	}
	return at, seq
}

// cutWords keeps the first n words of t, with their leading space.
func cutWords(t string, n int) string {
	lead := t[:len(t)-len(strings.TrimLeft(t, " "))]
	return lead + strings.Join(strings.Fields(t)[:n], " ")
}

// streamAnthropic sends msg as Anthropic's event stream: message_start,
// per block content_block_start, deltas (text_delta per word,
// citations_delta, input_json_delta) and content_block_stop, a ping after
// the first block starts, message_delta with the stop reason and usage,
// message_stop. streamCut cuts the connection after a few text deltas (or
// before message_delta); streamStall stops after the first block's deltas
// (a few words of text), sends a ping and waits for the client to leave.
func streamAnthropic(ctx context.Context, s *sseWriter, msg *anthropicMessage, delay time.Duration, fault streamFault) {
	brk := fault == streamCut
	start := *msg
	start.Content, start.StopReason, start.StopSequence = []anthropicBlock{}, nil, nil
	start.Usage.OutputTokens, start.Usage.ServerToolUse = 1, nil
	s.send("message_start", map[string]any{"type": "message_start", "message": start})
	sent := 0
	for i, b := range msg.Content {
		open := b
		switch b.Type {
		case "text":
			empty := ""
			open.Text, open.Citations = &empty, nil
		case "tool_use", "server_tool_use":
			open.Input = json.RawMessage(`{}`)
		case "thinking":
			empty := ""
			open.Thinking, open.Signature = &empty, ""
		}
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": open})
		if i == 0 {
			s.send("ping", map[string]string{"type": "ping"})
		}
		delta := func(d any) {
			s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch b.Type {
		case "text":
			for _, c := range b.Citations {
				delta(map[string]any{"type": "citations_delta", "citation": c})
			}
			for k, w := range splitKeepSpaces(*b.Text) {
				if brk && sent == mockBreakAfter {
					abortResponse()
				}
				if fault == streamStall && sent == mockBreakAfter {
					break
				}
				if (k > 0 || sent > 0) && !sleepCtx(ctx, delay) {
					return
				}
				delta(map[string]string{"type": "text_delta", "text": w})
				sent++
			}
		case "thinking":
			delta(map[string]string{"type": "thinking_delta", "thinking": *b.Thinking})
			delta(map[string]string{"type": "signature_delta", "signature": b.Signature})
		case "tool_use", "server_tool_use":
			in := string(b.Input)
			half := len(in) / 2
			delta(map[string]string{"type": "input_json_delta", "partial_json": in[:half]})
			delta(map[string]string{"type": "input_json_delta", "partial_json": in[half:]})
		}
		if fault == streamStall {
			s.send("ping", map[string]string{"type": "ping"})
			<-ctx.Done()
			return
		}
		s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		if s.err != nil {
			return
		}
	}
	if brk {
		abortResponse()
	}
	s.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": msg.StopReason, "stop_sequence": msg.StopSequence},
		"usage": map[string]any{"output_tokens": msg.Usage.OutputTokens, "server_tool_use": msg.Usage.ServerToolUse}})
	s.send("message_stop", map[string]string{"type": "message_stop"})
}

// streamFault is how streamAnthropic ends a stream.
type streamFault int

const (
	streamComplete streamFault = iota // message_delta with usage, message_stop
	streamCut                         // the connection cut without usage
	streamStall                       // stalls after the first block until the client leaves
)

// splitKeepSpaces splits t into words, each but the first with its
// leading space, so that the pieces concatenate to t.
func splitKeepSpaces(t string) []string {
	var out []string
	for len(t) > 0 {
		i := strings.IndexByte(strings.TrimLeft(t, " "), ' ')
		if i < 0 {
			out = append(out, t)
			break
		}
		i += len(t) - len(strings.TrimLeft(t, " "))
		out = append(out, t[:i])
		t = t[i:]
	}
	return out
}
