package healjson

import (
	"bytes"
	"errors"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled JSON Schema (draft 2020-12 unless it names
// another with $schema) that answers are checked against.
type Schema struct{ s *jsonschema.Schema }

// errNoLoading refuses every $ref outside the schema: a client's schema
// must not make the gateway read files or fetch URLs.
var errNoLoading = errors.New("only references inside the schema are followed")

type noLoader struct{}

func (noLoader) Load(string) (any, error) { return nil, errNoLoading }

// schemaCache keeps compiled schemas by their text: clients send the same
// schema with every request of a kind, and compiling costs far more than
// checking. Bounded: cleared when full.
var schemaCache = struct {
	sync.Mutex
	m map[string]*Schema
}{m: map[string]*Schema{}}

const (
	maxCachedSchemas   = 256
	maxCachedSchemaLen = 64 << 10 // larger ones are compiled every time
)

// Compile compiles the schema text raw (a JSON object or boolean).
func Compile(raw []byte) (*Schema, error) {
	key := string(raw)
	schemaCache.Lock()
	s, ok := schemaCache.m[key]
	schemaCache.Unlock()
	if ok {
		return s, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const loc = "urn:tollgate:response-schema"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, err
	}
	s = &Schema{compiled}
	if len(raw) > maxCachedSchemaLen {
		return s, nil
	}
	schemaCache.Lock()
	if len(schemaCache.m) >= maxCachedSchemas {
		clear(schemaCache.m)
	}
	schemaCache.m[key] = s
	schemaCache.Unlock()
	return s, nil
}

// Check reports whether the JSON text doc (valid JSON) satisfies the
// schema; where, when not, is the JSON pointer of the first value that
// does not.
func (s *Schema) Check(doc []byte) (ok bool, where string) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return false, ""
	}
	err = s.s.Validate(v)
	if err == nil {
		return true, ""
	}
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		for len(ve.Causes) > 0 {
			ve = ve.Causes[0]
		}
		var b strings.Builder
		for _, tok := range ve.InstanceLocation {
			b.WriteByte('/')
			b.WriteString(pointerEscaper.Replace(tok))
		}
		if b.Len() == 0 {
			return false, "/"
		}
		return false, b.String()
	}
	return false, ""
}

// pointerEscaper escapes a JSON pointer's reference token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
