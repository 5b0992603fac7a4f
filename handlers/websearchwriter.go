package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// citeWriter adds url_citation annotations to the client-facing answer of
// a web search request (chat completions or Responses, whatever dialect
// the provider spoke below it):
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
// Error answers pass through untouched, as do annotations a provider's
// native search made itself (OpenAI-style providers); otherwise the
// gateway's annotations replace any the provider sent, streamed or not.
// usage.server_tool_use_details reports the search once the meter has
// charged it.
type citeWriter struct {
	sse.Writer
	plan    *searchPlan   // nil: the request fetched pages only
	fetch   *fetchRun     // the web-fetch plugin's pages; nil: none
	kind    dialect.Kind  // the route's: chat, responses or messages
	st      *requestState // for the route's attempt that answered
	passAnn bool          // the provider annotates its own answer

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

func newCiteWriter(w http.ResponseWriter, st *requestState) *citeWriter {
	plan := st.plan
	cw := &citeWriter{
		plan:  plan,
		fetch: st.fetch,
		st:    st,
		chat:  map[int64]*websearch.Streamer{},
		parts: map[[2]int64]*partState{},
	}
	if plan != nil {
		cw.kind = plan.kind
		cw.passAnn = plan.engine == "native" && (plan.family == "openai" || plan.family == "x" && plan.kind == dialect.Responses)
	} else if st.Route != nil {
		cw.kind = st.Route.Kind
	}
	cw.Init(w, cw)
	return cw
}

// Decide implements sse.Hooks: errors pass through, streams are rewritten
// per event, JSON answers are held.
func (cw *citeWriter) Decide(status int) sse.Mode {
	if cw.st != nil && cw.plan != nil {
		if rt := cw.st.Route; rt != nil && rt.Translate {
			// A chat-only provider answered a Responses request: it
			// annotates its own answer as in chat completions.
			cw.passAnn = cw.plan.engine == "native" && cw.plan.family == "openai"
		}
		if rt := cw.st.Route; rt != nil && rt.ViaChat {
			// Anthropic's native search cites its sources itself; the
			// translation made them url_citation annotations.
			cw.passAnn = cw.plan.engine == "native" && cw.plan.family == "anthropic"
		}
	}
	switch {
	case status < 200 || status >= 300:
		return sse.Pass
	case strings.HasPrefix(cw.Header().Get("Content-Type"), "text/event-stream"):
		return sse.Stream
	}
	return sse.Hold
}

// finish sends a held JSON answer, annotated; the handler chain is done.
func (cw *citeWriter) finish() {
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
func (cw *citeWriter) annotateJSON(body []byte) []byte {
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

// sources are the pages the answer may cite: the search results, then
// the fetched pages.
func (cw *citeWriter) sources() []websearch.Source {
	switch {
	case cw.fetch == nil:
		return cw.plan.sources
	case cw.plan == nil:
		return cw.fetch.sources
	}
	return append(cw.plan.sources[:len(cw.plan.sources):len(cw.plan.sources)], cw.fetch.sources...)
}

// serverToolUse is usage.server_tool_use_details: the search's and the
// fetches' counts, of those charged; "" when none was.
func (cw *citeWriter) serverToolUse() string {
	search := cw.plan != nil && cw.plan.charged
	fetch := cw.fetch != nil && cw.fetch.charged
	switch {
	case search && fetch:
		s := cw.plan.serverToolUse()
		return s[:len(s)-1] + "," + cw.fetch.serverToolUse() + "}"
	case search:
		return cw.plan.serverToolUse()
	case fetch:
		return "{" + cw.fetch.serverToolUse() + "}"
	}
	return ""
}

// withUsage adds usage.server_tool_use_details once the search was charged.
func (cw *citeWriter) withUsage(doc []byte, path string) []byte {
	if cw.kind == dialect.Responses && cw.fetch != nil {
		doc = cw.fetch.withPriorTokens(doc, path)
	}
	details := cw.serverToolUse()
	if details == "" || !gjson.GetBytes(doc, path).IsObject() {
		return doc
	}
	out, err := sjson.SetRawBytes(doc, path+".server_tool_use_details", []byte(details))
	if err != nil {
		return doc
	}
	return out
}

// Event implements sse.Hooks: it rewrites one stream event; the result may
// hold several events, or none.
func (cw *citeWriter) Event(ev []byte) ([]byte, error) {
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

func (cw *citeWriter) chatEvent(ev, data []byte) []byte {
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

func (cw *citeWriter) responsesEvent(ev, data []byte) []byte {
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
