// Package websearch holds the gateway's web search logic that does not touch
// the network: rewriting the several ways a client may ask for web search into
// one internal form (Normalize), building the system message that carries the
// search results to the model (SystemMessage, InsertIntoMessages,
// InsertIntoInput), and turning the model's markdown links into url_citation
// annotations (Annotate, Streamer). The engines that run the searches live in
// the engines subpackage.
package websearch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
)

// Values of the deprecated slice returned by Normalize, one per deprecated
// form present in the request, for the caller's Deprecation response header.
const (
	DeprecatedWebPlugin    = "plugins[].id=web"
	DeprecatedOnlineSuffix = "model:online"
)

// Engine names accepted in the engine parameter. "auto" is accepted as well
// and means the same as omitting the parameter (Spec.Engine == "").
var Engines = []string{"native", "exa", "firecrawl", "parallel", "searxng"}

const (
	// DefaultMaxResults is max_results when no form sets it.
	DefaultMaxResults = 5
	// MaxMaxResults is the upper bound of max_results for every engine;
	// Limits can only lower it.
	MaxMaxResults = 25
	// MaxXHandles caps allowed_x_handles and excluded_x_handles.
	MaxXHandles = 20
)

// Spec is the merged web search request.
type Spec struct {
	// Engine is one of Engines, or "" for the automatic choice.
	Engine string
	// MaxResults is in 1..25 (lower for some engines, see Limits); default 5.
	MaxResults     int
	IncludeDomains []string
	ExcludeDomains []string
	// XSearch is non-nil when X search was asked for (an empty object
	// enables it without filters).
	XSearch *XSearch
	// SearchPrompt is the plugin's search_prompt, if any.
	SearchPrompt string
	// Extra holds the parameters this package does not interpret (mode,
	// max_uses, user_location, search_context_size, ...), compacted, so
	// they reach the engine or provider unchanged.
	Extra map[string]json.RawMessage
}

// XSearch is the x_search object (also the legacy x_search_filter).
type XSearch struct {
	AllowedXHandles          []string
	ExcludedXHandles         []string
	FromDate                 string // YYYY-MM-DD
	ToDate                   string // YYYY-MM-DD
	EnableImageUnderstanding bool
	EnableVideoUnderstanding bool
}

// FieldError is a 400: Field is the JSON path of the offending value
// (e.g. "tools[1].parameters.max_results"), "" for the body itself.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Limits lowers max_results per engine, because some engines cap results
// below 25.
type Limits struct {
	// MaxResultsByEngine maps an engine name to its max_results upper bound.
	// Engines absent from the map (and the automatic choice) get 25; values
	// above 25 or below 1 are ignored. Nil means DefaultLimits.
	MaxResultsByEngine map[string]int
}

// DefaultLimits caps firecrawl at 20 results: its max_results goes from 1
// to 20.
func DefaultLimits() Limits {
	return Limits{MaxResultsByEngine: map[string]int{"firecrawl": 20}}
}

func (l Limits) max(engine string) int {
	m := l.MaxResultsByEngine
	if m == nil {
		m = DefaultLimits().MaxResultsByEngine
	}
	if v, ok := m[engine]; ok && v >= 1 && v < MaxMaxResults {
		return v
	}
	return MaxMaxResults
}

// Options configures NormalizeWith. The zero value uses the defaults.
type Options struct {
	Limits Limits
	// SupportsXSearch reports whether model (without :online) may use
	// x_search; nil means DefaultSupportsXSearch.
	SupportsXSearch func(model string) bool
}

// DefaultSupportsXSearch accepts the x-ai vendor's models, the only family
// with X search: ids starting with "x-ai/" or containing "grok".
func DefaultSupportsXSearch(model string) bool {
	m := strings.ToLower(model)
	return strings.HasPrefix(m, "x-ai/") || strings.Contains(m, "grok")
}

// Normalize is NormalizeWith with default Options.
func Normalize(body []byte, brand string) (out []byte, spec *Spec, deprecated []string, err *FieldError) {
	return NormalizeWith(body, brand, Options{})
}

// NormalizeWith rewrites every way a request asks for web search into one
// form, so that the rest of the gateway has a single case to handle:
//
//   - the server tool {"type":"<brand>:web_search","parameters":{...}} in
//     tools (parameters per the reference's WebSearchServerToolConfig:
//     engine, max_results, allowed_domains, excluded_domains, plus x_search
//     and search_prompt; include_domains/exclude_domains are accepted as
//     aliases);
//   - the deprecated plugin {"id":"web", engine, max_results,
//     include_domains, exclude_domains, x_search, search_prompt, ...} in
//     plugins ("enabled": false makes it ask for nothing);
//   - the deprecated ":online" model variant. It is accepted as any
//     ":"-separated segment after the model id, in any order with the
//     other variants: "v/m:online", "v/m:free:online" and "v/m:online:free"
//     all become the model with that segment removed ("v/m", "v/m:free");
//   - the legacy top-level x_search_filter object, which asks for web search
//     with that x_search.
//
// When several forms are present their parameters are merged field by
// field: the server tool wins over the plugin, and for x_search the tool
// wins over the plugin, which wins over x_search_filter. Every form present
// is still validated.
//
// The output has the model without ":online", no web plugin (other plugins
// kept in order; the key is dropped when none remain), no x_search_filter,
// and "tools" moved to the end of the body, holding the client's other tools
// in order followed by exactly one server tool whose parameters are rendered
// canonically from spec (engine omitted when automatic, max_results always
// present). Hence every form yields the same bytes for the same parameters,
// and Normalize(out) == (out, spec, nil).
//
// Without any form, out is body itself and spec is nil. err names the first
// invalid field, in body order; the caller answers 400 with it.
func NormalizeWith(body []byte, brand string, opts Options) (out []byte, spec *Spec, deprecated []string, err *FieldError) {
	n := normalizer{opts: opts, toolType: brand + ":web_search"}
	if n.opts.SupportsXSearch == nil {
		n.opts.SupportsXSearch = DefaultSupportsXSearch
	}
	return n.run(body)
}

type normalizer struct {
	opts     Options
	toolType string
}

// checkError is the FieldError for a body jsoncheck refused.
func checkError(err *jsoncheck.Error) *FieldError {
	switch err.Kind {
	case jsoncheck.TooDeep:
		return &FieldError{Message: fmt.Sprintf("request body nests deeper than %d levels", jsoncheck.MaxDepth)}
	case jsoncheck.Duplicate:
		return &FieldError{err.Path, "duplicate field"}
	case jsoncheck.Syntax:
		return &FieldError{Message: "request body is not valid JSON"}
	}
	return &FieldError{Message: err.Error()}
}

// partial is what one form contributes; nil pointers mean "not set".
type partial struct {
	engine       *string
	enginePath   string
	maxResults   *int
	maxPath      string
	include      *[]string
	exclude      *[]string
	searchPrompt *string
	xsearch      *XSearch
	xPath        string
	extra        map[string]json.RawMessage
}

func (n *normalizer) run(body []byte) ([]byte, *Spec, []string, *FieldError) {
	// Checked without recursion before gjson reads it (jsoncheck).
	if err := jsoncheck.Check(body, nil); err != nil {
		return body, nil, nil, checkError(err)
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return body, nil, nil, &FieldError{Message: "request body must be a JSON object"}
	}
	// A repeated key is read differently by different JSON parsers (first
	// vs last wins); refuse it for the keys this rewrite depends on.
	top := map[string]gjson.Result{}
	var ferr *FieldError
	root.ForEach(func(k, v gjson.Result) bool {
		switch key := k.String(); key {
		case "model", "tools", "plugins", "x_search_filter":
			if k.Raw != `"`+key+`"` { // sjson edits by raw key
				ferr = &FieldError{key, "key must be written without escapes"}
				return false
			}
			if _, dup := top[key]; dup {
				ferr = &FieldError{key, "duplicate key"}
				return false
			}
			top[key] = v
		}
		return true
	})
	if ferr != nil {
		return body, nil, nil, ferr
	}

	var deprecated []string
	asked := false

	// model
	model, modelIsString := "", false
	newModel := ""
	if m, ok := top["model"]; ok && m.Type == gjson.String {
		model, modelIsString = m.String(), true
		stripped, found := stripOnline(model)
		if found {
			if stripped == "" {
				return body, nil, nil, &FieldError{"model", `":online" needs a model id before it`}
			}
			asked = true
			deprecated = append(deprecated, DeprecatedOnlineSuffix)
			newModel = stripped
			model = stripped
		}
	}

	// tools
	var toolPart *partial
	var otherTools []string
	if t, ok := top["tools"]; ok && t.Type != gjson.Null {
		if !t.IsArray() {
			return body, nil, nil, &FieldError{"tools", "must be an array"}
		}
		i := 0
		t.ForEach(func(_, tool gjson.Result) bool {
			path := "tools[" + strconv.Itoa(i) + "]"
			i++
			if !hasKeyValue(tool, "type", n.toolType) {
				otherTools = append(otherTools, tool.Raw)
				return true
			}
			if toolPart != nil {
				ferr = &FieldError{path, "only one " + n.toolType + " tool is allowed"}
				return false
			}
			toolPart, ferr = n.parseTool(tool, path)
			return ferr == nil
		})
		if ferr != nil {
			return body, nil, nil, ferr
		}
		if toolPart != nil {
			asked = true
		}
	}

	// plugins
	var pluginPart *partial
	var otherPlugins []string
	removedPlugin := false
	if p, ok := top["plugins"]; ok && p.Type != gjson.Null {
		if !p.IsArray() {
			return body, nil, nil, &FieldError{"plugins", "must be an array"}
		}
		i := 0
		p.ForEach(func(_, pl gjson.Result) bool {
			path := "plugins[" + strconv.Itoa(i) + "]"
			i++
			isWeb, e := isWebPlugin(pl, path)
			if e != nil {
				ferr = e
				return false
			}
			if !isWeb {
				otherPlugins = append(otherPlugins, pl.Raw)
				return true
			}
			removedPlugin = true
			part, enabled, e := n.parsePlugin(pl, path)
			if e != nil {
				ferr = e
				return false
			}
			if !enabled {
				return true
			}
			if pluginPart != nil {
				ferr = &FieldError{path, `only one "web" plugin is allowed`}
				return false
			}
			pluginPart = part
			return true
		})
		if ferr != nil {
			return body, nil, nil, ferr
		}
		if pluginPart != nil {
			asked = true
			deprecated = append(deprecated, DeprecatedWebPlugin)
		}
	}

	// x_search_filter
	var legacyX *XSearch
	xsfPresent := false
	if x, ok := top["x_search_filter"]; ok {
		xsfPresent = true
		if x.Type != gjson.Null {
			legacyX, ferr = parseXSearch(x, "x_search_filter")
			if ferr != nil {
				return body, nil, nil, ferr
			}
			asked = true
		}
	}

	if !asked {
		return body, nil, nil, nil
	}

	spec, ferr := n.merge(toolPart, pluginPart, legacyX, model, modelIsString)
	if ferr != nil {
		return body, nil, nil, ferr
	}

	// Rewrite. sjson never modifies its input, so body stays intact.
	out := body
	var err error
	if newModel != "" {
		if out, err = sjson.SetBytes(out, "model", newModel); err != nil {
			return body, nil, nil, &FieldError{"model", err.Error()}
		}
	}
	if removedPlugin {
		if len(otherPlugins) == 0 {
			out, err = sjson.DeleteBytes(out, "plugins")
		} else {
			out, err = sjson.SetRawBytes(out, "plugins", []byte("["+strings.Join(otherPlugins, ",")+"]"))
		}
		if err != nil {
			return body, nil, nil, &FieldError{"plugins", err.Error()}
		}
	}
	if xsfPresent {
		if out, err = sjson.DeleteBytes(out, "x_search_filter"); err != nil {
			return body, nil, nil, &FieldError{"x_search_filter", err.Error()}
		}
	}
	if _, ok := top["tools"]; ok {
		if out, err = sjson.DeleteBytes(out, "tools"); err != nil {
			return body, nil, nil, &FieldError{"tools", err.Error()}
		}
	}
	tools := append(otherTools, n.renderTool(spec))
	if out, err = sjson.SetRawBytes(out, "tools", []byte("["+strings.Join(tools, ",")+"]")); err != nil {
		return body, nil, nil, &FieldError{"tools", err.Error()}
	}
	return out, spec, deprecated, nil
}

// stripOnline removes every ":online" variant segment after the model id
// (the part after the last '/'), keeping the other segments in order.
func stripOnline(model string) (string, bool) {
	slash := strings.LastIndexByte(model, '/') + 1
	segs := strings.Split(model[slash:], ":")
	kept := segs[:1]
	for _, s := range segs[1:] {
		if s != "online" {
			kept = append(kept, s)
		}
	}
	if len(kept) == len(segs) {
		return model, false
	}
	out := model[:slash] + strings.Join(kept, ":")
	if out == "" || strings.HasSuffix(out, "/") {
		return "", true
	}
	return out, true
}

// hasKeyValue reports whether obj has key (in any of its occurrences) with
// the string value want, so a duplicated key cannot hide the match.
func hasKeyValue(obj gjson.Result, key, want string) bool {
	if !obj.IsObject() {
		return false
	}
	found := false
	obj.ForEach(func(k, v gjson.Result) bool {
		if k.String() == key && v.Type == gjson.String && v.String() == want {
			found = true
			return false
		}
		return true
	})
	return found
}

// webPluginFields are keys only the web plugin has: a plugin carrying one
// without id "web" is a mistyped web plugin, not someone else's plugin.
var webPluginFields = []string{"engine", "max_results", "include_domains", "exclude_domains", "x_search", "search_prompt"}

// isWebPlugin tells the web plugin from other plugins, which are left alone,
// and rejects a plugin that looks like a web plugin under a wrong id.
func isWebPlugin(pl gjson.Result, path string) (bool, *FieldError) {
	if !pl.IsObject() {
		return false, nil
	}
	if hasKeyValue(pl, "id", "web") {
		return true, nil
	}
	id := pl.Get("id")
	looksWeb := false
	switch strings.ToLower(strings.TrimSpace(id.String())) {
	case "web", "web_search", "web-search", "websearch", "online":
		looksWeb = id.Type == gjson.String
	}
	if !id.Exists() || id.Type != gjson.String {
		for _, f := range webPluginFields {
			if pl.Get(f).Exists() {
				looksWeb = true
			}
		}
	}
	if looksWeb {
		return false, &FieldError{path + ".id", `must be "web"`}
	}
	return false, nil
}

// objectFields returns obj's members in order, refusing repeated keys.
func objectFields(obj gjson.Result, path string) ([]string, map[string]gjson.Result, *FieldError) {
	if !obj.IsObject() {
		return nil, nil, &FieldError{path, "must be an object"}
	}
	var keys []string
	m := map[string]gjson.Result{}
	var ferr *FieldError
	obj.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		if _, dup := m[key]; dup {
			ferr = &FieldError{join(path, key), "duplicate key"}
			return false
		}
		keys = append(keys, key)
		m[key] = v
		return true
	})
	return keys, m, ferr
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (n *normalizer) parseTool(tool gjson.Result, path string) (*partial, *FieldError) {
	_, fields, ferr := objectFields(tool, path)
	if ferr != nil {
		return nil, ferr
	}
	params, ok := fields["parameters"]
	if !ok || params.Type == gjson.Null {
		return &partial{}, nil
	}
	ppath := path + ".parameters"
	keys, pf, ferr := objectFields(params, ppath)
	if ferr != nil {
		return nil, ferr
	}
	return parseParams(keys, pf, ppath)
}

// parsePlugin parses a web plugin; enabled is false for "enabled": false.
func (n *normalizer) parsePlugin(pl gjson.Result, path string) (*partial, bool, *FieldError) {
	keys, fields, ferr := objectFields(pl, path)
	if ferr != nil {
		return nil, false, ferr
	}
	if e, ok := fields["enabled"]; ok && e.Type != gjson.Null {
		if e.Type != gjson.True && e.Type != gjson.False {
			return nil, false, &FieldError{path + ".enabled", "must be a boolean"}
		}
		if e.Type == gjson.False {
			return nil, false, nil
		}
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == "id" || k == "enabled" })
	p, ferr := parseParams(keys, fields, path)
	return p, ferr == nil, ferr
}

// domainAliases maps the plugin's names of the domain filters to the server
// tool's. Both forms accept both names, so that no spelling can slip past
// validation as an uninterpreted extra parameter.
var domainAliases = map[string]string{"include_domains": "allowed_domains", "exclude_domains": "excluded_domains"}

// parseParams parses the search parameters, which the tool's parameters
// object and the plugin object share.
func parseParams(keys []string, fields map[string]gjson.Result, path string) (*partial, *FieldError) {
	for _, k := range keys {
		if canon, ok := domainAliases[k]; ok {
			if _, both := fields[canon]; both {
				return nil, &FieldError{join(path, k), "cannot be used together with " + canon}
			}
		}
	}
	p := &partial{}
	for _, k := range keys {
		v := fields[k]
		fp := join(path, k)
		if v.Type == gjson.Null {
			continue
		}
		var ferr *FieldError
		switch k {
		case "engine", "max_results", "search_prompt", "x_search":
			ferr = p.common(k, v, fp)
		case "allowed_domains", "include_domains":
			p.include, ferr = parseDomains(v, fp)
		case "excluded_domains", "exclude_domains":
			p.exclude, ferr = parseDomains(v, fp)
		default:
			ferr = p.addExtra(k, v, fp)
		}
		if ferr != nil {
			return nil, ferr
		}
	}
	return p, nil
}

// common parses the parameters named alike in the tool and the plugin.
func (p *partial) common(k string, v gjson.Result, fp string) *FieldError {
	switch k {
	case "engine":
		if v.Type != gjson.String {
			return &FieldError{fp, "must be a string"}
		}
		e := v.String()
		if e == "auto" {
			e = ""
		} else if !slices.Contains(Engines, e) {
			return &FieldError{fp, "must be one of " + strings.Join(Engines, ", ") + ` (or "auto")`}
		}
		p.engine, p.enginePath = &e, fp
	case "max_results":
		f := v.Float()
		if v.Type != gjson.Number || f != math.Trunc(f) || f < 1 || f > MaxMaxResults {
			return &FieldError{fp, fmt.Sprintf("must be an integer between 1 and %d", MaxMaxResults)}
		}
		m := int(f)
		p.maxResults, p.maxPath = &m, fp
	case "search_prompt":
		if v.Type != gjson.String {
			return &FieldError{fp, "must be a string"}
		}
		s := validUTF8(v.String())
		p.searchPrompt = &s
	case "x_search":
		x, ferr := parseXSearch(v, fp)
		if ferr != nil {
			return ferr
		}
		p.xsearch, p.xPath = x, fp
	}
	return nil
}

func (p *partial) addExtra(k string, v gjson.Result, fp string) *FieldError {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(v.Raw)); err != nil {
		return &FieldError{fp, "invalid JSON value"}
	}
	if p.extra == nil {
		p.extra = map[string]json.RawMessage{}
	}
	p.extra[validUTF8(k)] = buf.Bytes()
	return nil
}

// parseDomains accepts hostnames with an optional leading "*." wildcard;
// schemes, ports and paths are refused so that every engine can apply the
// filter the same way. Entries are lowercased.
func parseDomains(v gjson.Result, fp string) (*[]string, *FieldError) {
	if !v.IsArray() {
		return nil, &FieldError{fp, "must be an array of strings"}
	}
	var out []string // nil when empty, like an absent list
	var ferr *FieldError
	i := 0
	v.ForEach(func(_, d gjson.Result) bool {
		ep := fp + "[" + strconv.Itoa(i) + "]"
		i++
		if d.Type != gjson.String {
			ferr = &FieldError{ep, "must be a string"}
			return false
		}
		s := strings.ToLower(d.String())
		if !validDomain(s) {
			ferr = &FieldError{ep, fmt.Sprintf(`%q is not a domain (a hostname, optionally with a leading "*."; no scheme, port or path)`, d.String())}
			return false
		}
		out = append(out, s)
		return true
	})
	if ferr != nil {
		return nil, ferr
	}
	return &out, nil
}

func validDomain(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

var xSearchKeys = []string{"allowed_x_handles", "excluded_x_handles", "from_date", "to_date", "enable_image_understanding", "enable_video_understanding"}

// parseXSearch validates an x_search object. Unknown keys are refused: the
// object is small and a typo would otherwise silently drop a filter.
func parseXSearch(v gjson.Result, fp string) (*XSearch, *FieldError) {
	keys, fields, ferr := objectFields(v, fp)
	if ferr != nil {
		return nil, ferr
	}
	x := &XSearch{}
	for _, k := range keys {
		val := fields[k]
		kp := join(fp, k)
		if !slices.Contains(xSearchKeys, k) {
			return nil, &FieldError{kp, "unknown field; allowed: " + strings.Join(xSearchKeys, ", ")}
		}
		if val.Type == gjson.Null {
			continue
		}
		switch k {
		case "allowed_x_handles", "excluded_x_handles":
			h, ferr := parseHandles(val, kp)
			if ferr != nil {
				return nil, ferr
			}
			if k == "allowed_x_handles" {
				x.AllowedXHandles = h
			} else {
				x.ExcludedXHandles = h
			}
		case "from_date", "to_date":
			if val.Type != gjson.String {
				return nil, &FieldError{kp, "must be an ISO 8601 date (YYYY-MM-DD)"}
			}
			if _, err := time.Parse(time.DateOnly, val.String()); err != nil {
				return nil, &FieldError{kp, "must be an ISO 8601 date (YYYY-MM-DD)"}
			}
			if k == "from_date" {
				x.FromDate = val.String()
			} else {
				x.ToDate = val.String()
			}
		case "enable_image_understanding", "enable_video_understanding":
			if val.Type != gjson.True && val.Type != gjson.False {
				return nil, &FieldError{kp, "must be a boolean"}
			}
			if k == "enable_image_understanding" {
				x.EnableImageUnderstanding = val.Bool()
			} else {
				x.EnableVideoUnderstanding = val.Bool()
			}
		}
	}
	if len(x.AllowedXHandles) > 0 && len(x.ExcludedXHandles) > 0 {
		return nil, &FieldError{join(fp, "excluded_x_handles"), "cannot be used together with allowed_x_handles"}
	}
	// YYYY-MM-DD strings compare like the dates they denote.
	if x.FromDate != "" && x.ToDate != "" && x.FromDate > x.ToDate {
		return nil, &FieldError{join(fp, "from_date"), "must not be after to_date"}
	}
	return x, nil
}

func parseHandles(v gjson.Result, kp string) ([]string, *FieldError) {
	if !v.IsArray() {
		return nil, &FieldError{kp, "must be an array of strings"}
	}
	arr := v.Array()
	if len(arr) > MaxXHandles {
		return nil, &FieldError{kp, fmt.Sprintf("must have at most %d entries", MaxXHandles)}
	}
	var out []string
	for i, h := range arr {
		if h.Type != gjson.String || strings.TrimSpace(h.String()) == "" {
			return nil, &FieldError{kp + "[" + strconv.Itoa(i) + "]", "must be a non-empty string"}
		}
		out = append(out, validUTF8(h.String()))
	}
	return out, nil
}

// merge applies the precedence tool > plugin (> x_search_filter for
// x_search), then checks what depends on several fields at once.
func (n *normalizer) merge(tool, plugin *partial, legacyX *XSearch, model string, modelIsString bool) (*Spec, *FieldError) {
	s := &Spec{MaxResults: DefaultMaxResults}
	maxPath, xPath := "", ""
	for _, p := range []*partial{plugin, tool} { // later wins
		if p == nil {
			continue
		}
		if p.engine != nil {
			s.Engine = *p.engine
		}
		if p.maxResults != nil {
			s.MaxResults, maxPath = *p.maxResults, p.maxPath
		}
		if p.include != nil {
			s.IncludeDomains = *p.include
		}
		if p.exclude != nil {
			s.ExcludeDomains = *p.exclude
		}
		if p.searchPrompt != nil {
			s.SearchPrompt = *p.searchPrompt
		}
		if p.xsearch != nil {
			s.XSearch, xPath = p.xsearch, p.xPath
		}
		for k, v := range p.extra {
			if s.Extra == nil {
				s.Extra = map[string]json.RawMessage{}
			}
			s.Extra[k] = v
		}
	}
	if s.XSearch == nil && legacyX != nil {
		s.XSearch, xPath = legacyX, "x_search_filter"
	}
	if lim := n.opts.Limits.max(s.Engine); s.MaxResults > lim {
		if maxPath == "" { // the default, not the client, is over the cap
			s.MaxResults = lim
		} else {
			return nil, &FieldError{maxPath, fmt.Sprintf("must be between 1 and %d with engine %s", lim, s.Engine)}
		}
	}
	if s.XSearch != nil && (!modelIsString || !n.opts.SupportsXSearch(model)) {
		return nil, &FieldError{xPath, fmt.Sprintf("X search is not supported by model %q", model)}
	}
	return s, nil
}

// renderTool renders spec as the one server tool, with a fixed key order so
// that equal specs give equal bytes.
func (n *normalizer) renderTool(s *Spec) string {
	var b strings.Builder
	b.WriteString(`{"type":`)
	writeJSON(&b, n.toolType)
	b.WriteString(`,"parameters":{`)
	first := true
	field := func(k string, v any) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSON(&b, k)
		b.WriteByte(':')
		if raw, ok := v.(json.RawMessage); ok {
			b.Write(raw)
		} else {
			writeJSON(&b, v)
		}
	}
	if s.Engine != "" {
		field("engine", s.Engine)
	}
	field("max_results", s.MaxResults)
	if len(s.IncludeDomains) > 0 {
		field("allowed_domains", s.IncludeDomains)
	}
	if len(s.ExcludeDomains) > 0 {
		field("excluded_domains", s.ExcludeDomains)
	}
	if s.SearchPrompt != "" {
		field("search_prompt", s.SearchPrompt)
	}
	if x := s.XSearch; x != nil {
		xs := struct {
			Allowed  []string `json:"allowed_x_handles,omitempty"`
			Excluded []string `json:"excluded_x_handles,omitempty"`
			From     string   `json:"from_date,omitempty"`
			To       string   `json:"to_date,omitempty"`
			Image    bool     `json:"enable_image_understanding,omitempty"`
			Video    bool     `json:"enable_video_understanding,omitempty"`
		}{x.AllowedXHandles, x.ExcludedXHandles, x.FromDate, x.ToDate, x.EnableImageUnderstanding, x.EnableVideoUnderstanding}
		field("x_search", xs)
	}
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field(k, s.Extra[k])
	}
	b.WriteString("}}")
	return b.String()
}

// validUTF8 replaces each invalid byte with U+FFFD, as encoding/json will
// when the value is rendered, so that Spec matches the rendered tool.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s { // an invalid byte comes out as one RuneError
		b.WriteRune(r)
	}
	return b.String()
}

func writeJSON(b *strings.Builder, v any) {
	enc, err := json.Marshal(v)
	if err != nil { // only plain strings, ints and slices reach here
		panic(err)
	}
	b.Write(enc)
}
