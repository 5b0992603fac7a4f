// Package responsehealing is the response-healing plugin, the Caddy
// module tollgate.plugins.response_healing: when a chat completions or
// Responses request asks for JSON (response_format, or text.format, of
// type json_object or json_schema), the texts of its plain answer are
// repaired into valid JSON (healjson) and, with a schema, checked against
// it. The header X-Response-Healing reports the outcome. Streams pass
// unhealed (their text has reached the client before it is complete) and
// say so in the header. Healing costs nothing: the charge is the
// answer's usage.
package responsehealing

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/healjson"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// healingHeader reports what the plugin did.
const healingHeader = "X-Response-Healing"

func init() {
	caddy.RegisterModule(new(Healing))
}

// name is the plugin's id in a request's plugins array.
const name = "response-healing"

// maxAnswer bounds the answer held for healing, as the meter bounds what
// it holds.
const maxAnswer = 32 << 20

// Healing is the response-healing plugin. It takes no configuration.
type Healing struct{}

// CaddyModule returns the Caddy module information.
func (*Healing) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tollgate.plugins.response_healing",
		New: func() caddy.Module { return new(Healing) },
	}
}

// UnmarshalCaddyfile reads the plugin's directive, which takes nothing:
//
//	response_healing
func (*Healing) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugin.NoOptions(d, "response_healing", "")
}

// Name implements plugin.Plugin.
func (*Healing) Name() string { return name }

// CheckEntry implements plugin.Plugin: id and enabled are an entry's only
// members.
func (*Healing) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, name, entry, nil)
}

// Plan implements plugin.Plugin: the request's healing, nil when it asks
// for no JSON answer.
func (*Healing) Plan(req *plugin.Request) (plugin.Run, *apierror.Error) {
	h, apiErr := healingFor(req.Kind, req.Body, req.Plugins)
	if h == nil {
		return nil, apiErr // not a nil *healing in a non-nil Run
	}
	return h, nil
}

// healing is what a request's response-healing plugin asks for.
type healing struct {
	kind      dialect.Kind     // chat or responses
	schema    *healjson.Schema // nil: json_object, or a schema not checked
	unchecked bool             // json_schema whose schema could not be compiled
	w         *healWriter      // the answer's writer
}

// healingFor is what the request body of a route of kind, with its
// plugins array, asks the plugin for; nil when it does not ask for it or
// asks for no JSON. The plugin entries were checked.
func healingFor(kind dialect.Kind, body []byte, plugins gjson.Result) (*healing, *apierror.Error) {
	_, asked := plugin.Entry(plugins, name)
	if asked < 0 {
		return nil, nil
	}
	formatPath, schemaPath := "response_format", "response_format.json_schema.schema"
	switch kind {
	case dialect.Chat:
	case dialect.Responses:
		formatPath, schemaPath = "text.format", "text.format.schema"
	default:
		return nil, apierror.BadRequest("plugins[" + strconv.Itoa(asked) +
			"].id: the response-healing plugin applies to /chat/completions and /responses")
	}
	format := gjson.GetBytes(body, formatPath)
	h := &healing{kind: kind}
	switch format.Get("type").Str {
	case "json_object":
	case "json_schema":
		s, err := healjson.Compile([]byte(gjson.GetBytes(body, schemaPath).Raw))
		if err != nil {
			// The provider is the judge of the schema; an answer that
			// cannot be checked is still repaired.
			h.unchecked = true
		}
		h.schema = s
	default:
		return nil, nil // a text answer: nothing to heal
	}
	return h, nil
}

// WrapAnswer implements plugin.AnswerWrapper.
func (h *healing) WrapAnswer(w http.ResponseWriter) http.ResponseWriter {
	h.w = newHealWriter(w, h)
	return h.w
}

// FinishAnswer implements plugin.AnswerWrapper.
func (h *healing) FinishAnswer() { h.w.finish() }

// healWriter holds a plain JSON answer, heals its texts and sends it;
// streams and errors pass through.
type healWriter struct {
	sse.Writer
	h *healing
}

func newHealWriter(w http.ResponseWriter, h *healing) *healWriter {
	hw := &healWriter{h: h}
	hw.Init(w, hw)
	hw.Limit = maxAnswer
	return hw
}

// Decide implements sse.Hooks.
func (hw *healWriter) Decide(status int) sse.Mode {
	switch {
	case status < 200 || status >= 300:
		return sse.Pass
	case strings.HasPrefix(hw.Header().Get("Content-Type"), "text/event-stream"):
		hw.Header().Set(healingHeader, "skipped=stream")
		return sse.Pass
	}
	return sse.Hold
}

// Event implements sse.Hooks; never called, as streams pass.
func (hw *healWriter) Event(ev []byte) ([]byte, error) { return ev, nil }

// finish sends a held answer, healed; the handler chain is done.
func (hw *healWriter) finish() {
	if hw == nil || hw.Mode != sse.Hold {
		return
	}
	body, report := hw.h.heal(hw.Body.Bytes())
	if report != "" {
		hw.Header().Set(healingHeader, report)
	}
	hw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	hw.ResponseWriter.WriteHeader(hw.Status)
	_ = hw.Send(body) // the status is sent: a failed write is a client gone
	hw.Body.Reset()
}

// textSpan is an answer text: where its JSON string is in the answer.
type textSpan struct {
	start, end int
	text       string
	healed     []byte // nil: left as it is
}

// heal returns the answer with its texts healed, and the report for the
// header: "repaired=<repairs>" (healjson.Repair's names, or "none"), or
// "unrepairable" when a text could not be made JSON (it is then left as
// it came), then, with a schema, "; schema=valid|invalid" (invalid with
// "; schema_path=<JSON pointer>" of the first value that fails) or
// "; schema=unchecked". An answer that is not a JSON object is returned
// unchanged with no report.
func (h *healing) heal(body []byte) ([]byte, string) {
	if !jsoncheck.Valid(body) || body[firstNonSpace(body)] != '{' {
		return body, ""
	}
	var texts []textSpan
	add := func(v gjson.Result) {
		if v.Type == gjson.String && v.Index > 0 {
			texts = append(texts, textSpan{start: v.Index, end: v.Index + len(v.Raw), text: v.Str})
		}
	}
	if h.kind == dialect.Chat {
		gjson.GetBytes(body, "choices").ForEach(func(_, c gjson.Result) bool {
			add(c.Get("message.content"))
			return true
		})
	} else {
		gjson.GetBytes(body, "output").ForEach(func(_, item gjson.Result) bool {
			if item.Get("type").Str == "message" {
				item.Get("content").ForEach(func(_, part gjson.Result) bool {
					if part.Get("type").Str == "output_text" {
						add(part.Get("text"))
					}
					return true
				})
			}
			return true
		})
		// The convenience member some providers add, the texts joined.
		add(gjson.GetBytes(body, "output_text"))
	}
	if len(texts) == 0 {
		return body, ""
	}
	var repairs healjson.Repair
	unrepairable, schemaOK, where := false, true, ""
	for i, t := range texts {
		out, r, ok := healjson.Heal([]byte(t.text))
		if !ok {
			unrepairable = true
			continue
		}
		repairs |= r
		if r != 0 {
			texts[i].healed = out
		}
		if h.schema != nil && schemaOK {
			schemaOK, where = h.schema.Check(out)
		}
	}
	report := "repaired=" + repairs.String()
	if unrepairable {
		report = "unrepairable"
	}
	switch {
	case unrepairable || (h.schema == nil && !h.unchecked):
	case h.unchecked:
		report += "; schema=unchecked"
	case schemaOK:
		report += "; schema=valid"
	default:
		report += "; schema=invalid"
		if where != "" {
			report += "; schema_path=" + where
		}
	}
	if repairs == 0 {
		return body, report
	}
	// Splice the healed texts in, in the answer's order.
	slices.SortFunc(texts, func(a, b textSpan) int { return a.start - b.start })
	out := make([]byte, 0, len(body)+64)
	at := 0
	for _, t := range texts {
		if t.healed == nil {
			continue
		}
		out = append(out, body[at:t.start]...)
		out = jsonstr.Append(out, string(t.healed))
		at = t.end
	}
	return append(out, body[at:]...), report
}

// firstNonSpace is the index of body's first byte that is not JSON
// whitespace; 0 when none.
func firstNonSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
	}
	return 0
}

// Interface guards
var (
	_ plugin.Plugin         = (*Healing)(nil)
	_ caddyfile.Unmarshaler = (*Healing)(nil)
	_ plugin.AnswerWrapper  = (*healing)(nil)
)
