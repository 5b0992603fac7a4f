package dialect

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

// AppendEmbedding appends one item of the public embeddings answer's data
// list, for an Embedder's answer reader: vector (a JSON array of numbers)
// at index, as the numbers or, when b64, as base64 of their little-endian
// float32s (OpenAI's base64 form). It fails on a vector that is not valid
// JSON.
func AppendEmbedding(b []byte, index int, vector gjson.Result, b64 bool) ([]byte, error) {
	b = append(b, `{"object":"embedding","index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"embedding":`...)
	if b64 {
		values := vector.Array()
		raw := make([]byte, 0, 4*len(values))
		for _, v := range values {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(float32(v.Float())))
		}
		b = jsonstr.Append(b, base64.StdEncoding.EncodeToString(raw))
	} else {
		var err error
		if b, err = rawjson.AppendRaw(b, vector.Raw); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// AppendEmbeddingsEnd closes the data list AppendEmbedding filled and
// ends the answer with its model and usage (prompt tokens, which are all
// its tokens).
func AppendEmbeddingsEnd(b []byte, model string, promptTokens int64) []byte {
	b = append(b, `],"model":`...)
	b = jsonstr.Append(b, model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, promptTokens, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, promptTokens, 10)
	return append(b, "}}"...)
}
