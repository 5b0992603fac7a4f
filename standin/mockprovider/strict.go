package mockprovider

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Strict mode (Handler.Strict) validates requests the way OpenAI's API
// does, so that a gateway's tests see what a real provider would refuse:
// a parameter the API does not define is a 400, a stream reports usage only
// when stream_options.include_usage asks for it, and answers carry the
// provider's own ids and a dated model name.

// chatParams are the request parameters of OpenAI's Chat Completions API.
var chatParams = paramSet(
	"audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
	"max_completion_tokens", "max_tokens", "messages", "metadata", "modalities", "model", "n",
	"parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key",
	"prompt_cache_retention", "reasoning_effort", "response_format", "safety_identifier", "seed",
	"service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice",
	"tools", "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
)

// responsesParams are the request parameters of OpenAI's Responses API.
var responsesParams = paramSet(
	"background", "conversation", "include", "input", "instructions", "max_output_tokens",
	"max_tool_calls", "metadata", "model", "parallel_tool_calls", "previous_response_id", "prompt",
	"prompt_cache_key", "prompt_cache_retention", "reasoning", "safety_identifier", "service_tier",
	"store", "stream", "stream_options", "temperature", "text", "tool_choice", "tools",
	"top_logprobs", "top_p", "truncation", "user",
)

// chatMessageKeys, chatPartKeys and chatToolKeys are the members OpenAI's
// Chat Completions API defines for a message, a content part (by type)
// and a function tool: it refuses any other, such as Anthropic's
// cache_control on a part or a tool's input_schema.
var (
	chatMessageKeys = paramSet("role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio", "function_call")
	chatPartKeys    = map[string]map[string]bool{
		"text": paramSet("type", "text"), "image_url": paramSet("type", "image_url"),
		"input_audio": paramSet("type", "input_audio"), "file": paramSet("type", "file"),
		"refusal": paramSet("type", "refusal"),
	}
	chatToolKeys     = paramSet("type", "function")
	chatFunctionKeys = paramSet("name", "description", "parameters", "strict")
)

// vendorParams are accepted on top of OpenAI's: the X vendor's live search,
// which the mock also stands in for.
var vendorParams = paramSet("search_parameters")

func paramSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// strictDated is the date suffix of the model name a strict mock answers
// with, as OpenAI answers gpt-4o-mini with gpt-4o-mini-2024-07-18.
const strictDated = "-2024-07-18"

// checkStrict refuses what OpenAI refuses in a request of api ("chat" or
// "responses"): an unknown top-level parameter, and stream_options on a
// request that does not stream. It writes the refusal and reports whether
// the request may go on.
//
// It also refuses the headers of Anthropic's API (anthropic-version,
// anthropic-beta, ...): OpenAI ignores them, but a gateway must never
// send them to an OpenAI-style provider, and the refusal makes a test
// see it did. On chat completions, messages, content parts and tools are
// checked member by member (chatMessageKeys, ...).
func checkStrict(w http.ResponseWriter, h http.Header, body []byte, api string) bool {
	for name := range h {
		if strings.HasPrefix(strings.ToLower(name), "anthropic-") {
			writeOpenAIError(w, http.StatusBadRequest, "Unexpected header for this API: "+name, "", "")
			return false
		}
	}
	known := chatParams
	if api == "responses" {
		known = responsesParams
	}
	var unknown string
	gjson.ParseBytes(body).ForEach(func(k, _ gjson.Result) bool {
		if !known[k.Str] && !vendorParams[k.Str] {
			unknown = k.Str
			return false
		}
		return true
	})
	if unknown != "" {
		if api == "responses" {
			writeOpenAIError(w, http.StatusBadRequest, "Unknown parameter: '"+unknown+"'.", unknown, "unknown_parameter")
		} else {
			writeOpenAIError(w, http.StatusBadRequest, "Unrecognized request argument supplied: "+unknown, "", "")
		}
		return false
	}
	if api == "chat" && gjson.GetBytes(body, "stream_options").Exists() && !gjson.GetBytes(body, "stream").Bool() {
		writeOpenAIError(w, http.StatusBadRequest,
			"The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", "invalid_value")
		return false
	}
	if api == "chat" {
		if msg := strictChatShape(body); msg != "" {
			writeOpenAIError(w, http.StatusBadRequest, msg, "", "")
			return false
		}
	}
	return true
}

// checkReasoning refuses reasoning_effort on a chat completions request
// for one of NonReasoningModels, as OpenAI refuses it for a model that
// does not reason, and reports whether the request may go on.
func (m *Handler) checkReasoning(w http.ResponseWriter, body []byte, model, api string) bool {
	if api != "chat" || len(m.NonReasoningModels) == 0 || !gjson.GetBytes(body, "reasoning_effort").Exists() {
		return true
	}
	for _, prefix := range m.NonReasoningModels {
		if strings.HasPrefix(model, prefix) {
			writeOpenAIError(w, http.StatusBadRequest,
				"Unsupported parameter: 'reasoning_effort' is not supported with this model.", "reasoning_effort", "unsupported_parameter")
			return false
		}
	}
	return true
}

// strictError is OpenAI's error body with its param, null when unset.
type strictError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeOpenAIError(w http.ResponseWriter, status int, msg, param, code string) {
	var e strictError
	e.Error.Message, e.Error.Type = msg, "invalid_request_error"
	if param != "" {
		e.Error.Param = &param
	}
	if code != "" {
		e.Error.Code = &code
	}
	writeJSON(w, status, e)
}

// readsFiles reports whether the requested model takes file parts (PDFs),
// as OpenAI's text-only models do not: in the mock, a model whose name
// holds "files".
func readsFiles(body []byte) bool {
	return strings.Contains(gjson.GetBytes(body, "model").Str, "files")
}

// strictChatShape is OpenAI's refusal of a member its chat schema does not
// define in a message, a content part or a tool ("" for none).
func strictChatShape(body []byte) string {
	extra := func(path string, v gjson.Result, known map[string]bool) string {
		bad := ""
		v.ForEach(func(k, _ gjson.Result) bool {
			if !known[k.Str] {
				bad = k.Str
			}
			return bad == ""
		})
		if bad == "" {
			return ""
		}
		return "Additional properties are not allowed ('" + bad + "' was unexpected) - '" + path + "'"
	}
	for i, m := range gjson.GetBytes(body, "messages").Array() {
		path := "messages." + strconv.Itoa(i)
		if msg := extra(path, m, chatMessageKeys); msg != "" {
			return msg
		}
		content := m.Get("content")
		if !content.IsArray() {
			continue
		}
		for j, p := range content.Array() {
			known, ok := chatPartKeys[p.Get("type").Str]
			if !ok {
				return "Invalid value: '" + p.Get("type").Str + "'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal' and 'file'. - '" + path + ".content." + strconv.Itoa(j) + ".type'"
			}
			if msg := extra(path+".content."+strconv.Itoa(j), p, known); msg != "" {
				return msg
			}
			if p.Get("type").Str == "file" && !readsFiles(body) {
				return "Invalid content type. file is only supported for models that accept file input. - '" + path + ".content." + strconv.Itoa(j) + ".type'"
			}
		}
	}
	for i, t := range gjson.GetBytes(body, "tools").Array() {
		if t.Get("type").Str != "function" {
			continue // vendors' own tools, such as their web search
		}
		path := "tools." + strconv.Itoa(i)
		if msg := extra(path, t, chatToolKeys); msg != "" {
			return msg
		}
		if msg := extra(path+".function", t.Get("function"), chatFunctionKeys); msg != "" {
			return msg
		}
	}
	return ""
}
