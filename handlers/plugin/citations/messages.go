package citations

import (
	"encoding/json"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// The writer's Messages form: a gateway-side search's sources
// cited by the answer's markdown links become Anthropic
// web_search_result_location citations of the text blocks (in the JSON
// answer's content, as citations_delta events in a stream, right after
// the text that completes a link), replacing any the provider sent; the
// usage reports the search as server_tool_use (Anthropic's) and
// server_tool_use_details (the gateway's).

// messagesCitation is a web_search_result_location citation.
type messagesCitation struct {
	Type           string `json:"type"`
	URL            string `json:"url"`
	Title          string `json:"title"`
	CitedText      string `json:"cited_text"`
	EncryptedIndex string `json:"encrypted_index"`
}

// citationOf is an annotation as a citation; the cited text is the
// source's snippet (its title when it has none).
func citationOf(a websearch.Annotation) messagesCitation {
	cited := a.Content
	if cited == "" {
		cited = a.Title
	}
	return messagesCitation{Type: "web_search_result_location", URL: a.URL, Title: a.Title, CitedText: cited}
}

// messagesCitations renders a text block's citations: null without any.
func messagesCitations(anns []websearch.Annotation) []byte {
	if len(anns) == 0 {
		return []byte("null")
	}
	out := make([]messagesCitation, len(anns))
	for i, a := range anns {
		out[i] = citationOf(a)
	}
	b, _ := json.Marshal(out)
	return b
}

// annotateMessages cites the sources in each text block of a Messages
// answer and reports the search in its usage.
func (cw *Writer) annotateMessages(body []byte) []byte {
	out := body
	gjson.GetBytes(body, "content").ForEach(func(i, b gjson.Result) bool {
		if b.Get("type").Str == "text" {
			anns := websearch.Annotate(b.Get("text").Str, cw.sources())
			// sjson fails only on a malformed path, and these are well-formed.
			out, _ = sjson.SetRawBytes(out, "content."+i.String()+".citations", messagesCitations(anns))
		}
		return true
	})
	return cw.withMessagesUsage(out)
}

// withMessagesUsage adds the runs' tool use to the usage once charged.
func (cw *Writer) withMessagesUsage(doc []byte) []byte {
	details, anthropic := cw.toolUse()
	if details == "" || !gjson.GetBytes(doc, "usage").IsObject() {
		return doc
	}
	out := cw.withUsage(doc, "usage")
	if anthropic == "" {
		return out
	}
	out, err := sjson.SetRawBytes(out, "usage.server_tool_use", []byte("{"+anthropic+"}"))
	if err != nil {
		return doc
	}
	return out
}

// messagesEvent rewrites one event of a Messages stream: text deltas feed
// their block's streamer, whose citations follow them; a block's stop
// flushes the rest before it; the provider's own citations go.
func (cw *Writer) messagesEvent(ev, data []byte) []byte {
	r := gjson.GetManyBytes(data, "type", "index", "delta.type", "delta.text", "content_block.type")
	idx := r[1].Int()
	switch r[0].Str {
	case "content_block_start":
		if r[4].Str == "text" {
			cw.chat[idx] = websearch.NewStreamer(cw.sources())
		}
	case "content_block_delta":
		switch s := cw.chat[idx]; {
		case r[2].Str == "citations_delta":
			return nil
		case r[2].Str == "text_delta" && s != nil:
			return joinEvents(ev, citationEvents(idx, s.Feed(r[3].Str)))
		}
	case "content_block_stop":
		if s := cw.chat[idx]; s != nil {
			delete(cw.chat, idx)
			return joinEvents(citationEvents(idx, s.Flush()), ev)
		}
	case "message_delta":
		if out := cw.withMessagesUsage(data); len(out) != len(data) {
			return sse.ReplaceData(ev, data, out)
		}
	}
	return ev
}

// citationEvents are the citations_delta events of a block's annotations.
func citationEvents(idx int64, anns []websearch.Annotation) []byte {
	var b []byte
	for _, a := range anns {
		data, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": idx,
			"delta": map[string]any{"type": "citations_delta", "citation": citationOf(a)}})
		b = append(append(append(b, "event: content_block_delta\ndata: "...), data...), "\n\n"...)
	}
	return b
}

// joinEvents concatenates events into a new slice: an event handed to a
// hook lies in the stream's buffer, which appending to it would overwrite.
func joinEvents(a, b []byte) []byte {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]byte, 0, len(a)+len(b))
	return append(append(out, a...), b...)
}
