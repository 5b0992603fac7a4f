// Package connect is the connect flow (OAuth 2.0 with PKCE, RFC 7636)
// through which an app gets a member's key: the rules of an authorization
// request (callback URL, code challenge), issuing the code once the member
// approved, exchanging it with the verifier for a key, and the member's
// view and revocation of the keys apps hold. The API routes (package
// admin) and the dashboard's consent page both go through it, so that no
// rule has a second implementation.
package connect

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net"
	"net/url"
	"strings"

	"golang.org/x/net/idna"
)

// The code challenge methods of RFC 7636.
const (
	MethodS256  = "S256"
	MethodPlain = "plain"
)

// ChallengeS256 is the S256 code challenge of a verifier:
// BASE64URL-ENCODE(SHA256(ASCII(verifier))), without padding.
func ChallengeS256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// storedChallenge is the form a challenge is stored and compared in: the
// S256 challenge itself, or for plain the S256 digest of the challenge
// (which is the verifier, and so never stored as is).
func storedChallenge(method, challenge string) string {
	if method == MethodPlain {
		return ChallengeS256(challenge)
	}
	return challenge
}

// VerifyStored reports, in time independent of where they differ,
// whether verifier answers a challenge stored by storedChallenge: both
// methods compare S256(verifier) with the stored digest.
func VerifyStored(stored, verifier string) bool {
	got := ChallengeS256(verifier)
	return subtle.ConstantTimeCompare([]byte(got), []byte(stored)) == 1
}

// Verify reports whether verifier answers challenge under method, in
// constant time; an unknown method never verifies.
func Verify(method, challenge, verifier string) bool {
	switch method {
	case MethodS256, MethodPlain:
		return VerifyStored(storedChallenge(method, challenge), verifier)
	}
	return false
}

// errSyntax explains the shape verifiers and plain challenges must have.
var errSyntax = errors.New("expected 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_' and '~' (RFC 7636)")

// checkVerifierSyntax checks the syntax RFC 7636 section 4.1 gives a code
// verifier (and so a plain challenge).
func checkVerifierSyntax(v string) error {
	if len(v) < 43 || len(v) > 128 {
		return errSyntax
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return errSyntax
		}
	}
	return nil
}

// checkChallenge checks a challenge for its method: an S256 challenge is
// the 43-character unpadded base64url encoding of a SHA-256 digest; a
// plain one has a verifier's syntax.
func checkChallenge(method, challenge string) error {
	if method == MethodPlain {
		return checkVerifierSyntax(challenge)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(challenge)
	if err != nil || len(b) != sha256.Size || len(challenge) != 43 {
		return errors.New("expected the unpadded base64url encoding of a SHA-256 digest (43 characters)")
	}
	return nil
}

// CheckCallbackURL checks a callback URL and returns its origin
// (scheme://host[:port], the host in ASCII and lower case, without the
// scheme's default port): an absolute https URL, or http on localhost or
// 127.0.0.1 (any port) for tools on the person's own machine; no user
// information and no fragment, which a redirect would carry to the wrong
// party or drop.
func CheckCallbackURL(raw string) (origin string, err error) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return "", errors.New("expected an absolute URL")
	}
	if u.User != nil {
		return "", errors.New("must not carry user information")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return "", errors.New("must not carry a fragment")
	}
	host := u.Hostname()
	switch u.Scheme {
	case "https":
	case "http":
		if host != "localhost" && host != "127.0.0.1" {
			return "", errors.New("must be https, or http on localhost or 127.0.0.1")
		}
	default:
		return "", errors.New("must be https, or http on localhost or 127.0.0.1")
	}
	port := u.Port()
	if port != "" {
		if _, err := net.LookupPort("tcp", port); err != nil || strings.HasPrefix(port, "0") {
			return "", errors.New("has an invalid port")
		}
	}
	// One app, one origin: the scheme's default port is the same origin
	// written another way.
	if u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80" {
		port = ""
	}
	host, err = asciiHost(host)
	if err != nil {
		return "", err
	}
	if strings.Contains(host, ":") { // an IPv6 literal
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, nil
}

// asciiHost is a host name in the form DNS resolves, lower case: an
// internationalised name (Unicode, such as "аpple.com" with a Cyrillic
// "а") as its punycode ("xn--pple-43d.com"), which no letter of another
// alphabet can make look like a familiar name.
func asciiHost(host string) (string, error) {
	if isASCII(host) {
		return strings.ToLower(host), nil
	}
	a, err := idna.Lookup.ToASCII(host)
	if err != nil || a == "" {
		return "", errors.New("has an invalid internationalised host name")
	}
	return a, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// UnicodeHost is the host of a callback URL as it was written, when it
// is not ASCII: what a person would read in an address bar, to be shown
// beside the origin's ASCII form. "" for an ASCII host.
func UnicodeHost(callbackURL string) string {
	u, err := url.Parse(callbackURL)
	if err != nil || isASCII(u.Hostname()) {
		return ""
	}
	return u.Hostname()
}

// AppID is the app_id of an origin: a stable number derived from it, the
// same on every replica without any record to share.
func AppID(origin string) int64 {
	sum := sha256.Sum256([]byte(origin))
	return int64(binary.BigEndian.Uint64(sum[:8]) >> 11) // 53 bits: exact in a JavaScript number
}

// AppName is the name an app goes by: the host (and port) of its
// callback's origin, the one thing about it the gateway can vouch for.
func AppName(origin string) string {
	_, host, _ := strings.Cut(origin, "://")
	return host
}
