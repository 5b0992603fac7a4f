package handlers

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
)

// providerPrefs are the request's `provider` routing preferences (the
// public API's provider object): which endpoints may serve it, in what
// order, and whether to fall back past the preferred ones.
type providerPrefs struct {
	order          []string
	only, ignore   map[string]bool
	allowFallbacks bool
}

// parseProviderPrefs reads the `provider` object; names match the catalog's
// provider names case-insensitively.
func parseProviderPrefs(v gjson.Result) (providerPrefs, *apierror.Error) {
	p := providerPrefs{allowFallbacks: true}
	if !v.Exists() || v.Type == gjson.Null {
		return p, nil
	}
	if !v.IsObject() {
		return p, apierror.BadRequest("provider: expected an object")
	}
	names := func(field string) ([]string, *apierror.Error) {
		f := v.Get(field)
		if !f.Exists() || f.Type == gjson.Null {
			return nil, nil
		}
		if !f.IsArray() {
			return nil, apierror.BadRequest("provider." + field + ": expected an array of provider names")
		}
		var out []string
		for _, n := range f.Array() {
			if n.Type != gjson.String {
				return nil, apierror.BadRequest("provider." + field + ": expected an array of provider names")
			}
			out = append(out, strings.ToLower(n.Str))
		}
		return out, nil
	}
	set := func(list []string) map[string]bool {
		if list == nil {
			return nil
		}
		m := make(map[string]bool, len(list))
		for _, n := range list {
			m[n] = true
		}
		return m
	}
	var apiErr *apierror.Error
	if p.order, apiErr = names("order"); apiErr != nil {
		return p, apiErr
	}
	only, apiErr := names("only")
	if apiErr != nil {
		return p, apiErr
	}
	ignore, apiErr := names("ignore")
	if apiErr != nil {
		return p, apiErr
	}
	p.only, p.ignore = set(only), set(ignore)
	if f := v.Get("allow_fallbacks"); f.Exists() && f.Type != gjson.Null {
		if !f.IsBool() {
			return p, apierror.BadRequest("provider.allow_fallbacks: expected a boolean")
		}
		p.allowFallbacks = f.Bool()
	}
	return p, nil
}

// filter orders and trims one model's candidate endpoints: ignored and
// not-`only` providers go, providers named in `order` come first in that
// order; without fallbacks only the ordered ones (or the first) remain.
// Without preferences the result is c itself.
func (p providerPrefs) filter(c []Attempt) []Attempt {
	if p.only == nil && p.ignore == nil && len(p.order) == 0 && p.allowFallbacks {
		return c // no preferences: every candidate, in order
	}
	out := make([]Attempt, 0, len(c))
	for _, a := range c {
		name := strings.ToLower(a.Provider.Name)
		if p.ignore[name] || (p.only != nil && !p.only[name]) {
			continue
		}
		out = append(out, a)
	}
	rank := func(a Attempt) int {
		if i := slices.Index(p.order, strings.ToLower(a.Provider.Name)); i >= 0 {
			return i
		}
		return len(p.order)
	}
	slices.SortStableFunc(out, func(a, b Attempt) int { return rank(a) - rank(b) })
	if !p.allowFallbacks {
		if len(p.order) > 0 {
			out = slices.DeleteFunc(out, func(a Attempt) bool { return rank(a) == len(p.order) })
		} else if len(out) > 1 {
			out = out[:1]
		}
	}
	return out
}
