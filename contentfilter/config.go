// Package contentfilter applies a guardrail's content filters to the text
// of an inference request: custom RE2 patterns (content_filters) and the
// builtin detectors (content_filter_builtins: e-mail addresses, phone
// numbers, SSNs, card numbers, IP addresses, person names, street
// addresses, prompt injection). Each filter blocks the request, redacts
// what it matches (replaced by its label in what the provider receives),
// or flags it (served unchanged, recorded on the generation).
//
// A guardrail's filters are checked and compiled once, when the guardrail
// is written (Compile); the store caches the compiled Guard with the
// guardrail, so a request pays only for the scan. A request with no filter
// in force does not reach this package.
//
// Nothing here logs: errors name fields, never the text or a match.
package contentfilter

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"unicode/utf8"
)

// Bounds of a guardrail's custom filters: how many, how long a pattern,
// and how large its compiled program (RE2 runs in linear time, but a
// pattern like (a{1000}){1000} compiles to a program too large to run per
// request).
const (
	MaxFilters     = 50
	MaxPatternLen  = 1000
	MaxProgramInst = 20000
	MaxLabelLen    = 100
)

// Action is what a filter does on a match.
type Action uint8

const (
	Redact Action = iota + 1
	Block
	Flag
)

func (a Action) String() string {
	switch a {
	case Redact:
		return "redact"
	case Block:
		return "block"
	case Flag:
		return "flag"
	}
	return ""
}

func parseAction(s string) (Action, bool) {
	switch s {
	case "redact":
		return Redact, true
	case "block":
		return Block, true
	case "flag":
		return Flag, true
	}
	return 0, false
}

// DefaultLabel replaces the matches of a custom filter without a label.
const DefaultLabel = "[REDACTED]"

// Builtin slugs and their system-assigned labels.
var builtinLabels = map[string]string{
	"email":                  "[EMAIL]",
	"phone":                  "[PHONE]",
	"ssn":                    "[SSN]",
	"credit-card":            "[CREDIT_CARD]",
	"ip-address":             "[IP_ADDRESS]",
	"person-name":            "[PERSON_NAME]",
	"address":                "[ADDRESS]",
	"regex-prompt-injection": "[PROMPT_INJECTION]",
}

// BuiltinLabel is the label of a builtin slug ("" for an unknown slug).
func BuiltinLabel(slug string) string { return builtinLabels[slug] }

// Error is a refused filter setting; Field names it as the API reports it
// (content_filters[2].pattern).
type Error struct {
	Field  string
	Reason string
}

func (e *Error) Error() string { return e.Field + ": " + e.Reason }

func fieldErr(list string, i int, field, reason string) error {
	f := list + "[" + strconv.Itoa(i) + "]"
	if field != "" {
		f += "." + field
	}
	return &Error{Field: f, Reason: reason}
}

// rule is one compiled filter.
type rule struct {
	action Action
	label  string // what a redaction writes, and what a block or flag names
	slug   string // the builtin's slug; "" for a custom pattern
	// userOnly scans user messages only (prompt injection's scan_scope).
	userOnly bool
	re       *regexp.Regexp // a custom pattern
	cost     int            // re's instructions a byte at worst
	need     []string       // its prefilter; nil: none
	needIDs  []int32        // need's indices in its guard's litScan
	find     detector       // a builtin
	number   numberKind     // the kind a number builtin finds
	tok      uint8          // the scanTokens detectors of a builtin
}

// Guard is one guardrail's compiled filters.
type Guard struct {
	ID, Name string
	rules    []rule
	lits     *litScan // the custom patterns' prefilters
	unusable bool
}

// Empty reports whether the guard has no filter (nil included).
func (g *Guard) Empty() bool { return g == nil || (len(g.rules) == 0 && !g.unusable) }

// Unusable is the guard of a guardrail whose stored filters do not
// compile: requests under it are refused, never served unfiltered.
func Unusable(id, name string) *Guard { return &Guard{ID: id, Name: name, unusable: true} }

// IsUnusable reports whether the guard refuses every request.
func (g *Guard) IsUnusable() bool { return g != nil && g.unusable }

type customEntry struct {
	Pattern *string `json:"pattern"`
	Action  *string `json:"action"`
	Label   *string `json:"label"`
}

type builtinEntry struct {
	Slug      *string `json:"slug"`
	Action    *string `json:"action"`
	Label     *string `json:"label"`
	ScanScope *string `json:"scan_scope"`
}

// Compile checks a guardrail's content_filters and
// content_filter_builtins (each null, absent or an array) and compiles
// them. It returns the settings as they are stored and returned (builtin
// labels system-assigned, custom labels as given); an *Error names the
// first refused field.
func Compile(id, name string, custom, builtins json.RawMessage) (g *Guard, customOut, builtinsOut json.RawMessage, err error) {
	g = &Guard{ID: id, Name: name}
	if customOut, err = compileCustom(g, custom); err != nil {
		return nil, nil, nil, err
	}
	if builtinsOut, err = compileBuiltins(g, builtins); err != nil {
		return nil, nil, nil, err
	}
	return g, customOut, builtinsOut, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func elements(list string, raw json.RawMessage) ([]json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, &Error{Field: list, Reason: "expected an array or null"}
	}
	return elems, nil
}

func compileCustom(g *Guard, raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	const list = "content_filters"
	elems, err := elements(list, raw)
	if err != nil {
		return nil, err
	}
	if len(elems) > MaxFilters {
		return nil, &Error{Field: list, Reason: "at most " + strconv.Itoa(MaxFilters) + " filters"}
	}
	out := make([]map[string]any, 0, len(elems))
	for i, el := range elems {
		var e customEntry
		if err := strictObject(el, &e, "pattern", "action", "label"); err != nil {
			return nil, fieldErr(list, i, err.field, err.reason)
		}
		if e.Pattern == nil || *e.Pattern == "" {
			return nil, fieldErr(list, i, "pattern", "required non-empty string")
		}
		p := *e.Pattern
		if len(p) > MaxPatternLen {
			return nil, fieldErr(list, i, "pattern", "at most "+strconv.Itoa(MaxPatternLen)+" bytes")
		}
		re, cost, why := compilePattern(p)
		if why != "" {
			return nil, fieldErr(list, i, "pattern", why)
		}
		if e.Action == nil {
			return nil, fieldErr(list, i, "action", "required: block, redact or flag")
		}
		a, ok := parseAction(*e.Action)
		if !ok {
			return nil, fieldErr(list, i, "action", "expected block, redact or flag")
		}
		label := DefaultLabel
		if e.Label != nil {
			if utf8.RuneCountInString(*e.Label) > MaxLabelLen {
				return nil, fieldErr(list, i, "label", "at most "+strconv.Itoa(MaxLabelLen)+" characters")
			}
			if *e.Label != "" {
				label = *e.Label
			}
		}
		r := rule{action: a, label: label, re: re, cost: cost, need: required(p)}
		if r.need != nil {
			if g.lits == nil {
				g.lits = &litScan{}
			}
			r.needIDs = g.lits.add(r.need)
		}
		g.rules = append(g.rules, r)
		out = append(out, map[string]any{"pattern": p, "action": a.String(), "label": e.Label})
	}
	b, _ := json.Marshal(out)
	return b, nil
}

// compilePattern compiles an RE2 pattern and its cost (patternCost), and
// refuses what cannot run per request: too large a program, too costly a
// scan, or a pattern that matches the empty string (it would redact
// between every two characters).
func compilePattern(p string) (*regexp.Regexp, int, string) {
	re, err := regexp.Compile(p)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			return nil, 0, "invalid RE2 pattern: " + string(se.Code)
		}
		return nil, 0, "invalid RE2 pattern"
	}
	parsed, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil, 0, "invalid RE2 pattern"
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil || len(prog.Inst) > MaxProgramInst {
		return nil, 0, "pattern too complex (its compiled program exceeds " + strconv.Itoa(MaxProgramInst) + " instructions)"
	}
	if re.MatchString("") {
		return nil, 0, "pattern matches the empty string"
	}
	cost := patternCost(prog)
	if cost > MaxPatternCost {
		return nil, 0, "pattern too costly to scan: a text can keep more than " + strconv.Itoa(MaxPatternCost) +
			" of its instructions running at each byte (a counted repetition such as [a-z]{1,100} is the usual cause)"
	}
	return re, cost, ""
}

func compileBuiltins(g *Guard, raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return nil, nil
	}
	const list = "content_filter_builtins"
	elems, err := elements(list, raw)
	if err != nil {
		return nil, err
	}
	if len(elems) > len(builtinLabels) {
		return nil, &Error{Field: list, Reason: "at most one entry per builtin slug"}
	}
	seen := map[string]bool{}
	out := make([]map[string]any, 0, len(elems))
	for i, el := range elems {
		var e builtinEntry
		if err := strictObject(el, &e, "slug", "action", "label", "scan_scope"); err != nil {
			return nil, fieldErr(list, i, err.field, err.reason)
		}
		if e.Slug == nil {
			return nil, fieldErr(list, i, "slug", "required")
		}
		slug := *e.Slug
		label, ok := builtinLabels[slug]
		if !ok {
			return nil, fieldErr(list, i, "slug", "unknown builtin "+strconv.Quote(slug)+" (expected email, phone, ssn, credit-card, ip-address, person-name, address or regex-prompt-injection)")
		}
		if seen[slug] {
			return nil, fieldErr(list, i, "slug", "duplicate builtin "+strconv.Quote(slug))
		}
		seen[slug] = true
		if e.Action == nil {
			return nil, fieldErr(list, i, "action", "required: block, redact or flag")
		}
		a, ok := parseAction(*e.Action)
		if !ok {
			return nil, fieldErr(list, i, "action", "expected block, redact or flag")
		}
		// label is deprecated and ignored (system-assigned), but bounded.
		if e.Label != nil && utf8.RuneCountInString(*e.Label) > MaxLabelLen {
			return nil, fieldErr(list, i, "label", "at most "+strconv.Itoa(MaxLabelLen)+" characters")
		}
		entry := map[string]any{"slug": slug, "action": a.String(), "label": label}
		r := rule{action: a, label: label, slug: slug, find: detectors[slug], number: numberKinds[slug], tok: tokDetectors[slug]}
		if e.ScanScope != nil {
			if slug != "regex-prompt-injection" {
				return nil, fieldErr(list, i, "scan_scope", "applies to regex-prompt-injection only")
			}
			switch *e.ScanScope {
			case "user_only":
				r.userOnly = true
			case "all_messages":
			default:
				return nil, fieldErr(list, i, "scan_scope", "expected user_only or all_messages")
			}
			entry["scan_scope"] = *e.ScanScope
		}
		g.rules = append(g.rules, r)
		out = append(out, entry)
	}
	b, _ := json.Marshal(out)
	return b, nil
}

type objErr struct{ field, reason string }

// strictObject decodes an object of known members, with the member that
// is wrong named.
func strictObject(raw json.RawMessage, dst any, known ...string) *objErr {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return &objErr{"", "expected an object"}
	}
	for k := range m {
		ok := false
		for _, n := range known {
			ok = ok || k == n
		}
		if !ok {
			return &objErr{k, "unknown field"}
		}
	}
	for _, n := range known {
		v, ok := m[n]
		if !ok || string(v) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return &objErr{n, "expected a string"}
		}
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return &objErr{"", fmt.Sprintf("expected an object of %v", known)}
	}
	return nil
}
