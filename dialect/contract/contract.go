// Package contract is what each provider style's API accepts, written
// down by the gateway: a small JSON Schema per provider API (schemas/,
// each naming the public document and version its rules were checked
// against) that every request body the gateway builds for that API must
// satisfy, and the limits the gateway itself enforces before routing
// (CheckChat), so that a request a provider would refuse is answered by the
// gateway, naming the client's field, instead of by the provider.
//
// The schemas describe only what a translation can break (counts,
// lengths, ranges, enums, required and mutually exclusive members), not
// every member of every API: a member they do not name is accepted.
package contract

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/tidwall/gjson"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

//go:embed schemas/*.json
var schemaFS embed.FS

// The provider APIs with a schema, by the schema's file name.
const (
	OpenAIChat       = "openai_chat"
	OpenAIResponses  = "openai_responses"
	OpenAIEmbeddings = "openai_embeddings"
	AnthropicMessage = "anthropic_messages"
	GeminiGenerate   = "gemini_generate"
	BedrockConverse  = "bedrock_converse"
)

// APIs are the provider APIs with a schema.
var APIs = []string{OpenAIChat, OpenAIResponses, OpenAIEmbeddings, AnthropicMessage, GeminiGenerate, BedrockConverse}

// APIOf is the provider API a request to path (the provider's URL path,
// any base path and query aside) is for, "" when none has a schema. Azure
// OpenAI's deployment and v1 paths end as OpenAI's do.
func APIOf(path string) string {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimSuffix(path, "/")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return OpenAIChat
	case strings.HasSuffix(path, "/responses"):
		return OpenAIResponses
	case strings.HasSuffix(path, "/embeddings"):
		return OpenAIEmbeddings
	case strings.HasSuffix(path, "/messages"):
		return AnthropicMessage
	case strings.HasSuffix(path, ":generateContent"), strings.HasSuffix(path, ":streamGenerateContent"):
		return GeminiGenerate
	case strings.HasSuffix(path, "/converse"), strings.HasSuffix(path, "/converse-stream"):
		return BedrockConverse
	}
	return ""
}

var compiled = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	out := make(map[string]*jsonschema.Schema, len(APIs))
	for _, api := range APIs {
		raw, err := schemaFS.ReadFile("schemas/" + api + ".json")
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", api, err)
		}
		loc := "urn:tollgate:contract:" + api
		if err := c.AddResource(loc, doc); err != nil {
			return nil, err
		}
		if out[api], err = c.Compile(loc); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// Validate checks a request body for the provider API api: nil when the
// provider would accept it as far as the schema says, else an error
// naming the first member it refuses (a JSON pointer) and why.
func Validate(api string, body []byte) error {
	schemas, err := compiled()
	if err != nil {
		return err
	}
	s, ok := schemas[api]
	if !ok {
		return fmt.Errorf("contract: no schema for %q", api)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("contract: the body is not JSON: %w", err)
	}
	err = s.Validate(doc)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		ve = deepest(ve)
		return fmt.Errorf("%s refuses /%s: %s", api, strings.Join(ve.InstanceLocation, "/"), ve.ErrorKind.LocalizedString(printer))
	}
	if err != nil {
		return err
	}
	return crossCheck(api, body)
}

// crossCheck checks the rules between members that a JSON Schema cannot
// state: Anthropic's thinking budget below max_tokens, and Bedrock's
// roles alternating from one message to the next.
func crossCheck(api string, body []byte) error {
	switch api {
	case AnthropicMessage:
		f := gjson.GetManyBytes(body, "thinking.type", "thinking.budget_tokens", "max_tokens")
		if f[0].Str == "enabled" && f[1].Int() >= f[2].Int() {
			return fmt.Errorf("%s refuses /thinking/budget_tokens: %d is not below max_tokens (%d)", api, f[1].Int(), f[2].Int())
		}
	case BedrockConverse:
		prev := ""
		for i, m := range gjson.GetBytes(body, "messages").Array() {
			role := m.Get("role").Str
			if role == prev {
				return fmt.Errorf("%s refuses /messages/%d/role: two %s messages in a row (roles alternate)", api, i, role)
			}
			prev = role
		}
	}
	return nil
}

// deepest is the leaf cause of a validation error that says most: the
// one deepest in the document, and among those one other than a type
// mismatch (of an anyOf's alternatives, the one the value has the type
// of).
func deepest(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return ve
	}
	var best *jsonschema.ValidationError
	for _, c := range ve.Causes {
		leaf := deepest(c)
		if best == nil || len(leaf.InstanceLocation) > len(best.InstanceLocation) ||
			len(leaf.InstanceLocation) == len(best.InstanceLocation) && isTypeError(best) && !isTypeError(leaf) {
			best = leaf
		}
	}
	return best
}

func isTypeError(ve *jsonschema.ValidationError) bool {
	_, ok := ve.ErrorKind.(*kind.Type)
	return ok
}
