package gemini

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

// The request written by hand (the answer is chatform's), byte for byte as encoding/json
// writes it (TestRequestEncoderIsEncodingJSONs checks), without its reflection: a 4 KB
// translation spent most of its time there. ok is false when
// encoding/json would fail on a float that is not finite; the caller then
// falls back to it for its error. Raw members come from a validated body
// (or were validated), so they are copied, compacted, not validated again.

// encoder appends JSON to b, remembering whether it all went well.
type encoder struct {
	b  []byte
	ok bool
}

func (e *encoder) raw(s string) { e.b = append(e.b, s...) }
func (e *encoder) str(s string) { e.b = jsonstr.Append(e.b, s) }
func (e *encoder) int(n int64)  { e.b = strconv.AppendInt(e.b, n, 10) }
func (e *encoder) rawJSON(s []byte) {
	var err error
	if e.b, err = rawjson.AppendRaw(e.b, string(s)); err != nil {
		e.ok = false
	}
}
func (e *encoder) float(f float64) {
	var ok bool
	if e.b, ok = rawjson.AppendFloat(e.b, f); !ok {
		e.ok = false
	}
}

// appendRequest appends r as encoding/json writes it.
func appendRequest(b []byte, r *request) ([]byte, bool) {
	e := encoder{b: b, ok: true}
	e.raw(`{"contents":`)
	if r.Contents == nil {
		e.raw("null")
	} else {
		e.raw("[")
		for i := range r.Contents {
			if i > 0 {
				e.raw(",")
			}
			e.content(&r.Contents[i])
		}
		e.raw("]")
	}
	if r.SystemInstruction != nil {
		e.raw(`,"systemInstruction":`)
		e.content(r.SystemInstruction)
	}
	if len(r.Tools) > 0 {
		e.raw(`,"tools":[`)
		for i, t := range r.Tools {
			if i > 0 {
				e.raw(",")
			}
			e.raw(`{"functionDeclarations":`)
			if t.FunctionDeclarations == nil {
				e.raw("null")
			} else {
				e.raw("[")
				for j, d := range t.FunctionDeclarations {
					if j > 0 {
						e.raw(",")
					}
					e.raw(`{"name":`)
					e.str(d.Name)
					if d.Description != "" {
						e.raw(`,"description":`)
						e.str(d.Description)
					}
					if len(d.ParametersJSONSchema) > 0 {
						e.raw(`,"parametersJsonSchema":`)
						e.rawJSON(d.ParametersJSONSchema)
					}
					e.raw("}")
				}
				e.raw("]")
			}
			e.raw("}")
		}
		e.raw("]")
	}
	if c := r.ToolConfig; c != nil {
		e.raw(`,"toolConfig":{"functionCallingConfig":{"mode":`)
		e.str(c.FunctionCallingConfig.Mode)
		if names := c.FunctionCallingConfig.AllowedFunctionNames; len(names) > 0 {
			e.raw(`,"allowedFunctionNames":`)
			e.strs(names)
		}
		e.raw("}}")
	}
	if g := r.GenerationConfig; g != nil {
		e.raw(`,"generationConfig":`)
		e.generationConfig(g)
	}
	e.raw("}")
	return e.b, e.ok
}

func (e *encoder) strs(ss []string) {
	e.raw("[")
	for i, s := range ss {
		if i > 0 {
			e.raw(",")
		}
		e.str(s)
	}
	e.raw("]")
}

func (e *encoder) content(c *content) {
	e.raw("{")
	if c.Role != "" {
		e.raw(`"role":`)
		e.str(c.Role)
		e.raw(",")
	}
	e.raw(`"parts":`)
	if c.Parts == nil {
		e.raw("null}")
		return
	}
	e.raw("[")
	for i := range c.Parts {
		if i > 0 {
			e.raw(",")
		}
		e.part(&c.Parts[i])
	}
	e.raw("]}")
}

func (e *encoder) part(p *part) {
	sep := "{"
	member := func(name string) {
		e.raw(sep)
		e.raw(name)
		sep = ","
	}
	if p.Text != nil {
		member(`"text":`)
		e.str(*p.Text)
	}
	if d := p.InlineData; d != nil {
		member(`"inlineData":{"mimeType":`)
		e.str(d.MimeType)
		e.raw(`,"data":`)
		e.str(d.Data)
		e.raw("}")
	}
	if c := p.FunctionCall; c != nil {
		member(`"functionCall":{"name":`)
		e.str(c.Name)
		e.raw(`,"args":`)
		e.rawOrNull(c.Args)
		e.raw("}")
	}
	if r := p.FunctionResponse; r != nil {
		member(`"functionResponse":{"name":`)
		e.str(r.Name)
		e.raw(`,"response":`)
		e.rawOrNull(r.Response)
		e.raw("}")
	}
	if p.ThoughtSignature != "" {
		member(`"thoughtSignature":`)
		e.str(p.ThoughtSignature)
	}
	if sep == "{" {
		e.raw("{")
	}
	e.raw("}")
}

// rawOrNull is a json.RawMessage member without omitempty: null when
// empty.
func (e *encoder) rawOrNull(s []byte) {
	if len(s) == 0 {
		e.raw("null")
		return
	}
	e.rawJSON(s)
}

func (e *encoder) generationConfig(g *generationConfig) {
	sep := "{"
	member := func(name string) {
		e.raw(sep)
		e.raw(name)
		sep = ","
	}
	if g.MaxOutputTokens != 0 {
		member(`"maxOutputTokens":`)
		e.int(g.MaxOutputTokens)
	}
	if g.Temperature != nil {
		member(`"temperature":`)
		e.float(*g.Temperature)
	}
	if g.TopP != nil {
		member(`"topP":`)
		e.float(*g.TopP)
	}
	if g.TopK != nil {
		member(`"topK":`)
		e.int(*g.TopK)
	}
	if len(g.StopSequences) > 0 {
		member(`"stopSequences":`)
		e.strs(g.StopSequences)
	}
	if g.Seed != nil {
		member(`"seed":`)
		e.int(*g.Seed)
	}
	if g.PresencePenalty != nil {
		member(`"presencePenalty":`)
		e.float(*g.PresencePenalty)
	}
	if g.FrequencyPenalty != nil {
		member(`"frequencyPenalty":`)
		e.float(*g.FrequencyPenalty)
	}
	if g.ResponseMimeType != "" {
		member(`"responseMimeType":`)
		e.str(g.ResponseMimeType)
	}
	if len(g.ResponseJSONSchema) > 0 {
		member(`"responseJsonSchema":`)
		e.rawJSON(g.ResponseJSONSchema)
	}
	if t := g.ThinkingConfig; t != nil {
		member(`"thinkingConfig":`)
		tsep := "{"
		if t.ThinkingBudget != nil {
			e.raw(`{"thinkingBudget":`)
			e.int(*t.ThinkingBudget)
			tsep = ","
		}
		if t.ThinkingLevel != "" {
			e.raw(tsep)
			e.raw(`"thinkingLevel":`)
			e.str(t.ThinkingLevel)
			tsep = ","
		}
		if t.IncludeThoughts {
			e.raw(tsep)
			e.raw(`"includeThoughts":true`)
			tsep = ","
		}
		if tsep == "{" {
			e.raw("{")
		}
		e.raw("}")
	}
	if sep == "{" {
		e.raw("{")
	}
	e.raw("}")
}

// empty reports whether g has no member encoding/json would write.
func (g *generationConfig) empty() bool {
	return g.MaxOutputTokens == 0 && g.Temperature == nil && g.TopP == nil && g.TopK == nil &&
		len(g.StopSequences) == 0 && g.Seed == nil && g.PresencePenalty == nil && g.FrequencyPenalty == nil &&
		g.ResponseMimeType == "" && len(g.ResponseJSONSchema) == 0 && g.ThinkingConfig == nil
}
