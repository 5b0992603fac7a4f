package autorouter

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
)

// ChooseModel implements plugin.ModelChooser. The rule, in order:
//
//  1. the candidates are the operator's models, in its order, less those
//     the request's entry leaves out (allowed_models keeps the matching
//     ones, excluded_models then drops the matching ones) and those the
//     calling key may not use (guardrails, no endpoint it may call);
//  2. a candidate fits when it offers what the request needs: tools
//     ("tools" in its supported_parameters), a JSON schema answer
//     ("structured_outputs"), a JSON object answer ("response_format"),
//     reasoning ("reasoning"), the modalities of its parts (image, file,
//     audio in its architecture.input_modalities); and when the prompt,
//     counted as admission counts it for the model, plus the request's
//     output limit fits its context_length, the limit its
//     max_completion_tokens;
//  3. of those that fit: with cost_tier, the one whose share of the price
//     ranking (prompt + completion price, lowest first, ties in the
//     operator's order) holds the tier's lower edge (low 0%, medium 20%,
//     high 40%, xhigh 60%, max 80%); else with cost_quality_tradeoff t,
//     the first in the operator's order among those ranked below
//     90 - 8t percent of the price ranking (the cheapest always); else
//     the operator's prefer: the first (order) or the cheapest.
//
// None fitting is a 400 naming what each candidate lacks.
func (p *AutoRouter) ChooseModel(req *plugin.Request, cands plugin.Candidates) (string, *apierror.Error) {
	o := options{tradeoff: -1}
	if entry, at := p.entry(req.Plugins); at >= 0 {
		var apiErr *apierror.Error
		if o, apiErr = readOptions("plugins["+strconv.Itoa(at)+"]", entry); apiErr != nil {
			return "", apiErr
		}
	}
	n := needsOf(req.Kind, req.Body)
	var fit []*catalog.Model
	var why []string // what each candidate left out lacks
	named, usable := 0, 0
	for _, id := range p.Models {
		if !o.keeps(id) {
			continue
		}
		named++
		m := cands.Usable(id)
		if m == nil {
			continue
		}
		usable++
		if lack := n.lack(m, cands); lack != "" {
			why = append(why, m.ID+": "+lack)
			continue
		}
		fit = append(fit, m)
	}
	model := "model"
	switch {
	case named == 0:
		return "", apierror.BadRequest(o.path + ".allowed_models: no candidate of the auto router is left (its candidates: " + strings.Join(p.Models, ", ") + ")")
	case usable == 0:
		return "", apierror.BadRequest(model + ": the auto router has no candidate this key may use")
	case len(fit) == 0:
		return "", apierror.BadRequest(model + ": no candidate of the auto router fits the request (" + strings.Join(why, "; ") + ")")
	}
	return p.byCost(fit, o).ID, nil
}

// entry is the request's entry for the router, by either id, and its
// index; -1: none.
func (*AutoRouter) entry(plugins gjson.Result) (gjson.Result, int) {
	e, at := plugin.Entry(plugins, name)
	if b, bat := plugin.Entry(plugins, betaName); bat >= 0 && (at < 0 || bat < at) {
		return b, bat
	}
	return e, at
}

// keeps reports whether the entry's patterns leave id a candidate.
func (o *options) keeps(id string) bool {
	if o.allowed != nil && !slices.ContainsFunc(o.allowed, func(p string) bool { return match(p, id) }) {
		return false
	}
	return !slices.ContainsFunc(o.excluded, func(p string) bool { return match(p, id) })
}

// byCost is the candidate of fit (in the operator's order, not empty)
// the cost setting chooses.
func (p *AutoRouter) byCost(fit []*catalog.Model, o options) *catalog.Model {
	ranked := slices.Clone(fit)
	slices.SortStableFunc(ranked, func(a, b *catalog.Model) int { return cmp.Compare(price(a), price(b)) })
	switch {
	case o.tier != "":
		return ranked[min(len(ranked)-1, costTiers[o.tier]*len(ranked)/100)]
	case o.tradeoff >= 0:
		ceiling := 90 - 8*int(o.tradeoff)
		for _, m := range fit {
			i := slices.Index(ranked, m)
			if i == 0 || 100*i < ceiling*len(ranked) {
				return m
			}
		}
	case p.Prefer == PreferCheapest:
		return ranked[0]
	}
	return fit[0]
}

// price is a model's prompt and completion prices added, as routing's
// sort by price adds them.
func price(m *catalog.Model) billing.Price { return m.Pricing.Prompt + m.Pricing.Completion }

// needs are what a request asks of the model that serves it.
type needs struct {
	params     []string // supported_parameters it needs
	modalities []string // input modalities beyond text
	maxOut     int64    // its output limit; 0: none
}

// needsOf reads the needs of a body of kind.
func needsOf(kind dialect.Kind, body []byte) needs {
	var n needs
	need := func(list *[]string, v string) {
		if !slices.Contains(*list, v) {
			*list = append(*list, v)
		}
	}
	r := gjson.ParseBytes(body)
	if len(r.Get("tools").Array()) > 0 || len(r.Get("functions").Array()) > 0 {
		need(&n.params, "tools")
	}
	format := r.Get("response_format.type").Str
	if kind == dialect.Responses {
		format = r.Get("text.format.type").Str
	}
	switch format {
	case "json_schema":
		need(&n.params, "structured_outputs")
	case "json_object":
		need(&n.params, "response_format")
	}
	if reasons(kind, r) {
		need(&n.params, "reasoning")
	}
	for _, f := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		if v := r.Get(f); v.Type == gjson.Number {
			n.maxOut = max(n.maxOut, v.Int())
		}
	}
	var parts func(v gjson.Result)
	parts = func(v gjson.Result) {
		v.ForEach(func(_, item gjson.Result) bool {
			switch item.Get("type").Str {
			case "image_url", "input_image", "image":
				need(&n.modalities, "image")
			case "file", "input_file", "document":
				need(&n.modalities, "file")
			case "input_audio":
				need(&n.modalities, "audio")
			}
			if c := item.Get("content"); c.IsArray() {
				parts(c)
			}
			return true
		})
	}
	parts(r.Get("messages"))
	if in := r.Get("input"); in.IsArray() {
		parts(in)
	}
	return n
}

// reasons reports whether the request asks for reasoning: a reasoning
// object not turned off, a reasoning_effort other than none, or a
// Messages request's thinking enabled.
func reasons(kind dialect.Kind, r gjson.Result) bool {
	if kind == dialect.Messages {
		t := r.Get("thinking.type").Str
		return t == "enabled" || t == "adaptive"
	}
	if e := r.Get("reasoning_effort"); e.Type == gjson.String && e.Str != "none" {
		return true
	}
	rs := r.Get("reasoning")
	if !rs.IsObject() || rs.Get("enabled").Type == gjson.False || rs.Get("effort").Str == "none" {
		return false
	}
	return true
}

// lack is what m does not offer of n, "" when it fits.
func (n *needs) lack(m *catalog.Model, cands plugin.Candidates) string {
	pub := gjson.ParseBytes(m.Public)
	params := pub.Get("supported_parameters").Array()
	for _, want := range n.params {
		if !slices.ContainsFunc(params, func(v gjson.Result) bool { return v.Str == want }) {
			return "no " + want + " in its supported_parameters"
		}
	}
	inputs := pub.Get("architecture.input_modalities").Array()
	for _, want := range n.modalities {
		if !slices.ContainsFunc(inputs, func(v gjson.Result) bool { return v.Str == want }) {
			return "no " + want + " input"
		}
	}
	if limit := m.MaxCompletionTokens; limit > 0 && n.maxOut > limit {
		return fmt.Sprintf("the output limit %d is above its max_completion_tokens %d", n.maxOut, limit)
	}
	if window := m.ContextLength; window > 0 {
		prompt := cands.PromptTokens(m)
		if prompt+n.maxOut > window {
			return fmt.Sprintf("the prompt's %d tokens and the output limit %d exceed its context_length %d", prompt, n.maxOut, window)
		}
	}
	return ""
}
