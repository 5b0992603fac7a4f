// Package normalize is the request normalizer: it stands between routing
// and the upstream, so that a provider receives only what its API
// defines, as strict providers refuse any parameter they do not know
// (OpenAI answers 400 "Unrecognized request argument supplied"). Body runs
// once per request, on the body every attempt starts from; it checks the
// request's plugins array on the way.
package normalize

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
)

// gatewayOnlyField reports whether name is one of the public API's
// request fields that only the gateway understands: routing, accounting,
// plugins and tracing. (A switch: a map lookup hashed every field of every
// request.)
func gatewayOnlyField(name string) bool {
	switch name {
	case "models", "provider", "route", "usage", "transforms",
		"plugins", "debug", "session_id", "trace",
		"stop_server_tools_when", "image_config", "cache_control",
		"prompt_cache_options":
		return true
	}
	return false
}

// openAIUnsupported reports whether name is one of the public API's
// sampling fields that OpenAI's APIs of the route kind do not define;
// providers that lack a parameter ignore it in the public API, so the
// gateway drops them.
func openAIUnsupported(kind dialect.Kind, name string) bool {
	switch kind {
	case dialect.Chat, dialect.Responses:
		switch name {
		case "min_p", "top_a", "top_k", "repetition_penalty":
			return true
		case "frequency_penalty", "presence_penalty", "modalities":
			return kind == dialect.Responses
		}
	}
	return false
}

// referencePlugins are the plugins the public API defines (besides the web
// search plugin, which the web search stage serves, web-fetch, and the
// plugin modules): a name of them that no plugin takes is one this gateway does
// not offer.
var referencePlugins = map[string]bool{
	"auto-router": true, "auto-beta-router": true, "pareto-router": true, "fusion": true,
	"file-parser": true, "moderation": true, "response-healing": true,
	"web-fetch": true, "web": true,
}

// reasoningEfforts are the public reasoning.effort values.
var reasoningEfforts = map[string]bool{
	"max": true, "xhigh": true, "high": true, "medium": true, "low": true, "minimal": true, "none": true,
}

// Body returns the body a provider of the route kind ("chat",
// "responses", "other") receives: without the gateway's own fields, with
// the public reasoning object in the dialect's form (chat:
// reasoning_effort; Responses: reasoning with effort and summary), and a
// streamed chat request asking for usage (stream_options.include_usage),
// which the gateway meters and reports whether or not the client asked.
// A plugin the gateway does not offer is a 400 naming it. The body was
// checked by the router; one that needs no change is returned as
// it is.
func Body(kind dialect.Kind, body []byte, f *reqbody.Fields, plugins plugin.Set) ([]byte, *apierror.Error) {
	var drop []string
	var reasoning, streamOptions, tools gjson.Result
	var toolFields []string // tool_choice, parallel_tool_calls
	hasEffort := false
	stream := false
	// Values parsed only for the fields read: most are dropped or passed
	// on by name.
	for name, raw := range f.EachRaw {
		switch {
		case name == "plugins":
			if apiErr := CheckPlugins(gjson.Parse(raw), plugins); apiErr != nil {
				return nil, apiErr
			}
			drop = append(drop, name)
		case name == "cache_control" && kind == dialect.Messages:
			// Automatic caching, Anthropic's own member: passed to an
			// Anthropic-style provider as it is (a translation for
			// another provider has no place for it).
		case gatewayOnlyField(name) || openAIUnsupported(kind, name):
			drop = append(drop, name)
		case name == "reasoning" && kind != dialect.Other:
			reasoning = gjson.Parse(raw)
			drop = append(drop, name)
		case name == "reasoning_effort":
			hasEffort = gjson.Parse(raw).Type != gjson.Null
		case name == "messages" && kind == dialect.Chat && strings.Contains(raw, `"reasoning_details"`):
			if apiErr := checkReasoningDetails(gjson.Parse(raw)); apiErr != nil {
				return nil, apiErr
			}
		case name == "stream":
			stream = gjson.Parse(raw).Type == gjson.True
		case name == "stream_options" && kind == dialect.Chat:
			streamOptions = gjson.Parse(raw)
		case name == "tools" && kind == dialect.Chat:
			tools = gjson.Parse(raw)
		case (name == "tool_choice" || name == "parallel_tool_calls") && kind == dialect.Chat:
			toolFields = append(toolFields, name)
		}
	}
	if len(toolFields) > 0 && len(tools.Array()) == 0 {
		// Without tools they mean nothing, and OpenAI refuses them.
		drop = append(drop, toolFields...)
	}
	var extra [][]byte
	if reasoning.Exists() {
		add, apiErr := reasoningFor(kind, reasoning, hasEffort)
		if apiErr != nil {
			return nil, apiErr
		}
		if add != nil {
			extra = append(extra, add)
		}
	}
	if kind == dialect.Chat && stream && !gjson.Get(streamOptions.Raw, "include_usage").Bool() {
		opts := []byte(`{"include_usage":true}`)
		if streamOptions.IsObject() {
			// sjson fails only on a malformed path, and these are well-formed.
			opts, _ = sjson.SetBytes([]byte(streamOptions.Raw), "include_usage", true)
		}
		if streamOptions.Exists() {
			drop = append(drop, "stream_options")
		}
		extra = append(extra, append([]byte(`"stream_options":`), opts...))
	}
	if len(drop) == 0 && len(extra) == 0 {
		return body, nil
	}
	return f.Rebuild(drop, extra), nil
}

// checkReasoningDetails checks the reasoning_details of the messages
// sent back, whichever provider serves them: one of a wrong shape is a
// 400 naming it.
func checkReasoningDetails(msgs gjson.Result) *apierror.Error {
	var apiErr *apierror.Error
	msgs.ForEach(func(i, m gjson.Result) bool {
		if _, bad := chatform.ReadReasoningDetails(m.Get("reasoning_details")); bad != nil {
			apiErr = apierror.BadRequest("messages[" + strconv.Itoa(int(i.Int())) + "].reasoning_details" + bad.Error())
		}
		return apiErr == nil
	})
	return apiErr
}

// CheckPlugins checks every plugin entry that asks for something: the
// gateway's plugins (plugins) check their own, the web search plugin is
// taken out before (tollgate_websearch), and this gateway offers no
// other.
func CheckPlugins(v gjson.Result, plugins plugin.Set) *apierror.Error {
	if v.Type == gjson.Null {
		return nil
	}
	if !v.IsArray() {
		return apierror.BadRequest("plugins: expected an array of plugin objects")
	}
	var apiErr *apierror.Error
	v.ForEach(func(i, p gjson.Result) bool {
		path := "plugins[" + strconv.Itoa(int(i.Int())) + "]"
		id := p.Get("id")
		switch {
		case !p.IsObject() || id.Type != gjson.String:
			apiErr = apierror.BadRequest(path + ".id: required string")
		case p.Get("enabled").Type == gjson.False:
			// Asks for nothing.
		case plugins.Lookup(id.Str) != nil:
			apiErr = plugins.Lookup(id.Str).CheckEntry(path, p) // a plugin module
		case referencePlugins[id.Str]:
			apiErr = apierror.BadRequest(fmt.Sprintf("%s.id: this gateway does not offer the %q plugin", path, id.Str))
		default:
			apiErr = apierror.BadRequest(fmt.Sprintf("%s.id: unknown plugin %q", path, id.Str))
		}
		return apiErr == nil
	})
	return apiErr
}

// reasoningFor is the public reasoning object as the member the dialect
// takes; nil when it asks for nothing the dialect can express (a token
// budget or exclude). chat: reasoning_effort, unless the client set that
// too; Responses: reasoning with effort and summary.
func reasoningFor(kind dialect.Kind, r gjson.Result, hasEffort bool) ([]byte, *apierror.Error) {
	if r.Type == gjson.Null {
		return nil, nil
	}
	if !r.IsObject() {
		return nil, apierror.BadRequest("reasoning: expected an object")
	}
	effort := r.Get("effort")
	if effort.Exists() && effort.Type != gjson.Null && (effort.Type != gjson.String || !reasoningEfforts[effort.Str]) {
		return nil, apierror.BadRequest("reasoning.effort: expected one of max, xhigh, high, medium, low, minimal, none")
	}
	if r.Get("enabled").Type == gjson.False && effort.Type != gjson.String {
		effort = gjson.Parse(`"none"`)
	}
	if kind == dialect.Chat {
		if hasEffort || effort.Type != gjson.String {
			return nil, nil
		}
		return append([]byte(`"reasoning_effort":`), effort.Raw...), nil
	}
	out := []byte(`{}`)
	if effort.Type == gjson.String {
		// sjson fails only on a malformed path, and these are well-formed.
		out, _ = sjson.SetRawBytes(out, "effort", []byte(effort.Raw))
	}
	if s := r.Get("summary"); s.Type == gjson.String {
		out, _ = sjson.SetRawBytes(out, "summary", []byte(s.Raw))
	}
	if len(out) == 2 {
		return nil, nil
	}
	return append([]byte(`"reasoning":`), out...), nil
}

// anthropicFields are the public API's request fields that the OpenAI
// dialect drops (openAIUnsupported, gatewayOnlyField) but Anthropic's
// Messages API defines: an Anthropic-style provider receives them
// (AnthropicExtra), as do the dialects that read them in the chat body
// (Bedrock's cache point for cache_control). Each with the JSON type it
// is passed with.
var anthropicFields = [...]struct {
	name string
	typ  gjson.Type
}{{"top_k", gjson.Number}, {"cache_control", gjson.JSON}}

// AnthropicExtra is the members of the request (f) that the Anthropic
// dialect adds to the translated Messages body, as JSON text without
// braces ("" for none): top_k, and the top-level cache_control of
// automatic caching.
func AnthropicExtra(f *reqbody.Fields) string {
	var b []byte
	for _, m := range anthropicFields {
		if v, ok := f.Get(m.name); ok && v.Type == m.typ && (m.typ != gjson.JSON || v.IsObject()) {
			if len(b) > 0 {
				b = append(b, ',')
			}
			b = append(b, `"`+m.name+`":`...)
			b = append(b, v.Raw...)
		}
	}
	return string(b)
}
