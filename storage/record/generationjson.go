package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// MarshalJSON encodes a generation record without reflection: one is
// written per request inside the group commit, where encoding/json was the
// largest cost. The output is what encoding/json would produce for the
// struct tags (checked by TestGenerationJSONMatchesEncodingJSON).
func (g Generation) MarshalJSON() ([]byte, error) {
	// Sized for the member names, numbers and time, plus the strings
	// (escapes aside), so that the record is built in one allocation.
	return g.AppendJSON(make([]byte, 0, 384+len(g.ID)+len(g.AccountID)+len(g.KeyHash)+len(g.WorkspaceID)+len(g.Model)+
		len(g.Provider)+len(g.UpstreamModel)+len(g.UpstreamID)+len(g.Status)+len(g.FinishReason)+len(g.User)))
}

// fastGenerationSums reads what Generation.AppendJSON writes, member by
// member in its order, in the forms codec.Parser reads (no escapes or
// non-ASCII bytes in a string), keeping what the rollup needs: about four
// times faster than gjson's validation and walk, for the generations a
// start reads. False at the first byte it does not expect: the caller
// then decodes the record with gjson.
func fastGenerationSums(v []byte, g *Generation) bool {
	p := codec.NewParser(v)
	return readGenerationSums(&p, g) && p.Done()
}

// DecodeGenerationSums decodes what the rollup needs of a stored generation
// record in one pass, several times faster than encoding/json over the
// whole record: the rollup is rebuilt from every record at startup.
func DecodeGenerationSums(v []byte, g *Generation) error {
	if fastGenerationSums(v, g) {
		return nil
	}
	*g = Generation{}
	return decodeGenerationSumsGJSON(v, g)
}

// decodeGenerationSumsGJSON decodes any JSON form of a generation.
func decodeGenerationSumsGJSON(v []byte, g *Generation) error {
	if !gjson.ValidBytes(v) {
		return errors.New("invalid JSON")
	}
	var err error
	gjson.ParseBytes(v).ForEach(func(k, x gjson.Result) bool {
		switch k.Str {
		case "account_id":
			g.AccountID = x.Str
		case "key_hash":
			g.KeyHash = x.Str
		case "workspace_id":
			g.WorkspaceID = x.Str
		case "model":
			g.Model = x.Str
		case "provider":
			g.Provider = x.Str
		case "prompt_tokens":
			g.PromptTokens = x.Int()
		case "completion_tokens":
			g.CompletionTokens = x.Int()
		case "cost":
			if g.Cost, err = money.ParseAmount(x.Raw); err != nil {
				err = fmt.Errorf("cost: %w", err)
			}
		case "byok":
			g.BYOK = x.Bool()
		case "credits":
			if g.Credits, err = money.ParseAmount(x.Raw); err != nil {
				err = fmt.Errorf("credits: %w", err)
			}
		case "status":
			g.Status = x.Str
		case "latency_ms":
			g.LatencyMS = x.Int()
		case "user":
			g.User = x.Str
		case "created_at":
			if g.CreatedAt, err = time.Parse(time.RFC3339Nano, x.Str); err != nil {
				err = fmt.Errorf("created_at: %w", err)
			}
		case "content_flags":
			// Rare: decoded whole.
			x.ForEach(func(_, f gjson.Result) bool {
				g.ContentFlags = append(g.ContentFlags, ContentFlag{GuardrailID: f.Get("guardrail_id").Str,
					Label: f.Get("label").Str, Builtin: f.Get("builtin").Str})
				return true
			})
		}
		return err == nil
	})
	return err
}
