package gemini

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

// request is a GenerateContentRequest, as the gateway writes it: only
// members the API defines (it refuses any other).
type request struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []tool            `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             *string           `json:"text,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	// ThoughtSignature is the signature the model gave the part, sent
	// back on it unchanged.
	ThoughtSignature string `json:"thoughtSignature,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type functionCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type functionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type tool struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type generationConfig struct {
	MaxOutputTokens    int64           `json:"maxOutputTokens,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	TopK               *int64          `json:"topK,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	ThinkingBudget  *int64 `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
}

// fieldError is a 400 naming the chat request's field.
func fieldError(path, msg string) error { return fmt.Errorf("%s: %s", path, msg) }

// budgets are the thinking budgets of reasoning efforts, in tokens; max
// is Gemini's largest budget, as xhigh already is.
var budgets = map[string]int64{"none": 0, "minimal": 512, "low": 1024, "medium": 8192, "high": 24576, "xhigh": 32768, "max": 32768}

// levels are the thinking levels of reasoning efforts, for the models
// that take a level (Gemini 3): low and high, the two every one of them
// takes; they cannot stop thinking, so none is the lowest.
var levels = map[string]string{"none": "low", "minimal": "low", "low": "low", "medium": "high", "high": "high", "xhigh": "high", "max": "high"}

// thinkingOf is the thinking config of a reasoning effort: a level for a
// model that takes levels, else a budget; nil for an unknown effort.
func thinkingOf(effort string, level bool) *thinkingConfig {
	if level {
		if l, ok := levels[effort]; ok {
			return &thinkingConfig{ThinkingLevel: l, IncludeThoughts: true}
		}
		return nil
	}
	if b, ok := budgets[effort]; ok {
		return &thinkingConfig{ThinkingBudget: &b, IncludeThoughts: b > 0}
	}
	return nil
}

// fromChat translates a chat completions body into a GenerateContentRequest;
// level: the model takes a thinking level rather than a budget.
func fromChat(chat []byte, maxTokens int64, level bool) ([]byte, error) {
	out, err := buildRequest(chat, maxTokens, level)
	if err != nil {
		return nil, err
	}
	if b, ok := appendRequest(make([]byte, 0, len(chat)+256), out); ok {
		return b, nil
	}
	return json.Marshal(out) // for its error
}

// buildRequest is the GenerateContentRequest of a chat completions body.
func buildRequest(chat []byte, maxTokens int64, level bool) (*request, error) {
	req := gjson.Parse(rawjson.View(chat)) // fromChat copies what it keeps
	if !req.IsObject() {
		return nil, fieldError("body", "expected a JSON object")
	}
	var out request
	gc := &generationConfig{}
	var err error
	rawjson.ForEach(req, func(name string, v gjson.Result) bool {
		switch name {
		case "messages":
			out.SystemInstruction, out.Contents, err = contentsOf(v)
		case "tools":
			out.Tools, err = toolsOf(v)
		case "tool_choice":
			out.ToolConfig, err = toolChoiceOf(v)
		case "max_tokens", "max_completion_tokens":
			gc.MaxOutputTokens = max(gc.MaxOutputTokens, v.Int())
		case "temperature":
			f := v.Float()
			gc.Temperature = &f
		case "top_p":
			f := v.Float()
			gc.TopP = &f
		case "top_k":
			n := v.Int()
			gc.TopK = &n
		case "seed":
			n := v.Int()
			gc.Seed = &n
		case "presence_penalty":
			f := v.Float()
			gc.PresencePenalty = &f
		case "frequency_penalty":
			f := v.Float()
			gc.FrequencyPenalty = &f
		case "stop":
			if v.Type == gjson.String {
				gc.StopSequences = []string{v.Str}
			} else {
				for _, s := range v.Array() {
					gc.StopSequences = append(gc.StopSequences, s.Str)
				}
			}
		case "n":
			if v.Int() > 1 {
				err = fieldError("n", "Gemini providers answer one choice")
			}
		case "response_format":
			switch v.Get("type").Str {
			case "json_object":
				gc.ResponseMimeType = "application/json"
			case "json_schema":
				gc.ResponseMimeType = "application/json"
				if s := v.Get("json_schema.schema"); s.Exists() {
					gc.ResponseJSONSchema = json.RawMessage(s.Raw)
				}
			}
		case "reasoning_effort":
			if tc := thinkingOf(v.Str, level); tc != nil {
				gc.ThinkingConfig = tc
			}
		case "functions", "function_call":
			err = fieldError(name, "not served by Gemini providers; send tools")
		default:
			// Fields Gemini has no equivalent of (user, logprobs,
			// logit_bias, stream_options, ...) are dropped, as providers
			// that lack a parameter ignore it.
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if gc.MaxOutputTokens == 0 && maxTokens > 0 {
		gc.MaxOutputTokens = maxTokens
	}
	if !gc.empty() {
		out.GenerationConfig = gc
	}
	if len(out.Contents) == 0 {
		return nil, fieldError("messages", "needs a user or assistant message")
	}
	return &out, nil
}

// messageMembers are the members of a message contentsOf reads.
var messageMembers = []string{"role", "content", "tool_calls", "tool_call_id", "reasoning_details"}

// contentsOf translates the messages: system and developer messages
// become the system instruction; the others contents of role user or
// model (tool results are user parts, consecutive parts of one role
// merged).
func contentsOf(msgs gjson.Result) (*content, []content, error) {
	var system *content
	var contents []content
	names := map[string]string{} // tool call id -> function name
	add := func(role string, parts ...part) {
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			return
		}
		contents = append(contents, content{Role: role, Parts: parts})
	}
	for i, m := range rawjson.Array(msgs) {
		path := "messages[" + strconv.Itoa(i) + "]"
		var f [5]gjson.Result // one walk of the message for its members
		if m.IsObject() {
			rawjson.Lookup(m.Raw, messageMembers, f[:])
		}
		mrole, mcontent, mcalls, mid, mdetails := f[0], f[1], f[2], f[3], f[4]
		switch role := mrole.Str; role {
		case "system", "developer":
			parts, err := textParts(mcontent, path)
			if err != nil {
				return nil, nil, err
			}
			if system == nil {
				system = &content{}
			}
			system.Parts = append(system.Parts, parts...)
		case "user":
			parts, err := userParts(mcontent, path)
			if err != nil {
				return nil, nil, err
			}
			add("user", parts...)
		case "assistant":
			sigs, err := signaturesOf(mdetails, path)
			if err != nil {
				return nil, nil, err
			}
			var parts []part
			if c := mcontent; c.Exists() && c.Type != gjson.Null {
				p, err := textParts(c, path)
				if err != nil {
					return nil, nil, err
				}
				parts = p
			}
			for j, call := range mcalls.Array() {
				args := call.Get("function.arguments").Str
				if args == "" {
					args = "{}"
				}
				if !gjson.Valid(args) || !gjson.Parse(args).IsObject() {
					return nil, nil, fieldError(fmt.Sprintf("%s.tool_calls[%d].function.arguments", path, j), "expected a JSON object")
				}
				name := call.Get("function.name").Str
				names[call.Get("id").Str] = name
				parts = append(parts, part{FunctionCall: &functionCall{Name: name, Args: json.RawMessage(args)}, ThoughtSignature: sigs.byCall[call.Get("id").Str]})
			}
			sigs.sign(parts)
			if len(parts) > 0 {
				add("model", parts...)
			}
		case "tool":
			id := mid.Str
			name, ok := names[id]
			if !ok {
				return nil, nil, fieldError(path+".tool_call_id", fmt.Sprintf("no assistant tool call %q before it", id))
			}
			result := mcontent
			text := result.Str
			if result.IsArray() {
				var b strings.Builder
				for _, p := range result.Array() {
					b.WriteString(p.Get("text").Str)
				}
				text = b.String()
			}
			// The response is an object: the tool's JSON object as it is,
			// any other result under "content".
			resp := `{"content":` + string(jsonstr.Quote(text)) + `}`
			if gjson.Valid(text) && gjson.Parse(text).IsObject() {
				resp = text
			}
			add("user", part{FunctionResponse: &functionResponse{Name: name, Response: json.RawMessage(resp)}})
		default:
			return nil, nil, fieldError(path+".role", fmt.Sprintf("unsupported role %q", role))
		}
	}
	return system, contents, nil
}

// signatures are the thought signatures of an assistant message, from
// its reasoning_details as an answer gave them (reasoning.encrypted
// entries of Gemini's format): by the id of the tool call whose part
// carried one, and the one of a part that is no call.
type signatures struct {
	byCall map[string]string
	loose  string
}

// signaturesOf reads an assistant message's thought signatures; an entry
// of a wrong shape is the 400 naming it.
func signaturesOf(details gjson.Result, path string) (signatures, error) {
	var s signatures
	if !details.Exists() {
		return s, nil
	}
	ds, bad := chatform.ReadReasoningDetails(details)
	if bad != nil {
		return s, fieldError(path+".reasoning_details"+bad.Field, bad.Problem)
	}
	for _, d := range ds {
		if d.Type != chatform.ReasoningEncrypted || d.Format != chatform.FormatGemini {
			continue
		}
		if d.ID == "" {
			s.loose = d.Data
			continue
		}
		if s.byCall == nil {
			s.byCall = map[string]string{}
		}
		s.byCall[d.ID] = d.Data
	}
	return s, nil
}

// sign puts the loose signature on the message's last text part, where
// Gemini gave it, or on its first part.
func (s signatures) sign(parts []part) {
	if s.loose == "" || len(parts) == 0 {
		return
	}
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i].Text != nil && parts[i].FunctionCall == nil {
			parts[i].ThoughtSignature = s.loose
			return
		}
	}
	if parts[0].ThoughtSignature == "" {
		parts[0].ThoughtSignature = s.loose
	}
}

// textParts are a string content's or text parts' text.
func textParts(c gjson.Result, path string) ([]part, error) {
	if c.Type == gjson.String {
		s := c.Str
		return []part{{Text: &s}}, nil
	}
	var parts []part
	for j, p := range c.Array() {
		if p.Get("type").Str != "text" {
			return nil, fieldError(fmt.Sprintf("%s.content[%d].type", path, j), "only text parts here")
		}
		s := p.Get("text").Str
		parts = append(parts, part{Text: &s})
	}
	return parts, nil
}

// userParts are a user message's text and images (base64 data: URLs).
func userParts(c gjson.Result, path string) ([]part, error) {
	if c.Type == gjson.String {
		return textParts(c, path)
	}
	var parts []part
	for j, p := range c.Array() {
		at := fmt.Sprintf("%s.content[%d]", path, j)
		switch p.Get("type").Str {
		case "text":
			s := p.Get("text").Str
			parts = append(parts, part{Text: &s})
		case "image_url":
			b, err := dataURL(p.Get("image_url.url").Str, at+".image_url.url")
			if err != nil {
				return nil, err
			}
			parts = append(parts, part{InlineData: b})
		case "file":
			b, err := dataURL(p.Get("file.file_data").Str, at+".file.file_data")
			if err != nil {
				return nil, err
			}
			parts = append(parts, part{InlineData: b})
		default:
			return nil, fieldError(at+".type", fmt.Sprintf("unsupported part %q for Gemini providers", p.Get("type").Str))
		}
	}
	return parts, nil
}

// dataURL is a base64 data: URL's blob; Gemini reads no http URLs inline.
func dataURL(u, path string) (*blob, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	mime, data, ok2 := strings.Cut(rest, ";base64,")
	if !ok || !ok2 || mime == "" {
		return nil, fieldError(path, "Gemini providers take base64 data: URLs only")
	}
	return &blob{MimeType: mime, Data: data}, nil
}

// toolsOf translates function tools into function declarations.
func toolsOf(tools gjson.Result) ([]tool, error) {
	var decls []functionDeclaration
	for i, t := range tools.Array() {
		if t.Get("type").Str != "function" {
			return nil, fieldError(fmt.Sprintf("tools[%d].type", i), "Gemini providers take function tools only")
		}
		f := t.Get("function")
		d := functionDeclaration{Name: f.Get("name").Str, Description: f.Get("description").Str}
		if p := f.Get("parameters"); p.Exists() {
			d.ParametersJSONSchema = json.RawMessage(p.Raw)
		}
		decls = append(decls, d)
	}
	if len(decls) == 0 {
		return nil, nil
	}
	return []tool{{FunctionDeclarations: decls}}, nil
}

// toolChoiceOf translates tool_choice into the function calling mode.
func toolChoiceOf(c gjson.Result) (*toolConfig, error) {
	switch {
	case c.Str == "auto":
		return &toolConfig{functionCallingConfig{Mode: "AUTO"}}, nil
	case c.Str == "none":
		return &toolConfig{functionCallingConfig{Mode: "NONE"}}, nil
	case c.Str == "required":
		return &toolConfig{functionCallingConfig{Mode: "ANY"}}, nil
	case c.Get("type").Str == "function":
		return &toolConfig{functionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{c.Get("function.name").Str}}}, nil
	}
	return nil, fieldError("tool_choice", "expected auto, none, required or a function")
}
