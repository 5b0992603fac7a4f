package answer

import (
	"bytes"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/jsonpeek"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Identity is what a chat completion answer, and each of its chunks,
// says about itself: the generation id (so that feedback and GET
// /generation find it by the answer's id), the catalog model that served
// (the fallback's when a fallback served) and the provider. The provider's
// own id and dated model name stay in the generation record.
type Identity struct {
	id, model, provider []byte // JSON strings
}

// SetIn quotes the three values into buf's space when they fit it (the
// meter writer's own array), else into one allocation.
func (a *Identity) SetIn(buf []byte, genID string, route *upstream.Route) {
	// Sized for the quotes; a value that needs escaping grows it once.
	b := buf[:0]
	if n := len(genID) + len(route.Model.ID) + len(route.Provider.Name) + 6; cap(b) < n {
		b = make([]byte, 0, n)
	}
	b = jsonstr.Append(b, genID)
	id := len(b)
	b = jsonstr.Append(b, route.Model.ID)
	model := len(b)
	b = jsonstr.Append(b, route.Provider.Name)
	a.id, a.model, a.provider = b[:id:id], b[id:model:model], b[model:]
}

// Rewrite returns the object doc with its top-level id, model and provider
// set, splicing the values in place so that the rest stays byte for byte;
// doc itself is not modified. A member it lacks is added first.
func (a *Identity) Rewrite(doc []byte) []byte {
	out, ok := a.appendRewrite(nil, doc)
	if !ok {
		return doc
	}
	return out
}

// appendRewrite appends rewrite(doc) to dst, so that a caller can reuse
// one buffer for every chunk of a stream; ok is false (and dst unchanged)
// when doc is not an object.
func (a *Identity) appendRewrite(dst, doc []byte) (out []byte, ok bool) {
	open := firstNonSpace(doc)
	if open >= len(doc) || doc[open] != '{' {
		return dst, false
	}
	// Only the values' places are used: jsonpeek.Get does not copy them.
	vals := [3]gjson.Result{jsonpeek.Get(doc, "id"), jsonpeek.Get(doc, "model")}
	if mayHaveKey(doc, providerKey) {
		// Providers rarely name themselves: most answers skip this scan
		// of the whole document.
		vals[2] = jsonpeek.Get(doc, "provider")
	}
	var edits [3]splice
	var have [3]bool
	for i, v := range vals {
		if have[i] = v.Exists() && v.Index > 0; have[i] {
			edits[i] = splice{at: v.Index, n: len(v.Raw), with: a.values()[i]}
		}
	}
	out, added := a.appendMissing(append(dst, doc[:open+1]...), have)
	if rest := doc[open+1:]; added && rest[firstNonSpace(rest)] == '}' {
		out = out[:len(out)-1] // an empty object: no member follows
	}
	return appendSpliced(out, doc, open+1, edits[:]), true
}

// values are the identity's three values, in the order of identityNames.
func (a *Identity) values() [3][]byte { return [3][]byte{a.id, a.model, a.provider} }

// identityNames are the members an Identity sets, quoted, with their
// colons.
var identityNames = [3]string{`"id":`, `"model":`, `"provider":`}

// appendMissing appends the members an answer lacks (have[i] false), each
// followed by a comma; added reports whether there was one.
func (a *Identity) appendMissing(out []byte, have [3]bool) (_ []byte, added bool) {
	for i, v := range a.values() {
		if !have[i] {
			out = append(append(append(out, identityNames[i]...), v...), ',')
			added = true
		}
	}
	return out, added
}

// splice replaces doc[at:at+n] with with; a nil with is no splice.
type splice struct {
	at, n int
	with  []byte
}

// appendSpliced appends doc[from:] to out with the splices made, in the
// order of their places.
func appendSpliced(out, doc []byte, from int, edits []splice) []byte {
	at := from
	for {
		next := -1
		for i, e := range edits {
			if e.with != nil && e.at >= at && (next < 0 || e.at < edits[next].at) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		e := edits[next]
		out = append(append(out, doc[at:e.at]...), e.with...)
		at = e.at + e.n
		edits[next].with = nil
	}
	return append(out, doc[at:]...)
}

var providerKey = []byte(`"provider"`)

// mayHaveKey reports whether doc may have a member named by quotedKey (a
// name without characters JSON must escape): its bytes, or a \u escape
// that could spell it.
func mayHaveKey(doc, quotedKey []byte) bool {
	return bytes.Contains(doc, quotedKey) || bytes.Contains(doc, []byte(`\u`))
}

// UsageBill is what the gateway adds to an answer's usage object: the
// charged cost, whether the caller's own provider key served it, and the
// cost's parts.
type UsageBill struct {
	cost               money.Amount
	prompt, completion money.Amount // the token costs at the model's prices
	byok               bool
	tokens             billing.Usage // the tokens charged
	Responses          bool          // a Responses usage object: input and output
	// CacheSource is, on an answer the response cache replayed, the
	// generation whose answer it was: its tokens are those the provider
	// counted then.
	CacheSource string
}

func NewUsageBill(cost money.Amount, pricing billing.Pricing, u billing.Usage, byok bool) UsageBill {
	b := UsageBill{cost: cost, byok: byok, tokens: u}
	// The split shown beside the charge: the charge itself was priced
	// with its errors checked, and a part out of range shows as 0.
	b.prompt, _ = billing.InputCost(pricing, u)
	b.completion, _ = billing.TokenCost(pricing, 0, u.CompletionTokens)
	return b
}

// Members are the usage members the gateway adds, as JSON text:
// cost, is_byok and cost_details (upstream_inference_cost is what the
// caller's own provider key paid, null when the gateway's key served; the
// token parts named as the route's usage names tokens: prompt and
// completions, or input and output).
func (b UsageBill) Members() string {
	return string(b.appendMembers(make([]byte, 0, 192)))
}

// appendMembers appends members() to dst.
func (b UsageBill) appendMembers(dst []byte) []byte {
	in, out := `,"upstream_inference_prompt_cost":`, `,"upstream_inference_completions_cost":`
	if b.Responses {
		in, out = `,"upstream_inference_input_cost":`, `,"upstream_inference_output_cost":`
	}
	m := append(dst, `"cost":`...)
	m = b.cost.Append(m)
	m = append(m, `,"is_byok":`...)
	m = strconv.AppendBool(m, b.byok)
	m = append(m, `,"cost_details":{"upstream_inference_cost":`...)
	if b.byok {
		m = b.cost.Append(m)
	} else {
		m = append(m, "null"...)
	}
	m = append(m, in...)
	m = b.prompt.Append(m)
	m = append(m, out...)
	m = b.completion.Append(m)
	m = append(m, '}')
	if b.CacheSource != "" {
		m = append(m, `,"response_cache_source_id":`...)
		m = jsonstr.Append(m, b.CacheSource)
	}
	return m
}
