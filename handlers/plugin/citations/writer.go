// Package citations is the writer that cites, in the client's answer,
// the pages a request's runs handed the model (a web search's results,
// web-fetch's pages): one writer for all the runs that cite, which the
// handler puts around the answer.
package citations

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// Citer is a plugin's Run whose answer may cite pages: the citation
// writer turns the answer's links to them into url_citation annotations
// (web_search_result_location citations in a Messages answer).
type Citer interface {
	// Sources are the pages the answer may cite, as the model was told
	// of them; read as the answer passes.
	Sources() []websearch.Source
	// ToolUse is the run's part of the answer's usage once the meter
	// charged it: members of usage.server_tool_use_details
	// (`"web_fetch_requests":2`) and of a Messages answer's
	// usage.server_tool_use (Anthropic's); "" when it charged nothing.
	ToolUse() (details, anthropic string)
}

// NumberedCiter is a Citer whose sources the model was told by number
// (a search's results: [1] cites the first): the writer numbers them
// before any other citer's, whatever the order of the runs.
type NumberedCiter interface {
	Citer
	NumbersSources()
}

// ProviderCiter is a Citer whose provider may annotate the answer itself
// (a native search): on the route's attempt that answers, its annotations
// then pass and the writer adds none.
type ProviderCiter interface {
	ProviderCites(route *upstream.Route) bool
}

// ResponsesUsageAdjuster is a Citer that adjusts a Responses answer's
// usage object (at path in doc), which the meter leaves as the
// provider's: the web_fetch tool's earlier rounds' tokens.
type ResponsesUsageAdjuster interface {
	AdjustResponsesUsage(doc []byte, path string) []byte
}

// Writer adds url_citation annotations to the client-facing answer of a
// request whose runs cite pages (chat completions or Responses, whatever
// dialect the provider spoke below it):
//
//   - a JSON answer is held until complete (the meter sends it in one
//     piece) and every output text gets its annotations;
//   - a stream passes through event by event: each text delta is fed to a
//     websearch.Streamer and the annotations it completes go out at once,
//     as choices[].delta.annotations (chat) or as
//     response.output_text.annotation.added events (Responses), whose
//     sequence numbers shift every later event; the done events and
//     response.completed carry the part's whole list.
//
// Error answers pass through untouched, as do annotations a provider made
// itself (a ProviderCiter's); otherwise the gateway's annotations replace
// any the provider sent, streamed or not. usage.server_tool_use_details
// reports the runs' tool use once the meter has charged it.
type Writer struct {
	sse.Writer
	citers  []Citer         // in the order their sources are numbered
	kind    dialect.Kind    // the route's: chat, responses or messages
	route   *upstream.Route // whose attempt answers; nil in tests
	passAnn bool            // the provider annotates its own answer

	chat   map[int64]*websearch.Streamer
	parts  map[[2]int64]*partState
	order  [][2]int64
	offset int64 // events added so far (Responses)
}

type partState struct {
	itemID   string
	streamer *websearch.Streamer
	anns     []websearch.Annotation
	flushed  bool
}

// NewWriter is the writer of an answer in the client's dialect kind,
// on its way to w, whose runs citers cite pages (sorted: see
// NumberedCiter); route (nil: none) is the request's, whose answering
// attempt says whether a provider annotates its own answer.
func NewWriter(w http.ResponseWriter, kind dialect.Kind, route *upstream.Route, citers []Citer) *Writer {
	if len(citers) > 1 {
		// A stable sort: the numbered first, the others in their order.
		slices.SortStableFunc(citers, func(a, b Citer) int { return numbered(b) - numbered(a) })
	}
	cw := &Writer{
		citers: citers,
		kind:   kind,
		route:  route,
		chat:   map[int64]*websearch.Streamer{},
		parts:  map[[2]int64]*partState{},
	}
	cw.passAnn = cw.providerCites(nil)
	cw.Init(w, cw)
	return cw
}

// numbered is 1 for a NumberedCiter, else 0.
func numbered(c Citer) int {
	if _, ok := c.(NumberedCiter); ok {
		return 1
	}
	return 0
}

// providerCites reports whether a citer's provider annotates the answer
// on route (nil: before any attempt).
func (cw *Writer) providerCites(route *upstream.Route) bool {
	for _, c := range cw.citers {
		if pc, ok := c.(ProviderCiter); ok && pc.ProviderCites(route) {
			return true
		}
	}
	return false
}

// Decide implements sse.Hooks: errors pass through, streams are rewritten
// per event, JSON answers are held.
func (cw *Writer) Decide(status int) sse.Mode {
	if cw.route != nil {
		cw.passAnn = cw.providerCites(cw.route)
	}
	switch {
	case status < 200 || status >= 300:
		return sse.Pass
	case strings.HasPrefix(cw.Header().Get("Content-Type"), "text/event-stream"):
		return sse.Stream
	}
	return sse.Hold
}

// Finish sends a held JSON answer, annotated; the handler chain is done.
func (cw *Writer) Finish() {
	switch cw.Mode {
	case sse.Hold:
		body := cw.annotateJSON(cw.Body.Bytes())
		cw.Header().Set("Content-Length", strconv.Itoa(len(body)))
		cw.ResponseWriter.WriteHeader(cw.Status)
		_ = cw.Send(body) // the status is sent: a failed write is a client gone
	case sse.Stream:
		if cw.Body.Len() > 0 {
			_ = cw.Send(cw.Body.Bytes()) // the status is sent: a failed write is a client gone
		}
	}
	cw.Body.Reset()
}

// chatAnnotations renders annotations in the chat completions form.
func chatAnnotations(anns []websearch.Annotation) string {
	type inner struct {
		URL        string `json:"url"`
		Title      string `json:"title"`
		Content    string `json:"content,omitempty"`
		StartIndex int    `json:"start_index"`
		EndIndex   int    `json:"end_index"`
	}
	type outer struct {
		Type        string `json:"type"`
		URLCitation inner  `json:"url_citation"`
	}
	out := make([]outer, len(anns))
	for i, a := range anns {
		out[i] = outer{Type: "url_citation", URLCitation: inner{a.URL, a.Title, a.Content, a.StartIndex, a.EndIndex}}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// responsesAnnotations renders annotations in the Responses form.
func responsesAnnotations(anns []websearch.Annotation) string {
	if anns == nil {
		anns = []websearch.Annotation{}
	}
	b, _ := json.Marshal(anns)
	return string(b)
}

// annotateJSON adds the annotations and the search usage to a complete
// answer.
func (cw *Writer) annotateJSON(body []byte) []byte {
	if !jsoncheck.Valid(body) {
		return body
	}
	if cw.kind == dialect.Messages {
		return cw.annotateMessages(body)
	}
	out := body
	if cw.kind == dialect.Chat {
		if !cw.passAnn {
			n := gjson.GetBytes(body, "choices.#").Int()
			for i := range n {
				p := "choices." + strconv.FormatInt(i, 10) + ".message"
				text := gjson.GetBytes(out, p+".content").Str
				// sjson fails only on a malformed path, and these are well-formed.
				out, _ = sjson.SetRawBytes(out, p+".annotations", []byte(chatAnnotations(websearch.Annotate(text, cw.sources()))))
			}
		}
		return cw.withUsage(out, "usage")
	}
	if !cw.passAnn {
		gjson.GetBytes(body, "output").ForEach(func(oi, item gjson.Result) bool {
			if item.Get("type").Str != "message" {
				return true
			}
			item.Get("content").ForEach(func(ci, part gjson.Result) bool {
				if part.Get("type").Str == "output_text" {
					p := "output." + oi.String() + ".content." + ci.String() + ".annotations"
					anns := websearch.Annotate(part.Get("text").Str, cw.sources())
					out, _ = sjson.SetRawBytes(out, p, []byte(responsesAnnotations(anns)))
				}
				return true
			})
			return true
		})
	}
	return cw.withUsage(out, "usage")
}

// sources are the pages the answer may cite: each citer's, in order.
func (cw *Writer) sources() []websearch.Source {
	if len(cw.citers) == 1 {
		return cw.citers[0].Sources()
	}
	var all []websearch.Source
	for _, c := range cw.citers {
		all = append(all, c.Sources()...)
	}
	return all
}

// toolUse is the citers' usage.server_tool_use_details members and
// usage.server_tool_use members, of those charged; "" when none was.
func (cw *Writer) toolUse() (details, anthropic string) {
	for _, c := range cw.citers {
		d, a := c.ToolUse()
		details = joinMembers(details, d)
		anthropic = joinMembers(anthropic, a)
	}
	return details, anthropic
}

// joinMembers joins two lists of JSON object members.
func joinMembers(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "," + b
}

// withUsage adds usage.server_tool_use_details once a citer was charged.
func (cw *Writer) withUsage(doc []byte, path string) []byte {
	if cw.kind == dialect.Responses {
		for _, c := range cw.citers {
			if ua, ok := c.(ResponsesUsageAdjuster); ok {
				doc = ua.AdjustResponsesUsage(doc, path)
			}
		}
	}
	details, _ := cw.toolUse()
	if details == "" || !gjson.GetBytes(doc, path).IsObject() {
		return doc
	}
	out, err := sjson.SetRawBytes(doc, path+".server_tool_use_details", []byte("{"+details+"}"))
	if err != nil {
		return doc
	}
	return out
}

// Event implements sse.Hooks: it rewrites one stream event; the result may
// hold several events, or none.
func (cw *Writer) Event(ev []byte) ([]byte, error) {
	data := sse.Data(ev)
	if data == nil || sse.IsDone(data) || !jsoncheck.Valid(data) {
		return ev, nil
	}
	switch cw.kind {
	case dialect.Chat:
		return cw.chatEvent(ev, data), nil
	case dialect.Messages:
		return cw.messagesEvent(ev, data), nil
	}
	return cw.responsesEvent(ev, data), nil
}

func (cw *Writer) chatEvent(ev, data []byte) []byte {
	out := data
	if !cw.passAnn {
		gjson.GetBytes(data, "choices").ForEach(func(k, c gjson.Result) bool {
			idx := c.Get("index").Int()
			s := cw.chat[idx]
			if s == nil {
				s = websearch.NewStreamer(cw.sources())
				cw.chat[idx] = s
			}
			var anns []websearch.Annotation
			if t := c.Get("delta.content"); t.Type == gjson.String && t.Str != "" {
				anns = s.Feed(t.Str)
			}
			if f := c.Get("finish_reason"); f.Exists() && f.Type != gjson.Null {
				anns = append(anns, s.Flush()...)
				delete(cw.chat, idx)
			}
			switch {
			case len(anns) > 0:
				// sjson fails only on a malformed path, and these are well-formed.
				out, _ = sjson.SetRawBytes(out, "choices."+k.String()+".delta.annotations", []byte(chatAnnotations(anns)))
			case c.Get("delta.annotations").Exists():
				// The gateway's annotations replace a provider's own.
				out, _ = sjson.DeleteBytes(out, "choices."+k.String()+".delta.annotations")
			}
			return true
		})
	}
	if gjson.GetBytes(out, "usage").IsObject() {
		out = cw.withUsage(out, "usage")
	}
	if bytes.Equal(out, data) {
		return ev
	}
	return sse.ReplaceData(ev, data, out)
}

func (cw *Writer) responsesEvent(ev, data []byte) []byte {
	res := gjson.GetManyBytes(data, "type", "sequence_number", "output_index", "content_index", "item_id")
	typ, seq := res[0].Str, res[1]
	key := [2]int64{res[2].Int(), res[3].Int()}
	var pre, post []websearch.Annotation // annotation events before / after this one
	out := data
	st := cw.parts[key]
	if !cw.passAnn && typ == "response.output_text.annotation.added" {
		// The gateway's annotations replace a provider's own (as in the
		// final lists): its events go, and the later numbers close up.
		cw.offset--
		return nil
	}
	if !cw.passAnn {
		switch typ {
		case "response.output_text.delta":
			if st == nil {
				st = &partState{itemID: res[4].Str, streamer: websearch.NewStreamer(cw.sources())}
				cw.parts[key] = st
				cw.order = append(cw.order, key)
			}
			post = st.streamer.Feed(gjson.GetBytes(data, "delta").Str)
		case "response.output_text.done":
			if st == nil {
				st = &partState{itemID: res[4].Str, streamer: websearch.NewStreamer(cw.sources())}
				st.streamer.Feed(gjson.GetBytes(data, "text").Str)
				cw.parts[key] = st
				cw.order = append(cw.order, key)
			}
			if !st.flushed {
				st.flushed = true
				pre = st.streamer.Flush()
			}
		}
	}
	var b []byte
	emit := func(anns []websearch.Annotation, after bool) {
		for _, a := range anns {
			if after {
				cw.offset++
			}
			ann, _ := json.Marshal(a)
			e := `{"type":"response.output_text.annotation.added"}`
			// sjson fails only on a malformed path, and these are well-formed.
			e, _ = sjson.Set(e, "item_id", st.itemID)
			e, _ = sjson.Set(e, "output_index", key[0])
			e, _ = sjson.Set(e, "content_index", key[1])
			e, _ = sjson.Set(e, "annotation_index", len(st.anns))
			e, _ = sjson.SetRaw(e, "annotation", string(ann))
			e, _ = sjson.Set(e, "sequence_number", seq.Int()+cw.offset)
			if !after {
				cw.offset++
			}
			st.anns = append(st.anns, a)
			b = append(b, "event: response.output_text.annotation.added\ndata: "...)
			b = append(b, e...)
			b = append(b, "\n\n"...)
		}
	}
	emit(pre, false)
	if !cw.passAnn {
		switch typ {
		case "response.output_text.done":
			out, _ = sjson.SetRawBytes(out, "annotations", []byte(responsesAnnotations(st.anns)))
		case "response.content_part.done":
			if st != nil && gjson.GetBytes(out, "part.type").Str == "output_text" {
				out, _ = sjson.SetRawBytes(out, "part.annotations", []byte(responsesAnnotations(st.anns)))
			}
		case "response.output_item.done":
			for _, k := range cw.order {
				if k[0] == key[0] && gjson.GetBytes(out, "item.content."+strconv.FormatInt(k[1], 10)+".type").Str == "output_text" {
					out, _ = sjson.SetRawBytes(out, "item.content."+strconv.FormatInt(k[1], 10)+".annotations", []byte(responsesAnnotations(cw.parts[k].anns)))
				}
			}
		case "response.completed", "response.incomplete":
			for _, k := range cw.order {
				p := "response.output." + strconv.FormatInt(k[0], 10) + ".content." + strconv.FormatInt(k[1], 10)
				if gjson.GetBytes(out, p+".type").Str == "output_text" {
					out, _ = sjson.SetRawBytes(out, p+".annotations", []byte(responsesAnnotations(cw.parts[k].anns)))
				}
			}
		}
	}
	if typ == "response.completed" || typ == "response.incomplete" {
		out = cw.withUsage(out, "response.usage")
	}
	if seq.Exists() && cw.offset != 0 {
		out, _ = sjson.SetBytes(out, "sequence_number", seq.Int()+cw.offset)
	}
	if !bytes.Equal(out, data) {
		ev = sse.ReplaceData(ev, data, out)
	}
	b = append(b, ev...)
	emit(post, true)
	return b
}
