package handlers

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	"github.com/tollgate-dev/caddy-tollgate/dialect/bedrock"
	"github.com/tollgate-dev/caddy-tollgate/dialect/openai"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

func TestWithoutCredentialParams(t *testing.T) {
	for q, want := range map[string]string{
		"":                                   "",
		"beta=true":                          "beta=true",
		"key=sk-1":                           "",
		"beta=true&key=sk-1&api-version=2":   "beta=true&api-version=2",
		"API_KEY=sk-1&x=1&api-key=sk-2":      "x=1",
		"%6Bey=sk-1&monkey=1&keys=2&key":     "monkey=1&keys=2",
		"api-version=2024-10-21&debug=1&k=v": "api-version=2024-10-21&debug=1&k=v",
	} {
		if got := routing.WithoutCredentialParams(q); got != want {
			t.Errorf("withoutCredentialParams(%q) = %q, want %q", q, got, want)
		}
	}
}

func TestUpstreamHeaderDropsClientCredentials(t *testing.T) {
	h := http.Header{}
	for _, k := range slices.Concat(routing.ClientCredentialHeaders, []string{"Accept-Encoding", "Incremental", "X-Session-Id", "Content-Type", "Api-Version"}) {
		h.Set(k, "v")
	}
	c := routing.UpstreamHeader(h)
	if len(c) != 2 || c.Get("Content-Type") == "" || c.Get("Api-Version") == "" {
		t.Errorf("left %v, want Content-Type and Api-Version only", c)
	}
	if len(h) != len(routing.ClientCredentialHeaders)+5 {
		t.Errorf("the client's header changed: %v", h)
	}
}

// TestProviderKeyOnlyOnTheSentCopy: the attempt's key is on the request
// the transport sends, in the provider's dialect, and never on the request
// reverse_proxy logs.
func TestProviderKeyOnlyOnTheSentCopy(t *testing.T) {
	for _, anthropic := range []bool{false, true} {
		r, _ := http.NewRequest("POST", "http://provider.test/v1/chat/completions", nil)
		r.Header.Set("Content-Type", "application/json")
		rt := &upstream.Route{Key: "sk-provider-secret", Dialect: testDialect(anthropic)}
		r = metering.WithRoute(r, rt)
		sent, _ := withProviderKey(r)
		name, want := "Authorization", "Bearer sk-provider-secret"
		if anthropic {
			name, want = "X-Api-Key", "sk-provider-secret"
		}
		if got := sent.Header.Get(name); got != want || sent.Header.Get("Content-Type") != "application/json" {
			t.Errorf("anthropic %t: sent %v", anthropic, sent.Header)
		}
		if len(r.Header) != 1 {
			t.Errorf("anthropic %t: the logged request got %v", anthropic, r.Header)
		}
		// A fallback to the other dialect carries only its own header.
		rt.Dialect = testDialect(!anthropic)
		if again, _ := withProviderKey(r); len(again.Header) != 2 || again.Header.Get(name) != "" {
			t.Errorf("anthropic %t: fallback sent %v", anthropic, again.Header)
		}
	}
	plain, _ := http.NewRequest("GET", "http://provider.test/", nil)
	if same, _ := withProviderKey(plain); same != plain {
		t.Error("a request without a route was changed")
	}
}

// A request that its dialect cannot sign with the attempt's key is not
// sent unsigned: the transport fails the attempt, without the key in its
// error.
func TestUnsignableRequestIsNotSent(t *testing.T) {
	d, err := bedrock.New(dialect.Options{Model: "m", Settings: map[string]string{"aws_region": "us-east-1"}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest("POST", "http://bedrock.test/model/m/converse", nil)
	const key = "not-an-access-key-pair" // no "<id>:<secret>"
	r = metering.WithRoute(r, &upstream.Route{Key: key, Dialect: d, Provider: &catalog.Provider{Name: "aws"}})
	res, err := keyTransport{}.RoundTrip(r)
	if err == nil || res != nil {
		t.Fatalf("sent: %v %v", res, err)
	}
	if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "aws") {
		t.Errorf("error %q", err)
	}
	good := metering.WithRoute(r, &upstream.Route{Key: "AKIDEXAMPLE:secret", Dialect: d, Provider: &catalog.Provider{Name: "aws"}})
	if sent, err := withProviderKey(good); err != nil || !strings.HasPrefix(sent.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		t.Fatalf("signed: %v %v", sent.Header, err)
	}
}

// testDialect is the OpenAI dialect, or Anthropic's.
func testDialect(isAnthropic bool) dialect.Dialect {
	style := openai.Style
	if isAnthropic {
		style = anthropic.Style
	}
	d, err := dialect.New(style, dialect.Options{})
	if err != nil {
		panic(err)
	}
	return d
}
