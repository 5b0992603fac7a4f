package export

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Filter is a compiled filter_rules object: the record is exported when
// every group matches; a group matches when all (logic "and", the default)
// or any (logic "or") of its rules match. Disabled or absent rules match
// everything.
type Filter struct {
	groups []group
}

type group struct {
	or    bool
	rules []rule
}

type rule struct {
	field   string
	op      string
	str     string
	num     float64
	numeric bool // value parsed as a number
	re      *regexp.Regexp
}

// The fields of a rule: string fields compare text, number fields numbers.
var (
	stringFields = map[string]bool{"model": true, "provider": true, "session_id": true, "user_id": true,
		"api_key_name": true, "finish_reason": true, "input": true, "output": true}
	numberFields = map[string]bool{"total_cost": true, "total_tokens": true, "prompt_tokens": true, "completion_tokens": true}
	stringOps    = map[string]bool{"equals": true, "not_equals": true, "contains": true, "not_contains": true,
		"regex": true, "starts_with": true, "ends_with": true, "exists": true, "not_exists": true}
	numberOps = map[string]bool{"equals": true, "not_equals": true, "gt": true, "lt": true, "gte": true, "lte": true,
		"exists": true, "not_exists": true}
)

type rulesJSON struct {
	Enabled *bool `json:"enabled"`
	Groups  []struct {
		Logic *string `json:"logic"`
		Rules []struct {
			Field    string           `json:"field"`
			Operator string           `json:"operator"`
			Value    *json.RawMessage `json:"value"`
		} `json:"rules"`
	} `json:"groups"`
}

// CompileFilter checks and compiles a filter_rules object; nil or JSON
// null is no filter. Errors name the offending rule.
func CompileFilter(raw json.RawMessage) (*Filter, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var rj rulesJSON
	if err := json.Unmarshal(raw, &rj); err != nil {
		return nil, fmt.Errorf("filter_rules: expected {enabled?, groups: [{logic?, rules: [{field, operator, value?}]}]}")
	}
	if rj.Groups == nil {
		return nil, fmt.Errorf("filter_rules.groups: required array")
	}
	if rj.Enabled != nil && !*rj.Enabled {
		return nil, nil
	}
	f := &Filter{}
	for gi, g := range rj.Groups {
		var cg group
		if g.Logic != nil {
			switch *g.Logic {
			case "and":
			case "or":
				cg.or = true
			default:
				return nil, fmt.Errorf("filter_rules.groups[%d].logic: expected and or or", gi)
			}
		}
		if g.Rules == nil {
			return nil, fmt.Errorf("filter_rules.groups[%d].rules: required array", gi)
		}
		for ri, r := range g.Rules {
			where := fmt.Sprintf("filter_rules.groups[%d].rules[%d]", gi, ri)
			cr := rule{field: r.Field, op: r.Operator}
			isNum := numberFields[r.Field]
			switch {
			case !isNum && !stringFields[r.Field]:
				return nil, fmt.Errorf("%s.field: unknown field %q", where, r.Field)
			case isNum && !numberOps[r.Operator] || !isNum && !stringOps[r.Operator]:
				return nil, fmt.Errorf("%s.operator: %q does not apply to field %s", where, r.Operator, r.Field)
			}
			if r.Operator != "exists" && r.Operator != "not_exists" {
				if r.Value == nil {
					return nil, fmt.Errorf("%s.value: required for operator %s", where, r.Operator)
				}
				var v any
				if err := json.Unmarshal(*r.Value, &v); err != nil {
					return nil, fmt.Errorf("%s.value: expected a string or a number", where)
				}
				switch x := v.(type) {
				case string:
					cr.str = x
					if n, err := strconv.ParseFloat(x, 64); err == nil {
						cr.num, cr.numeric = n, true
					}
				case float64:
					cr.num, cr.numeric = x, true
					cr.str = strconv.FormatFloat(x, 'f', -1, 64)
				default:
					return nil, fmt.Errorf("%s.value: expected a string or a number", where)
				}
				if isNum && !cr.numeric {
					return nil, fmt.Errorf("%s.value: expected a number for field %s", where, r.Field)
				}
				if r.Operator == "regex" {
					re, err := regexp.Compile(cr.str)
					if err != nil {
						return nil, fmt.Errorf("%s.value: invalid regular expression: %v", where, err)
					}
					cr.re = re
				}
			}
			cg.rules = append(cg.rules, cr)
		}
		f.groups = append(f.groups, cg)
	}
	return f, nil
}

// Record is what a filter sees of a generation: the record and the name
// of the key that made it. Session id, input and output are not recorded
// by the gateway, so they never exist.
type Record struct {
	storage.Generation
	KeyName string
}

func (r Record) text(field string) (string, bool) {
	switch field {
	case "model":
		return r.Model, true
	case "provider":
		return r.Provider, true
	case "user_id":
		return r.User, r.User != ""
	case "api_key_name":
		return r.KeyName, r.KeyName != ""
	case "finish_reason":
		return r.FinishReason, r.FinishReason != ""
	case "session_id":
		return r.SessionID, r.SessionID != ""
	}
	return "", false // input, output
}

func (r Record) number(field string) float64 {
	switch field {
	case "total_cost":
		return r.Cost.Float64()
	case "total_tokens":
		return float64(r.PromptTokens + r.CompletionTokens)
	case "prompt_tokens":
		return float64(r.PromptTokens)
	}
	return float64(r.CompletionTokens)
}

// Match reports whether the record passes the filter; a nil filter passes
// everything.
func (f *Filter) Match(r Record) bool {
	if f == nil {
		return true
	}
	for _, g := range f.groups {
		if !g.match(r) {
			return false
		}
	}
	return true
}

func (g group) match(r Record) bool {
	if len(g.rules) == 0 {
		return true
	}
	for _, ru := range g.rules {
		m := ru.match(r)
		if g.or && m {
			return true
		}
		if !g.or && !m {
			return false
		}
	}
	return !g.or
}

func (ru rule) match(r Record) bool {
	if numberFields[ru.field] {
		n := r.number(ru.field)
		switch ru.op {
		case "exists":
			return true
		case "not_exists":
			return false
		case "equals":
			return n == ru.num
		case "not_equals":
			return n != ru.num
		case "gt":
			return n > ru.num
		case "lt":
			return n < ru.num
		case "gte":
			return n >= ru.num
		case "lte":
			return n <= ru.num
		}
		return false
	}
	s, ok := r.text(ru.field)
	switch ru.op {
	case "exists":
		return ok
	case "not_exists":
		return !ok
	case "not_equals":
		return !ok || s != ru.str
	case "not_contains":
		return !ok || !strings.Contains(s, ru.str)
	}
	if !ok {
		return false
	}
	switch ru.op {
	case "equals":
		return s == ru.str
	case "contains":
		return strings.Contains(s, ru.str)
	case "starts_with":
		return strings.HasPrefix(s, ru.str)
	case "ends_with":
		return strings.HasSuffix(s, ru.str)
	case "regex":
		return ru.re.MatchString(s)
	}
	return false
}

// Sampled reports whether a destination with the given sampling rate
// exports the generation. The decision is a hash of the destination and
// generation ids, so it is the same on every retry and across restarts.
func Sampled(rate float64, destinationID, generationID string) bool {
	if rate >= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(destinationID))
	h.Write([]byte{0})
	h.Write([]byte(generationID))
	return float64(h.Sum64()>>11)/float64(1<<53) < rate
}
