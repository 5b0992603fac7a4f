package mockprovider

import (
	"net/http"

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
func checkStrict(w http.ResponseWriter, body []byte, api string) bool {
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
