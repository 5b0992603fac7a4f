package routing

import (
	"net/url"
	"strings"
)

// ClientCredentialHeaders can carry what a client authenticates with in
// the ways other APIs take a key (Google's x-goog-api-key, Azure's
// api-key), a session cookie or proxy credentials. Auth removes the two
// the gateway reads (Authorization, X-Api-Key); these are removed from
// the request a provider receives (upstreamHeader leaves them out), as
// neither the provider nor reverse_proxy's log of that request should
// see them.
var ClientCredentialHeaders = []string{"X-Goog-Api-Key", "Api-Key", "Cookie", "Proxy-Authorization"}

// credentialParams are the query parameters that carry a key (Google's
// ?key=, and its spellings elsewhere).
var credentialParams = []string{"key", "api_key", "api-key"}

// WithoutCredentialParams is the raw query q without credentialParams,
// the other parameters kept byte for byte and in order.
func WithoutCredentialParams(q string) string {
	if !strings.Contains(q, "key") {
		return q // the common case: no parameter to look at
	}
	var b strings.Builder
	for part := range strings.SplitSeq(q, "&") {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && isCredentialParam(n) || isCredentialParam(name) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(part)
	}
	return b.String()
}

func isCredentialParam(name string) bool {
	for _, p := range credentialParams {
		if strings.EqualFold(name, p) {
			return true
		}
	}
	return false
}
