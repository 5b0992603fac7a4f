package responsecache

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// volatile are the top-level members that do not change the answer:
// who asks, how it is delivered, what the provider keeps of it.
var volatile = []string{"user", "stream", "stream_options", "metadata", "session_id", "safety_identifier", "prompt_cache_key", "store", "plugins"}

// defaults are members whose value here is the API's default: a request
// that sends one is the request that leaves it out.
var defaults = map[string]string{
	"n": "1", "presence_penalty": "0", "frequency_penalty": "0", "top_p": "1",
	"logprobs": "false", "parallel_tool_calls": "true",
}

// Canonical is the hash of the request body of an API of kind as the
// cache keys it: its members in a fixed order (objects' members sorted,
// at every depth), the volatile members left out and the defaults with
// them, and whether it is streamed. false: not a JSON object.
func Canonical(kind dialect.Kind, body []byte) ([32]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return [32]byte{}, false
	}
	stream, _ := doc["stream"].(bool)
	for _, k := range volatile {
		delete(doc, k)
	}
	for k, def := range defaults {
		if v, ok := doc[k]; ok && scalar(v) == def {
			delete(doc, k)
		}
	}
	canon, err := json.Marshal(doc) // maps' members sorted
	if err != nil {
		return [32]byte{}, false
	}
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0, flag(stream)})
	h.Write(canon)
	var out [32]byte
	h.Sum(out[:0])
	return out, true
}

// scalar is v's JSON text when it is a number or a boolean; "" else.
func scalar(v any) string {
	switch v := v.(type) {
	case json.Number:
		return v.String()
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return ""
}
