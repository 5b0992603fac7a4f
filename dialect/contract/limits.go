package contract

import (
	"regexp"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// Refusal is a request a provider style would refuse: the client's field
// and why, for the client's 400.
type Refusal struct {
	Field, Reason string
}

// Message is the refusal's error message, "field: reason".
func (r *Refusal) Message() string { return r.Field + ": " + r.Reason }

// The limits of each provider style that a request translated for it (or,
// for OpenAI's Responses API, passed to it) can break and that the
// gateway cannot express another way that keeps the request's meaning.
// Each is the provider's, as its schema (schemas/) states it, with the
// document it was checked against; the gateway checks them before
// routing: a provider whose limit the request breaks is left out, and a
// request no provider can take is the client's 400 naming its own field.
// The limits a translation can meet instead (Anthropic's and Bedrock's
// temperature range: sent as 1) are the translators' business.
var (
	// OpenAI's chat completions (and Azure OpenAI's): function names, as
	// FunctionObject's description in OpenAI's OpenAPI document states.
	openAIToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	// Anthropic's Messages API: custom tool names (Tool.name's pattern).
	anthropicToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	// Gemini: function declaration names (FunctionDeclaration.name).
	geminiToolName = regexp.MustCompile(`^[a-zA-Z0-9_.:-]{1,64}$`)
	// Bedrock Converse: tool specification names (ToolName: pattern
	// [a-zA-Z0-9_-]+, length 1 to 64).
	bedrockToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// styleLimits are one provider style's limits on the chat body.
type styleLimits struct {
	api       string // its API's name in reasons
	maxStops  int    // 0: no limit
	noEmpty   bool   // every stop sequence has a character
	maxTools  int    // 0: no limit
	toolName  *regexp.Regexp
	nameRule  string
	maxUserID int // 0: no limit
	// userFirst: the conversation (after the system messages) starts
	// with a user message.
	userFirst bool
}

var limitsByStyle = map[string]styleLimits{
	"openai": {api: "OpenAI-style chat completions", maxStops: 4, maxTools: 128,
		toolName: openAIToolName, nameRule: "1 to 64 characters of a-z, A-Z, 0-9, _ and -"},
	"azure": {api: "Azure OpenAI's chat completions", maxStops: 4, maxTools: 128,
		toolName: openAIToolName, nameRule: "1 to 64 characters of a-z, A-Z, 0-9, _ and -"},
	"anthropic": {api: "Anthropic's Messages API", toolName: anthropicToolName,
		nameRule: "1 to 128 characters of a-z, A-Z, 0-9, _ and -", maxUserID: 256},
	"gemini": {api: "Gemini's generateContent", maxStops: 5, toolName: geminiToolName,
		nameRule: "1 to 64 characters of a-z, A-Z, 0-9, _, ., : and -"},
	"bedrock": {api: "Bedrock's Converse API", noEmpty: true, userFirst: true, toolName: bedrockToolName,
		nameRule: "1 to 64 characters of a-z, A-Z, 0-9, _ and -"},
}

// CheckChat checks the chat completions body chat that a provider of
// style receives (translated from the client's request of route kind, or
// the client's own), against the style's limits; nil when none is
// broken. The field named is the client's: stop_sequences for a Messages
// request's stop, for instance.
func CheckChat(style string, kind dialect.Kind, chat []byte) *Refusal {
	l, ok := limitsByStyle[style]
	if !ok {
		return nil
	}
	f := gjson.GetManyBytes(chat, "stop", "tools", "user", "messages")
	stop, tools, user, msgs := f[0], f[1], f[2], f[3]
	if l.userFirst && msgs.IsArray() {
		var first string
		msgs.ForEach(func(_, m gjson.Result) bool {
			switch r := m.Get("role").Str; r {
			case "system", "developer":
				return true
			default:
				first = r
				return false
			}
		})
		if first != "" && first != "user" && first != "tool" {
			return &Refusal{"messages", "this model's provider (" + l.api + ") needs the conversation to start with a user message, after any system messages"}
		}
	}
	if stop.IsArray() || stop.Type == gjson.String {
		stops := stop.Array()
		if l.maxStops > 0 && len(stops) > l.maxStops {
			return &Refusal{stopField(kind), "at most " + strconv.Itoa(l.maxStops) + " stop sequences for this model's provider (" +
				l.api + "); " + strconv.Itoa(len(stops)) + " sent"}
		}
		if l.noEmpty {
			for _, s := range stops {
				if s.Str == "" {
					return &Refusal{stopField(kind), "an empty stop sequence is refused by this model's provider (" + l.api + ")"}
				}
			}
		}
	}
	if tools.IsArray() {
		n := 0
		var refusal *Refusal
		tools.ForEach(func(_, t gjson.Result) bool {
			if t.Get("type").Str != "function" {
				return true
			}
			n++
			if name := t.Get("function.name").Str; l.toolName != nil && !l.toolName.MatchString(name) {
				refusal = &Refusal{"tools", "tool name " + strconv.Quote(name) + ": this model's provider (" + l.api + ") takes " + l.nameRule}
				return false
			}
			return true
		})
		if refusal != nil {
			return refusal
		}
		if l.maxTools > 0 && n > l.maxTools {
			return &Refusal{"tools", "at most " + strconv.Itoa(l.maxTools) + " function tools for this model's provider (" + l.api + "); " +
				strconv.Itoa(n) + " sent"}
		}
	}
	if l.maxUserID > 0 && len(user.Str) > l.maxUserID {
		field := "user"
		if kind == dialect.Messages {
			field = "metadata.user_id"
		}
		return &Refusal{field, "at most " + strconv.Itoa(l.maxUserID) + " characters for this model's provider (" + l.api + ")"}
	}
	return nil
}

// maxEmbeddingInputs is the most inputs one request to OpenAI's
// embeddings API (and Azure OpenAI's) may carry.
const maxEmbeddingInputs = 2048

// CheckEmbeddings checks an embeddings request passed as it is to an
// OpenAI-style provider, whose API takes at most 2048 inputs, none empty
// (the public API sets no count).
func CheckEmbeddings(body []byte) *Refusal {
	in := gjson.GetBytes(body, "input")
	switch {
	case in.Type == gjson.String && in.Str == "":
		return &Refusal{"input", "an empty input is refused by this model's provider (OpenAI-style embeddings)"}
	case !in.IsArray():
		return nil
	}
	n := 0
	var refusal *Refusal
	in.ForEach(func(_, v gjson.Result) bool {
		n++
		if v.Type == gjson.String && v.Str == "" {
			refusal = &Refusal{"input", "an empty input is refused by this model's provider (OpenAI-style embeddings)"}
			return false
		}
		return true
	})
	if refusal == nil && n > maxEmbeddingInputs {
		refusal = &Refusal{"input", "at most " + strconv.Itoa(maxEmbeddingInputs) +
			" inputs for this model's provider (OpenAI-style embeddings); " + strconv.Itoa(n) + " sent"}
	}
	return refusal
}

// minResponsesOutput is the least max_output_tokens OpenAI's Responses
// API takes.
const minResponsesOutput = 16

// CheckResponses checks a Responses request passed as it is to an
// OpenAI-style provider, whose API takes a max_output_tokens of at least
// 16 (the gateway's own output limits are never lower).
func CheckResponses(body []byte) *Refusal {
	n := gjson.GetBytes(body, "max_output_tokens")
	if n.Type != gjson.Number || n.Int() >= minResponsesOutput {
		return nil
	}
	return &Refusal{"max_output_tokens", "at least " + strconv.Itoa(minResponsesOutput) +
		" for this model's provider (OpenAI-style Responses); " + n.Raw + " sent"}
}

// stopField is the client's name for chat's stop.
func stopField(kind dialect.Kind) string {
	if kind == dialect.Messages {
		return "stop_sequences"
	}
	return "stop"
}
