package webfetch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/webfetch/fetch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// The web_fetch server tool ({"type":"<brand>:web_fetch","parameters":
// {...}} in tools): the model gets a function tool web_fetch(url); when
// its answer calls it, the gateway fetches the URLs (package fetch, under
// the customer egress policy and the tool's domain lists), appends the call
// and the pages (or their errors) to the conversation and calls the model
// again, within the same attempt, until it answers without the tool. At
// most max_uses fetches are made; after that the tool is withdrawn, so
// the model answers with what it has. Only the last answer reaches the
// client; the earlier rounds' tokens are charged with it (Run.Settle adds
// them) and the fetches at the price of one fetch, both held at
// admission for the worst case (max_uses more rounds, each up to the
// model's context window).
//
// The loop reads and writes the chat completions dialect: it serves
// /chat/completions, and /responses through providers that speak only
// chat (the translation sits above it); one choice. The rounds are plain
// calls; a streamed request gets the last answer as a stream of chunks
// once it is complete.

// toolName is the function the model calls.
const toolName = "web_fetch"

// toolFunction is the function tool's definition, without its
// dialect's wrapping.
const toolDescription = "Fetch a web page or PDF by its http(s) URL and return its content as text (HTML as markdown). Use it to read pages the user names or that you need to answer."

const toolParameters = `{"type":"object","properties":{"url":{"type":"string","description":"The http(s) URL to fetch"}},"required":["url"],"additionalProperties":false}`

// tool is a request's web_fetch server tool.
type serverTool struct {
	opts  fetch.Options
	index int // its place in tools, for messages
	// clientTools are the request's tools as the client sent them, which
	// a translated Responses answer echoes.
	clientTools json.RawMessage
}

// defaultRoundContext bounds a round's tokens for a model whose context
// window the catalog does not give.
const defaultRoundContext = 128_000

// planTool finds the server tool in a chat or Responses body and
// puts the function tool in its place; tool is nil without one.
func planTool(body []byte, kind dialect.Kind, brand string) ([]byte, *serverTool, *apierror.Error) {
	tools := gjson.GetBytes(body, "tools")
	if !tools.IsArray() {
		return body, nil, nil
	}
	var tool *serverTool
	var apiErr *apierror.Error
	clientNamed := -1
	tools.ForEach(func(i, t gjson.Result) bool {
		path := "tools[" + strconv.Itoa(int(i.Int())) + "]"
		name := t.Get("function.name").Str
		if kind == "responses" {
			name = t.Get("name").Str
		}
		if t.Get("type").Str == "function" && name == toolName {
			clientNamed = int(i.Int())
		}
		if t.Get("type").Str != brand+":web_fetch" {
			return true
		}
		if tool != nil {
			apiErr = apierror.BadRequest(path + ": only one " + brand + ":web_fetch tool")
			return false
		}
		tool = &serverTool{index: int(i.Int()), clientTools: json.RawMessage(tools.Raw)}
		t.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "type":
			case "parameters":
				o, ferr := fetch.Parse(path+".parameters", v, false, "auto", brand)
				if ferr != nil {
					apiErr = apierror.BadRequest(ferr.Error())
				}
				tool.opts = o
			default:
				apiErr = apierror.BadRequest(path + "." + k.Str + ": unknown field of the " + brand + ":web_fetch tool")
			}
			return apiErr == nil
		})
		if !t.Get("parameters").Exists() {
			tool.opts, _ = fetch.Parse(path+".parameters", gjson.Result{}, false)
		}
		return apiErr == nil
	})
	if apiErr != nil || tool == nil {
		return body, nil, apiErr
	}
	if clientNamed >= 0 {
		return nil, nil, apierror.BadRequest(fmt.Sprintf("tools[%d]: the function name %q is the %s:web_fetch server tool's", clientNamed, toolName, brand))
	}
	if kind == "messages" {
		return nil, nil, apierror.BadRequest(fmt.Sprintf("tools[%d].type: the %s:web_fetch server tool applies to /chat/completions and /responses", tool.index, brand))
	}
	if n := gjson.GetBytes(body, "n"); n.Exists() && n.Int() > 1 {
		return nil, nil, apierror.BadRequest("n: the web_fetch server tool serves one choice")
	}
	def := `{"type":"function","function":{"name":"` + toolName + `","parameters":` + toolParameters + `}}`
	// sjson fails only on a malformed path, and these are well-formed.
	def, _ = sjson.Set(def, "function.description", toolDescription)
	if kind == "responses" {
		def = `{"type":"function","name":"` + toolName + `","parameters":` + toolParameters + `}`
		def, _ = sjson.Set(def, "description", toolDescription)
	}
	out, err := sjson.SetRawBytes(body, "tools."+strconv.Itoa(tool.index), []byte(def))
	if err != nil {
		return nil, nil, apierror.BadRequest("Request body is not valid JSON")
	}
	return out, tool, nil
}

// restrictAttempts keeps the attempts whose upstream dialect is chat
// completions, which the loop reads: a chat request's chat providers, a
// Responses request's chat-only providers. None left is a 400.
func (ft *serverTool) restrictAttempts(route *upstream.Route, brand string) *apierror.Error {
	chat := func(a upstream.Attempt) bool {
		switch route.Kind {
		case dialect.Chat:
			return a.Provider.D().Native(dialect.Chat)
		case dialect.Responses:
			return a.Provider.ChatOnly() && a.Provider.D().Native(dialect.Chat) && route.ChatBody != nil
		}
		return false
	}
	if route.Echo != nil {
		route.Echo.Tools = ft.clientTools // the answer shows the client's tools
	}
	if !slices.ContainsFunc(route.Attempts, func(a upstream.Attempt) bool { return !chat(a) }) {
		return nil
	}
	route.Attempts = slices.DeleteFunc(route.Attempts, func(a upstream.Attempt) bool { return !chat(a) })
	if len(route.Attempts) == 0 {
		return apierror.BadRequest(fmt.Sprintf("tools[%d].type: the %s:web_fetch server tool needs a provider that speaks chat completions; the model's providers do not", ft.index, brand))
	}
	if err := route.Prepare(0); err != nil {
		return apierror.BadRequest("Request body is not valid JSON")
	}
	route.InputTokens = billing.EstimateTokens(len(route.Sent))
	return nil
}

// holdExtra is the worst case the tool adds on the costliest attempt:
// max_uses fetches, and max_uses more rounds of up to the model's context
// window at its dearer token price. credits is the fetches' part, which
// a BYOK request pays in credits.
func (ft *serverTool) holdExtra(route *upstream.Route, price money.Amount) (hold, credits money.Amount, err error) {
	n := int64(ft.opts.MaxUses)
	fetches, ok := money.MulAmount(price, n)
	if !ok {
		return 0, 0, billing.ErrCostRange
	}
	for _, a := range route.Attempts {
		window := a.Model.ContextLength
		if window <= 0 {
			window = defaultRoundContext
		}
		p := a.Model.Pricing.ForHold(window, route.PricedAt)
		round, err := billing.TokenCost(p, window, 0)
		if err != nil {
			return 0, 0, err
		}
		out, err := billing.TokenCost(p, 0, window)
		if err != nil {
			return 0, 0, err
		}
		rounds, ok := money.MulAmount(max(round, out), n)
		if !ok {
			return 0, 0, billing.ErrCostRange
		}
		hold = max(hold, rounds)
	}
	hold, err = addCost(hold, fetches)
	return hold, fetches, err
}

// loop is the caddyhttp.Handler of one attempt with the server
// tool: it calls next (the provider's reverse_proxy) once per round.
type loop struct {
	next  caddyhttp.Handler
	tool  *serverTool
	run   *Run
	route *upstream.Route
	used  int // fetches made (or refused) so far, across the attempt's rounds
}

// roundCapture holds one round's answer.
type roundCapture struct {
	header http.Header
	status int
	body   bytes.Buffer
	over   bool
}

func (c *roundCapture) Header() http.Header { return c.header }
func (c *roundCapture) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
}
func (c *roundCapture) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if c.body.Len()+len(b) > answer.MaxBufferedBody {
		c.over = true
		return len(b), nil
	}
	return c.body.Write(b)
}

// replay sends a captured answer to w.
func (c *roundCapture) replay(w http.ResponseWriter, body []byte) {
	for k, v := range c.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(c.status)
	_, _ = w.Write(body) // the status is sent: a failed write is a client gone
}

// ServeHTTP runs the rounds. The first round's failure is the attempt's
// (the meter may fall back); a later round's failure, or the client
// leaving, ends the loop with the last round's answer, its web_fetch
// calls removed and finish_reason "error", so that the rounds made are
// charged.
func (l *loop) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	body, err := readAll(r)
	if err != nil {
		return err
	}
	if l.route.Stream {
		// Each round is a plain call: whether it is the last is known only
		// at its end; the last is sent to the client as a stream.
		if body, err = sjson.SetBytes(body, "stream", false); err == nil && gjson.GetBytes(body, "stream_options").Exists() {
			body, err = sjson.DeleteBytes(body, "stream_options")
		}
		if err != nil {
			return err
		}
	}
	var last *roundCapture
	offered := true
	for round := 0; ; round++ {
		c := &roundCapture{header: http.Header{}}
		r.Body = reqbody.NewBuffered(body)
		r.ContentLength = int64(len(body))
		r.Header["Content-Length"] = []string{strconv.Itoa(len(body))}
		perr := callRound(l.next, c, r)
		ok := perr == nil && c.status == http.StatusOK && !c.over && gjson.ValidBytes(c.body.Bytes())
		if !ok || r.Context().Err() != nil {
			if round == 0 {
				if c.status != 0 {
					c.replay(w, c.body.Bytes())
				}
				return perr
			}
			l.deliver(w, last, "error", true)
			return nil
		}
		answer := c.body.Bytes()
		msg := gjson.GetBytes(answer, "choices.0.message")
		calls, others := splitCalls(msg.Get("tool_calls"))
		if len(calls) == 0 || len(others) > 0 || !offered {
			if len(calls) > 0 {
				l.deliver(w, c, "", false) // the client's own calls, without the gateway's
				return nil
			}
			l.send(w, c, answer)
			return nil
		}
		// A round that asks for pages: its tokens are the request's.
		l.addRound(answer, 1)
		last = c
		results := l.fetchAll(r, calls)
		if r.Context().Err() != nil {
			l.deliver(w, last, "error", true)
			return nil
		}
		offered = l.used < l.tool.opts.MaxUses
		if body, err = nextRoundBody(body, msg, calls, results, offered); err != nil {
			l.deliver(w, last, "error", true)
			return nil
		}
	}
}

// callRound calls the provider for one round. When copying its answer
// fails, reverse_proxy aborts the handler with panic(http.ErrAbortHandler):
// the round's failure, which the loop answers, becomes an error here.
func callRound(next caddyhttp.Handler, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			err = http.ErrAbortHandler
		}
	}()
	return next.ServeHTTP(w, r)
}

// readAll reads the attempt's upstream body.
func readAll(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	if r.Body != nil {
		if _, err := b.ReadFrom(r.Body); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// splitCalls parts an answer's tool calls into the web_fetch ones
// and the client's.
func splitCalls(calls gjson.Result) (ours, others []gjson.Result) {
	for _, c := range calls.Array() {
		if c.Get("function.name").Str == toolName {
			ours = append(ours, c)
		} else {
			others = append(others, c)
		}
	}
	return ours, others
}

// roundUsage is a round's usage, each count within the bounds the meter
// applies to one answer.
func (l *loop) roundUsage(answer []byte) billing.Usage {
	u := gjson.GetManyBytes(answer, "usage.prompt_tokens", "usage.completion_tokens", "usage.prompt_tokens_details.cached_tokens")
	window := l.route.Model.ContextLength
	if window <= 0 {
		window = defaultRoundContext
	}
	prompt := min(max(u[0].Int(), 0), window)
	completion := max(u[1].Int(), 0)
	if b := l.route.OutputBound(); b > 0 {
		completion = min(completion, b)
	}
	return billing.Usage{PromptTokens: prompt, CompletionTokens: completion, CacheReadTokens: min(max(u[2].Int(), 0), prompt)}
}

// addRound adds a completed round's usage to the run's (sign -1 takes
// it out again).
func (l *loop) addRound(answer []byte, sign int64) {
	u := l.roundUsage(answer)
	l.run.prior.PromptTokens += sign * u.PromptTokens
	l.run.prior.CompletionTokens += sign * u.CompletionTokens
	l.run.prior.CacheReadTokens += sign * u.CacheReadTokens
	l.run.rounds += int(sign)
	// The last answer's prompt holds the pages: only the context window
	// bounds it.
	l.route.Prompt.Unbounded = true
}

// fetchAll fetches the calls' URLs concurrently, those beyond max_uses
// refused, and records the pages for citations and the charge.
func (l *loop) fetchAll(r *http.Request, calls []gjson.Result) []string {
	results := make([]string, len(calls))
	pages := make([]fetch.Page, len(calls))
	var urls []string
	var at []int
	for i, c := range calls {
		u := gjson.Get(c.Get("function.arguments").Str, "url")
		switch {
		case l.used >= l.tool.opts.MaxUses:
			pages[i] = fetch.Page{URL: u.Str, Err: fmt.Sprintf("max_uses_exceeded: this request may fetch at most %d pages", l.tool.opts.MaxUses)}
			continue
		case u.Type != gjson.String || u.Str == "":
			// A use all the same: every round that continues the loop
			// spends one at least, so rounds stay within max_uses + 1.
			l.used++
			pages[i] = fetch.Page{Err: "invalid_tool_input: expected arguments {\"url\": \"https://...\"}"}
			continue
		}
		l.used++
		urls, at = append(urls, u.Str), append(at, i)
	}
	for j, p := range l.run.fetcher.FetchAll(r.Context(), urls, &l.tool.opts) {
		pages[at[j]] = p
	}
	for i := range pages {
		p := &pages[i]
		if h := filterPage(l.run.filter, p); h != nil {
			withhold(p, h)
		}
		results[i] = fetch.ToolResult(p)
		if p.URL == "" {
			continue
		}
		if p.Fetched {
			l.run.fetched++
			// The fetches are bounded by max_uses, whose price the hold
			// took at admission with the same sum: it cannot overflow
			// here, and if it did the cost would stay, not drop to 0.
			if c, err := addCost(l.run.cost, l.run.price); err == nil {
				l.run.cost = c
			}
		}
		src := websearch.Source{Title: p.CitationTitle(), URL: p.URL}
		if p.Err == "" {
			src.Snippet = p.Snippet()
		}
		l.run.sources = append(l.run.sources, src)
	}
	return results
}

// nextRoundBody is the chat body of the next round: the conversation
// with the round's assistant message and one tool message per call; the
// web_fetch tool withdrawn when offered is false.
func nextRoundBody(body []byte, msg gjson.Result, calls []gjson.Result, results []string, offered bool) ([]byte, error) {
	add := []string{msg.Raw}
	for i, c := range calls {
		tm, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": c.Get("id").Str, "content": results[i]})
		add = append(add, string(tm))
	}
	var err error
	for _, m := range add {
		if body, err = sjson.SetRawBytes(body, "messages.-1", []byte(m)); err != nil {
			return nil, err
		}
	}
	if offered {
		return body, nil
	}
	var kept []string
	for _, t := range gjson.GetBytes(body, "tools").Array() {
		if t.Get("function.name").Str != toolName {
			kept = append(kept, t.Raw)
		}
	}
	if len(kept) == 0 {
		body, err = sjson.DeleteBytes(body, "tools")
		if err == nil && gjson.GetBytes(body, "tool_choice").Exists() {
			body, err = sjson.DeleteBytes(body, "tool_choice")
		}
		return body, err
	}
	if tc := gjson.GetBytes(body, "tool_choice"); tc.IsObject() && tc.Get("function.name").Str == toolName {
		if body, err = sjson.SetBytes(body, "tool_choice", "auto"); err != nil {
			return nil, err
		}
	}
	return sjson.SetRawBytes(body, "tools", []byte("["+joinComma(kept)+"]"))
}

func joinComma(items []string) string {
	var b bytes.Buffer
	for i, s := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}

// deliver sends a round's answer without its web_fetch calls (the
// gateway's, not the client's), with finish_reason set when given. The
// answer's usage is the meter's to read: a round counted among the prior
// ones (counted) is taken out of them.
func (l *loop) deliver(w http.ResponseWriter, c *roundCapture, finish string, counted bool) {
	answer := c.body.Bytes()
	msg := gjson.GetBytes(answer, "choices.0.message")
	_, others := splitCalls(msg.Get("tool_calls"))
	var out []byte
	var err error
	if len(others) == 0 {
		out, err = sjson.DeleteBytes(answer, "choices.0.message.tool_calls")
		if finish == "" {
			finish = "stop"
		}
	} else {
		raws := make([]string, len(others))
		for i, o := range others {
			raws[i] = o.Raw
		}
		out, err = sjson.SetRawBytes(answer, "choices.0.message.tool_calls", []byte("["+joinComma(raws)+"]"))
	}
	if err == nil && finish != "" {
		out, err = sjson.SetBytes(out, "choices.0.finish_reason", finish)
	}
	if err != nil {
		out = answer
	}
	if counted {
		l.addRound(answer, -1)
	}
	l.send(w, c, out)
}

// send delivers the client's answer: as it came, or for a streamed
// request (whose rounds are plain calls) as the stream of chunks it
// amounts to.
func (l *loop) send(w http.ResponseWriter, c *roundCapture, answer []byte) {
	if !l.route.Stream {
		c.replay(w, answer)
		return
	}
	h := w.Header()
	for k, v := range c.header {
		h[k] = v
	}
	delete(h, "Content-Length")
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(c.status)
	_, _ = w.Write(chatAnswerAsStream(answer)) // the status is sent: a failed write is a client gone
	_ = http.NewResponseController(w).Flush()  // a failed flush is a client gone; nothing follows
}

// chatAnswerAsStream is a chat completion as the chunks of its stream:
// the message in one delta (its tool calls indexed), the finish, the
// usage, [DONE].
func chatAnswerAsStream(answer []byte) []byte {
	a := gjson.ParseBytes(answer)
	head := `{"object":"chat.completion.chunk"}`
	for _, k := range []string{"id", "created", "model", "system_fingerprint"} {
		if v := a.Get(k); v.Exists() {
			// sjson fails only on a malformed path, and these are well-formed.
			head, _ = sjson.SetRaw(head, k, v.Raw)
		}
	}
	var b bytes.Buffer
	event := func(chunk string) {
		b.WriteString("data: ")
		b.WriteString(chunk)
		b.WriteString("\n\n")
	}
	a.Get("choices").ForEach(func(_, ch gjson.Result) bool {
		idx := ch.Get("index").Int()
		delta := `{"role":"assistant"}`
		msg := ch.Get("message")
		if c := msg.Get("content"); c.Type == gjson.String {
			delta, _ = sjson.Set(delta, "content", c.Str)
		}
		for _, k := range []string{"refusal", "reasoning", "annotations"} {
			if v := msg.Get(k); v.Exists() && v.Type != gjson.Null {
				delta, _ = sjson.SetRaw(delta, k, v.Raw)
			}
		}
		msg.Get("tool_calls").ForEach(func(i, tc gjson.Result) bool {
			t, _ := sjson.Set(tc.Raw, "index", i.Int())
			delta, _ = sjson.SetRaw(delta, "tool_calls.-1", t)
			return true
		})
		chunk, _ := sjson.SetRaw(head, "choices", `[{"index":`+strconv.FormatInt(idx, 10)+`,"delta":`+delta+`,"finish_reason":null}]`)
		event(chunk)
		finish := ch.Get("finish_reason")
		if !finish.Exists() {
			finish = gjson.Parse("null")
		}
		chunk, _ = sjson.SetRaw(head, "choices", `[{"index":`+strconv.FormatInt(idx, 10)+`,"delta":{},"finish_reason":`+finish.Raw+`}]`)
		event(chunk)
		return true
	})
	if u := a.Get("usage"); u.IsObject() {
		chunk, _ := sjson.SetRaw(head, "choices", `[]`)
		chunk, _ = sjson.SetRaw(chunk, "usage", u.Raw)
		event(chunk)
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}
