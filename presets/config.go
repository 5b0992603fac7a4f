package presets

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

// A preset's config holds the members of a request that configure it
// (its model, provider preferences and parameters), never its input
// (messages, input, prompt) or its delivery (stream). Each member applies
// to the APIs that define it.
type member struct {
	name                      string
	chat, messages, responses bool
}

// members are the members a config holds, in the order it lists them.
var members = []member{
	{"model", true, true, true},
	{"models", true, true, true},
	{"provider", true, true, true},
	{"plugins", true, true, true},
	{"transforms", true, true, false},
	{"temperature", true, true, true},
	{"top_p", true, true, true},
	{"top_k", true, true, false},
	{"frequency_penalty", true, false, false},
	{"presence_penalty", true, false, false},
	{"repetition_penalty", true, false, false},
	{"min_p", true, false, false},
	{"top_a", true, false, false},
	{"seed", true, false, false},
	{"logit_bias", true, false, false},
	{"logprobs", true, false, false},
	{"top_logprobs", true, false, true},
	{"max_tokens", true, true, false},
	{"max_completion_tokens", true, false, false},
	{"max_output_tokens", false, false, true},
	{"stop", true, false, false},
	{"stop_sequences", false, true, false},
	{"response_format", true, false, false},
	{"text", false, false, true},
	{"reasoning", true, true, true},
	{"reasoning_effort", true, false, false},
	{"thinking", false, true, false},
	{"verbosity", true, false, false},
	{"tools", true, true, true},
	{"tool_choice", true, true, true},
	{"parallel_tool_calls", true, false, true},
}

func (m member) in(kind dialect.Kind) bool {
	switch kind {
	case dialect.Chat:
		return m.chat
	case dialect.Messages:
		return m.messages
	case dialect.Responses:
		return m.responses
	}
	return false
}

func memberNamed(name string) (member, bool) {
	i := slices.IndexFunc(members, func(m member) bool { return m.name == name })
	if i < 0 {
		return member{}, false
	}
	return members[i], true
}

// outputLimits are the members that bound a request's output, one per
// API (chat takes two).
var outputLimits = []string{"max_tokens", "max_completion_tokens", "max_output_tokens"}

// stops are the members that stop a request's output.
var stops = []string{"stop", "stop_sequences"}

// ConfigFrom is what a preset keeps of an inference request body of kind:
// its config (the members a preset holds, as the request sent them, null
// ones left out) and its system prompt (a chat request's system and
// developer messages, a Messages request's system, a Responses request's
// instructions; nil without one). An error names the member that is
// malformed.
func ConfigFrom(kind dialect.Kind, body []byte) (config string, system *string, err error) {
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		return "", nil, fmt.Errorf("%w: the body must be a JSON object", ErrInvalid)
	}
	got := map[string]string{}
	var sys []string
	var bad error
	rawjson.EachMember(rawjson.View(body), func(key, val string) bool {
		if m, ok := memberNamed(key); ok && m.in(kind) && val != "null" {
			got[key] = val
		}
		switch {
		case kind == dialect.Chat && key == "messages":
			for _, msg := range gjson.Parse(val).Array() {
				if r := msg.Get("role").String(); r == "system" || r == "developer" {
					sys = append(sys, contentText(msg.Get("content")))
				}
			}
		case kind == dialect.Messages && key == "system":
			if t := contentText(gjson.Parse(val)); t != "" {
				sys = append(sys, t)
			}
		case kind == dialect.Responses && key == "instructions":
			v := gjson.Parse(val)
			if v.Type != gjson.String && v.Type != gjson.Null {
				bad = fmt.Errorf("%w: instructions: expected a string", ErrInvalid)
				return false
			}
			if v.Str != "" {
				sys = append(sys, v.Str)
			}
		}
		return true
	})
	if bad != nil {
		return "", nil, bad
	}
	if m, ok := got["model"]; ok {
		if v := gjson.Parse(m); v.Type != gjson.String || v.Str == "" || IsPresetModel(v.Str) {
			return "", nil, fmt.Errorf("%w: model: expected a model id", ErrInvalid)
		}
	}
	if p, ok := got["provider"]; ok && !gjson.Parse(p).IsObject() {
		return "", nil, fmt.Errorf("%w: provider: expected an object", ErrInvalid)
	}
	var b strings.Builder
	b.WriteByte('{')
	for _, m := range members {
		v, ok := got[m.name]
		if !ok {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.name)
		b.Write(k)
		b.WriteByte(':')
		raw, err := rawjson.AppendRaw(nil, v)
		if err != nil {
			return "", nil, fmt.Errorf("%w: %s: %v", ErrInvalid, m.name, err)
		}
		b.Write(raw)
	}
	b.WriteByte('}')
	if len(sys) > 0 {
		s := strings.Join(sys, "\n\n")
		system = &s
	}
	return b.String(), system, nil
}

// contentText is the text of a message's content: a string, or the text
// of its text parts.
func contentText(c gjson.Result) string {
	if c.Type == gjson.String {
		return c.Str
	}
	var parts []string
	for _, p := range c.Array() {
		if t := p.Get("text"); t.Type == gjson.String {
			parts = append(parts, t.Str)
		}
	}
	return strings.Join(parts, "\n\n")
}

// ModelPrefix makes a model id name a preset: "@preset/<slug>".
const ModelPrefix = "@preset/"

// IsPresetModel reports whether a model id names a preset.
func IsPresetModel(model string) bool { return strings.HasPrefix(model, ModelPrefix) }
