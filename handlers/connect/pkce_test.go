package connect

import (
	"strings"
	"testing"
)

// RFC 7636 Appendix B: the example verifier and its S256 challenge.
const (
	rfcVerifier  = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	rfcChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
)

func TestS256MatchesRFC7636AppendixB(t *testing.T) {
	if got := ChallengeS256(rfcVerifier); got != rfcChallenge {
		t.Fatalf("S256(%s) = %s, want %s", rfcVerifier, got, rfcChallenge)
	}
	if !Verify(MethodS256, rfcChallenge, rfcVerifier) {
		t.Fatal("the RFC's verifier does not verify")
	}
	if err := checkChallenge(MethodS256, rfcChallenge); err != nil {
		t.Fatal(err)
	}
	if err := checkVerifierSyntax(rfcVerifier); err != nil {
		t.Fatal(err)
	}
}

func TestVerify(t *testing.T) {
	other := strings.Replace(rfcVerifier, "d", "e", 1)
	for _, tc := range []struct {
		method, challenge, verifier string
		ok                          bool
	}{
		{MethodS256, rfcChallenge, other, false},
		{MethodS256, rfcChallenge, "", false},
		{MethodS256, rfcVerifier, rfcVerifier, false}, // the verifier is not its own S256 challenge
		{MethodPlain, rfcVerifier, rfcVerifier, true},
		{MethodPlain, rfcVerifier, other, false},
		{MethodPlain, rfcChallenge, rfcVerifier, false},
		{"s256", rfcChallenge, rfcVerifier, false},
		{"", rfcVerifier, rfcVerifier, false},
	} {
		if got := Verify(tc.method, tc.challenge, tc.verifier); got != tc.ok {
			t.Errorf("Verify(%q, %q, %q) = %v", tc.method, tc.challenge, tc.verifier, got)
		}
	}
	// Stored forms: a plain challenge is kept as its S256 digest, never
	// as itself (it is the verifier).
	if s := storedChallenge(MethodPlain, rfcVerifier); s != rfcChallenge || !VerifyStored(s, rfcVerifier) {
		t.Errorf("plain stored as %q", s)
	}
	if s := storedChallenge(MethodS256, rfcChallenge); s != rfcChallenge {
		t.Errorf("S256 stored as %q", s)
	}
}

func TestChallengeAndVerifierSyntax(t *testing.T) {
	for _, tc := range []struct {
		method, challenge string
		ok                bool
	}{
		{MethodS256, rfcChallenge, true},
		{MethodS256, rfcChallenge + "=", false}, // padded
		{MethodS256, rfcChallenge[:42], false},
		{MethodS256, strings.Repeat("A", 43), true},        // 32 zero bytes
		{MethodS256, strings.Repeat("A", 42) + "B", false}, // not a canonical encoding
		{MethodS256, strings.Replace(rfcChallenge, "-", "+", 1), false},
		{MethodPlain, strings.Repeat("a", 42), false},
		{MethodPlain, strings.Repeat("a", 43), true},
		{MethodPlain, strings.Repeat("a~._-Z9", 18) + "ab", true}, // 128
		{MethodPlain, strings.Repeat("a", 129), false},
		{MethodPlain, strings.Repeat("a", 42) + " ", false},
		{MethodPlain, strings.Repeat("a", 42) + "é", false},
	} {
		if err := checkChallenge(tc.method, tc.challenge); (err == nil) != tc.ok {
			t.Errorf("%s %q (%d): %v", tc.method, tc.challenge, len(tc.challenge), err)
		}
	}
}

func TestCallbackURLRules(t *testing.T) {
	for _, tc := range []struct {
		url, origin string // origin "": refused
	}{
		{"https://myapp.com/auth/callback", "https://myapp.com"},
		{"https://MyApp.com:8443/cb?state=x", "https://myapp.com:8443"},
		{"http://localhost:3000/callback", "http://localhost:3000"},
		{"http://localhost/cb", "http://localhost"},
		{"http://127.0.0.1:65535/cb", "http://127.0.0.1:65535"},
		{"https://127.0.0.1:9/cb", "https://127.0.0.1:9"},
		// The scheme's default port is the same origin.
		{"https://app.example:443/cb", "https://app.example"},
		{"http://localhost:80/cb", "http://localhost"},
		{"https://app.example:80/cb", "https://app.example:80"},
		// An internationalised host is its ASCII form, however written.
		{"https://аpple.com/cb", "https://xn--pple-43d.com"},
		{"https://%D0%B0pple.com/cb", "https://xn--pple-43d.com"},
		{"https://XN--PPLE-43D.com:443/cb", "https://xn--pple-43d.com"},
		{"https://Bücher.example/cb", "https://xn--bcher-kva.example"},
		{"http://myapp.com/cb", ""},
		{"http://127.0.0.2/cb", ""},
		{"http://localhost.evil.com/cb", ""},
		{"http://[::1]:3000/cb", ""},
		{"ftp://myapp.com/cb", ""},
		{"javascript:alert(1)", ""},
		{"myapp://callback", ""},
		{"/relative/callback", ""},
		{"//myapp.com/cb", ""},
		{"https://user:pw@myapp.com/cb", ""},
		{"https://myapp.com/cb#frag", ""},
		{"https://myapp.com:0/cb", ""},
		{"https://myapp.com:70000/cb", ""},
		{"https:///cb", ""},
		{"https://a\u200db.example/cb", ""},
		{"", ""},
	} {
		origin, err := CheckCallbackURL(tc.url)
		if tc.origin == "" {
			if err == nil {
				t.Errorf("%q accepted (origin %q)", tc.url, origin)
			}
			continue
		}
		if err != nil || origin != tc.origin {
			t.Errorf("%q: origin %q, %v; want %q", tc.url, origin, err, tc.origin)
		}
	}
}

func TestAppIDIsStableAndExactInJavaScript(t *testing.T) {
	a, b := AppID("https://myapp.com"), AppID("https://myapp.com")
	if a != b || a == AppID("https://other.example") {
		t.Fatalf("app ids %d %d", a, b)
	}
	if a < 0 || a >= 1<<53 {
		t.Fatalf("app id %d beyond 2^53", a)
	}
	// One app, one id, however its callback writes the origin.
	id := func(callback string) int64 {
		o, err := CheckCallbackURL(callback)
		if err != nil {
			t.Fatalf("%s: %v", callback, err)
		}
		return AppID(o)
	}
	if id("https://app.example:443/cb") != id("https://app.example/cb") || id("https://аpple.com/cb") != id("https://xn--pple-43d.com/x") {
		t.Fatal("one origin written two ways has two app ids")
	}
	if UnicodeHost("https://аpple.com:8443/cb") != "аpple.com" || UnicodeHost("https://apple.com/cb") != "" {
		t.Fatal("UnicodeHost")
	}
	if n := AppName("http://localhost:3000"); n != "localhost:3000" {
		t.Fatalf("name %q", n)
	}
}
