package engines

import (
	"net/url"
	"strings"
)

// MatchDomain reports whether the URL rawURL is covered by the domain pattern.
//
// Patterns (case-insensitive; a scheme and a trailing slash are ignored):
//
//	example.com        example.com and every subdomain (www.example.com, a.b.example.com)
//	*.example.com      subdomains of example.com only, not example.com itself
//	.example.com       same as *.example.com
//	*.gov              any host under .gov
//	example.com/blog   as example.com, limited to paths /blog and /blog/...
//
// A plain domain covering its subdomains matches how Exa, Parallel and the
// site: operator scope a domain upstream.
func MatchDomain(pattern, rawURL string) bool {
	pattern = normalizePattern(pattern)
	if pattern == "" {
		return false
	}
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil || u.Host == "" {
		return false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return false
	}
	phost, ppath, _ := strings.Cut(pattern, "/")
	if !matchHost(phost, host) {
		return false
	}
	if ppath == "" {
		return true
	}
	want := "/" + strings.Trim(ppath, "/") + "/"
	have := strings.TrimSuffix(u.EscapedPath(), "/") + "/"
	return strings.HasPrefix(strings.ToLower(have), want)
}

func matchHost(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		// suffix is ".example.com": strict subdomains only.
		return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	}
	return host == pattern || strings.HasSuffix(host, "."+pattern)
}

// FilterResults keeps the results whose URL matches at least one include
// pattern (when any is given) and no exclude pattern. Results with an
// unparsable URL are dropped when include patterns are given.
func FilterResults(results []Result, include, exclude []string) []Result {
	if len(include) == 0 && len(exclude) == 0 {
		return results
	}
	out := results[:0:0]
	for _, r := range results {
		if len(include) > 0 && !matchAny(include, r.URL) {
			continue
		}
		if matchAny(exclude, r.URL) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func matchAny(patterns []string, rawURL string) bool {
	for _, p := range patterns {
		if MatchDomain(p, rawURL) {
			return true
		}
	}
	return false
}

// normalizePattern lowercases p and strips a scheme, surrounding blanks and
// trailing slashes and dots; a leading "." becomes "*.". "" means invalid.
func normalizePattern(p string) string {
	p = strings.ToLower(strings.TrimSpace(p))
	if i := strings.Index(p, "://"); i >= 0 {
		p = p[i+3:]
	}
	p = strings.TrimRight(p, "/")
	host, path, hasPath := strings.Cut(p, "/")
	host = strings.TrimSuffix(host, ".")
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i] // drop a port
	}
	if strings.HasPrefix(host, ".") {
		host = "*" + host
	}
	if host == "" || host == "*." || host == "*" || strings.Contains(host[1:], "*") {
		return ""
	}
	if hasPath {
		return host + "/" + path
	}
	return host
}

// normalizePatterns normalizes and deduplicates patterns, dropping invalid
// ones. It returns nil for an empty result.
func normalizePatterns(ps []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range ps {
		n := normalizePattern(p)
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}

// hostScopes turns patterns into the plain host names a vendor without
// wildcard or path support understands: "*.example.com" → "example.com"
// (which covers the subdomains upstream; the client-side filter then drops
// the apex), "example.com/blog" → "example.com". stripWWW also turns
// "www.example.com" into "example.com", for vendors that ask for apex forms.
// Wildcards over a bare suffix ("*.gov") are kept as ".gov" when keepSuffix,
// dropped otherwise.
func hostScopes(patterns []string, stripWWW, keepSuffix bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range patterns {
		host, _, _ := strings.Cut(p, "/")
		wild := false
		if h, ok := strings.CutPrefix(host, "*."); ok {
			host, wild = h, true
		}
		if stripWWW {
			if h, ok := strings.CutPrefix(host, "www."); ok && strings.Contains(h, ".") {
				host = h
			}
		}
		if !strings.Contains(host, ".") {
			if !wild || !keepSuffix {
				continue
			}
			host = "." + host
		}
		if !seen[host] {
			seen[host] = true
			out = append(out, host)
		}
	}
	return out
}

// withSiteOperators appends site: operators for the domain filters to text,
// for engines that only take filters inside the query (Firecrawl, SearXNG):
// one include gives "site:a", several give "(site:a OR site:b)"; each plain
// exclude gives "-site:x". Wildcard and path excludes are left to the
// client-side filter, since "-site:example.com" would also drop example.com
// itself (or all of it, for "example.com/blog").
func withSiteOperators(text string, include, exclude []string) string {
	var b strings.Builder
	b.WriteString(text)
	inc := hostScopes(include, false, false)
	switch {
	case len(inc) == 1:
		b.WriteString(" site:" + inc[0])
	case len(inc) > 1:
		b.WriteString(" (")
		for i, h := range inc {
			if i > 0 {
				b.WriteString(" OR ")
			}
			b.WriteString("site:" + h)
		}
		b.WriteString(")")
	}
	var plain []string
	for _, p := range exclude {
		if !strings.HasPrefix(p, "*.") && !strings.Contains(p, "/") {
			plain = append(plain, p)
		}
	}
	for _, h := range hostScopes(plain, false, false) {
		b.WriteString(" -site:" + h)
	}
	return b.String()
}
