// Package fetch fetches the web pages and PDFs of the web-fetch plugin
// and server tool: the request's options (max_uses, max_content_tokens,
// allowed_domains, blocked_domains), the fetch itself through a client
// whose connections the customer egress policy checks, and the page as
// readable text (HTML as markdown, PDFs by their text layer, plain text
// as it came), cut to the content limit.
package fetch

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

const (
	// DefaultMaxUses is the fetches a request may make when it names no
	// max_uses; MaxMaxUses bounds what it may name.
	DefaultMaxUses = 10
	MaxMaxUses     = 25
	// DefaultMaxContentTokens is the content a page hands the model when
	// the request names no max_content_tokens; MaxContentTokens bounds it.
	DefaultMaxContentTokens = 25_000
	MaxContentTokens        = 100_000
	// maxDomains bounds each domain list.
	maxDomains = 50
)

// Options are one request's web-fetch options.
type Options struct {
	MaxUses          int
	MaxContentTokens int
	Allowed, Blocked []string // lowercase domains; "*.x" matches subdomains only
}

// FieldError names the member of a request that is wrong.
type FieldError struct{ Path, Message string }

func (e *FieldError) Error() string { return e.Path + ": " + e.Message }

// Parse reads the options of a web-fetch plugin entry (plugin true: its
// members besides id and enabled) or of the server tool's parameters
// object, at path; engines are the engine values accepted ("auto" and the
// gateway's own). A member the reference does not define, or a wrong
// value, is a FieldError naming it.
func Parse(path string, v gjson.Result, plugin bool, engines ...string) (Options, *FieldError) {
	o := Options{MaxUses: DefaultMaxUses, MaxContentTokens: DefaultMaxContentTokens}
	if v.Type == gjson.Null || !v.Exists() {
		return o, nil
	}
	if !v.IsObject() {
		return o, &FieldError{path, "expected an object"}
	}
	var ferr *FieldError
	v.ForEach(func(k, e gjson.Result) bool {
		p := path + "." + k.Str
		switch k.Str {
		case "id", "enabled":
			if !plugin {
				ferr = &FieldError{p, "unknown field of the web_fetch tool's parameters"}
			}
		case "max_uses":
			o.MaxUses, ferr = intIn(p, e, 1, MaxMaxUses)
		case "max_content_tokens":
			o.MaxContentTokens, ferr = intIn(p, e, 1, MaxContentTokens)
		case "allowed_domains":
			o.Allowed, ferr = domains(p, e)
		case "blocked_domains":
			o.Blocked, ferr = domains(p, e)
		case "engine":
			if plugin {
				ferr = &FieldError{p, "unknown field of the web-fetch plugin"}
				break
			}
			ok := e.Type == gjson.String
			if ok {
				ok = false
				for _, name := range engines {
					ok = ok || e.Str == name
				}
			}
			if !ok {
				ferr = &FieldError{p, "this gateway fetches pages itself: expected one of " + quoted(engines)}
			}
		default:
			what := "the web_fetch tool's parameters"
			if plugin {
				what = "the web-fetch plugin"
			}
			ferr = &FieldError{p, "unknown field of " + what}
		}
		return ferr == nil
	})
	if ferr == nil && len(o.Allowed) > 0 && len(o.Blocked) > 0 {
		ferr = &FieldError{path + ".blocked_domains", "give allowed_domains or blocked_domains, not both"}
	}
	return o, ferr
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = `"` + n + `"`
	}
	return strings.Join(q, ", ")
}

func intIn(path string, v gjson.Result, lo, hi int) (int, *FieldError) {
	if v.Type != gjson.Number || v.Num != float64(int64(v.Num)) || v.Num < float64(lo) || v.Num > float64(hi) {
		return 0, &FieldError{path, fmt.Sprintf("expected an integer from %d to %d", lo, hi)}
	}
	return int(v.Num), nil
}

// domains reads a domain list: host names, optionally "*." for
// subdomains only, without scheme, port or path.
func domains(path string, v gjson.Result) ([]string, *FieldError) {
	if !v.IsArray() {
		return nil, &FieldError{path, "expected an array of domain names"}
	}
	var out []string
	var ferr *FieldError
	v.ForEach(func(i, d gjson.Result) bool {
		p := fmt.Sprintf("%s[%d]", path, i.Int())
		name := strings.ToLower(strings.TrimSpace(d.Str))
		host := strings.TrimPrefix(name, "*.")
		switch {
		case d.Type != gjson.String || host == "":
			ferr = &FieldError{p, "expected a domain name"}
		case strings.ContainsAny(host, "/:*@ ?#") || strings.HasPrefix(host, ".") || strings.HasSuffix(host, "."):
			ferr = &FieldError{p, fmt.Sprintf("expected a domain name such as example.com or *.example.com, got %q", d.Str)}
		case len(out) == maxDomains:
			ferr = &FieldError{path, fmt.Sprintf("at most %d domains", maxDomains)}
		default:
			out = append(out, name)
		}
		return ferr == nil
	})
	return out, ferr
}

// HostAllowed reports whether the options let host be fetched, and why
// not: a domain "example.com" covers the host and its subdomains,
// "*.example.com" only the subdomains.
func (o *Options) HostAllowed(host string) (bool, string) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, d := range o.Blocked {
		if matches(host, d) {
			return false, "the domain is in blocked_domains"
		}
	}
	if len(o.Allowed) == 0 {
		return true, ""
	}
	for _, d := range o.Allowed {
		if matches(host, d) {
			return true, ""
		}
	}
	return false, "the domain is not in allowed_domains"
}

func matches(host, domain string) bool {
	if sub, ok := strings.CutPrefix(domain, "*."); ok {
		return strings.HasSuffix(host, "."+sub)
	}
	return host == domain || strings.HasSuffix(host, "."+domain)
}

// CheckEntry checks a web-fetch plugin entry (at path): a boolean enabled
// and the options Parse reads.
func CheckEntry(path string, p gjson.Result) *FieldError {
	if e := p.Get("enabled"); e.Exists() && e.Type != gjson.True && e.Type != gjson.False {
		return &FieldError{Path: path + ".enabled", Message: "expected a boolean"}
	}
	_, ferr := Parse(path, p, true)
	return ferr
}
