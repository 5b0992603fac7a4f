package catalog

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/bedrock"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/gemini"
)

func TestDialValue(t *testing.T) {
	p := &Provider{Name: "p", Style: "openai", Dial: "example.com:443"}
	if got := p.DialValue(); got != "example.com:443" {
		t.Fatalf("before New: %v", got)
	}
	New([]*Model{{ID: "m", Providers: []*Provider{p}}})
	if got := p.DialValue(); got != "example.com:443" {
		t.Fatalf("after New: %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = p.DialValue() }); n != 0 {
		t.Errorf("DialValue allocates %v times", n)
	}
	q := *p
	q.Dial = "10.0.0.1:443" // a private endpoint's checked address
	if got := q.DialValue(); got != "10.0.0.1:443" {
		t.Fatalf("copy with another Dial: %v", got)
	}
	p.Dial = ""
	if got := p.DialValue(); got != "" {
		t.Fatalf("Dial cleared: %v", got)
	}
}

// TestKeyEntry: the entry New makes is SetKey's, for the operator's key
// string itself and the dialect New made it with only.
func TestKeyEntry(t *testing.T) {
	for _, style := range []string{"openai", "anthropic", "azure", "gemini", "bedrock"} {
		p := &Provider{Name: "p", Style: style, APIKey: "sk-operator-key", Dial: "x:443"}
		if style == "azure" {
			p.Settings = map[string]string{"deployment": "d", "api_version": "2024-06-01"}
		}
		if style == "bedrock" {
			p.Settings = map[string]string{"aws_region": "us-east-1"}
		}
		if err := p.Resolve(); err != nil {
			t.Fatalf("%s: %v", style, err)
		}
		if _, _, ok := p.KeyEntry(p.Dialect, p.APIKey); ok {
			t.Fatalf("%s: an entry before New", style)
		}
		New([]*Model{{ID: "m", Providers: []*Provider{p}}})
		name, value, ok := p.KeyEntry(p.Dialect, p.APIKey)
		_, static := p.Dialect.(dialect.KeyEntry)
		if ok != static {
			t.Fatalf("%s: entry %v, dialect.KeyEntry %v", style, ok, static)
		}
		if !ok {
			continue
		}
		h := http.Header{}
		p.Dialect.SetKey(h, p.APIKey)
		if len(h) != 1 || !reflect.DeepEqual(h[name], value) || len(value) != 1 || cap(value) != 1 {
			t.Fatalf("%s: entry %s %q, SetKey %v", style, name, value, h)
		}
		if _, _, ok := p.KeyEntry(p.Dialect, strings.Clone(p.APIKey)); ok {
			t.Errorf("%s: an entry for another string with the key's content", style)
		}
		if _, _, ok := p.KeyEntry(p.Dialect, "byok-key"); ok {
			t.Errorf("%s: an entry for another key", style)
		}
		q := *p
		if err := q.Resolve(); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := q.KeyEntry(q.Dialect, q.APIKey); ok {
			t.Errorf("%s: an entry for another dialect", style)
		}
		q = *p
		q.APIKey = "sk-other"
		if _, _, ok := q.KeyEntry(q.Dialect, q.APIKey); ok {
			t.Errorf("%s: an entry for a copy's other key", style)
		}
	}
}

// Path puts a path under the base path, and makes the same string once.
func TestProviderPath(t *testing.T) {
	p := &Provider{Name: "p", BaseURL: "http://x/v1", BasePath: "/v1", Style: "openai"}
	New([]*Model{{ID: "m", Providers: []*Provider{p}}})
	a := p.Path("/chat/completions")
	b := p.Path("/chat/completions")
	if a != "/v1/chat/completions" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatalf("%q, %q: want one string", a, b)
	}
	if got := p.Path("/responses?x=1"); got != "/v1/responses?x=1" {
		t.Fatalf("another path: %q", got)
	}
	c := *p // a copy with another base path shares the cache, not its answers
	c.BasePath = "/v2"
	if got := c.Path("/responses?x=1"); got != "/v2/responses?x=1" {
		t.Fatalf("copy: %q", got)
	}
	if got := (&Provider{}).Path("/chat/completions"); got != "/chat/completions" {
		t.Fatalf("no base path: %q", got)
	}
}
