package fetch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/pdftext/pdftest"
)

func TestParse(t *testing.T) {
	o, ferr := Parse("plugins[0]", gjson.Parse(`{"id":"web-fetch","max_uses":3,"max_content_tokens":50,"allowed_domains":["Example.com","*.docs.org"]}`), true)
	if ferr != nil || o.MaxUses != 3 || o.MaxContentTokens != 50 || strings.Join(o.Allowed, ",") != "example.com,*.docs.org" {
		t.Fatalf("%+v %v", o, ferr)
	}
	if o, ferr = Parse("plugins[0]", gjson.Parse(`{"id":"web-fetch"}`), true); ferr != nil || o.MaxUses != DefaultMaxUses || o.MaxContentTokens != DefaultMaxContentTokens {
		t.Fatalf("defaults %+v %v", o, ferr)
	}
	for in, want := range map[string]string{
		`{"id":"web-fetch","max_uses":0}`:                                        "plugins[0].max_uses: expected an integer from 1 to 25",
		`{"id":"web-fetch","max_uses":2.5}`:                                      "plugins[0].max_uses: expected an integer",
		`{"id":"web-fetch","max_content_tokens":"9"}`:                            "plugins[0].max_content_tokens: expected an integer",
		`{"id":"web-fetch","allowed_domains":"a.com"}`:                           "plugins[0].allowed_domains: expected an array",
		`{"id":"web-fetch","blocked_domains":["https://a.com/x"]}`:               "plugins[0].blocked_domains[0]: expected a domain name such as",
		`{"id":"web-fetch","allowed_domains":["a.com"],"blocked_domains":["b"]}`: "plugins[0].blocked_domains: give allowed_domains or blocked_domains, not both",
		`{"id":"web-fetch","engine":"exa"}`:                                      "plugins[0].engine: unknown field of the web-fetch plugin",
		`{"id":"web-fetch","depth":1}`:                                           "plugins[0].depth: unknown field of the web-fetch plugin",
	} {
		if _, ferr := Parse("plugins[0]", gjson.Parse(in), true); ferr == nil || !strings.HasPrefix(ferr.Error(), want) {
			t.Errorf("%s: %v, want %q", in, ferr, want)
		}
	}
	if _, ferr := Parse("tools[0].parameters", gjson.Parse(`{"engine":"exa"}`), false, "auto"); ferr == nil || ferr.Path != "tools[0].parameters.engine" {
		t.Errorf("tool engine: %v", ferr)
	}
}

func TestHostAllowed(t *testing.T) {
	o := Options{Allowed: []string{"example.com", "*.docs.org"}}
	for host, want := range map[string]bool{"example.com": true, "www.example.com": true, "notexample.com": false, "docs.org": false, "a.docs.org": true} {
		if ok, _ := o.HostAllowed(host); ok != want {
			t.Errorf("%s: %v", host, ok)
		}
	}
	o = Options{Blocked: []string{"bad.com"}}
	if ok, why := o.HostAllowed("x.bad.com"); ok || why != "the domain is in blocked_domains" {
		t.Errorf("blocked: %v %s", ok, why)
	}
}

func TestURLs(t *testing.T) {
	got := URLs(`Read https://a.com/x, then (see https://en.wikipedia.org/wiki/Go_(language)). Also <http://b.org/p?q=1>. https://a.com/x again.`)
	want := []string{"https://a.com/x", "https://en.wikipedia.org/wiki/Go_(language)", "http://b.org/p?q=1"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%q", got)
	}
}

// pages is a site of test pages on loopback.
func pages(t *testing.T) *httptest.Server {
	pdf := pdftest.Build("Revenue grew 12% in Q3.")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/article":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(`<!doctype html><html><head><title>The  Article</title><script>var x = 1;</script></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<main><h1>Go 1.26</h1><p>The <b>green tea</b> collector is the <a href="/gc">default</a>.</p></main>
<footer>Copyright</footer></body></html>`))
		case "/q3.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(pdf)
		case "/plain":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte(strings.Repeat("word ", 100)))
		case "/image":
			w.Header().Set("Content-Type", "image/png")
			w.Write([]byte("\x89PNG"))
		case "/away":
			http.Redirect(w, r, "http://127.0.0.2"+r.Host[strings.LastIndexByte(r.Host, ':'):]+"/article", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// loopbackFetcher may reach 127.0.0.1 only, as an operator's allow list
// would let it.
func loopbackFetcher() *Fetcher {
	policy := egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	return &Fetcher{Client: &http.Client{Transport: egress.Transport(func() *egress.Policy { return policy })}}
}

func TestFetch(t *testing.T) {
	srv := pages(t)
	f := loopbackFetcher()
	o := Options{MaxUses: 10, MaxContentTokens: 1000}
	ctx := context.Background()

	p := f.Fetch(ctx, srv.URL+"/article", &o)
	if p.Err != "" || !p.Fetched || p.Status != 200 || p.Title != "The Article" {
		t.Fatalf("%+v", p)
	}
	if !strings.Contains(p.Text, "# Go 1.26") || !strings.Contains(p.Text, "**green tea**") || !strings.Contains(p.Text, "[default]("+srv.URL+"/gc)") ||
		strings.Contains(p.Text, "Home") || strings.Contains(p.Text, "Copyright") || strings.Contains(p.Text, "var x") {
		t.Fatalf("markdown: %q", p.Text)
	}
	if p = f.Fetch(ctx, srv.URL+"/q3.pdf", &o); p.Err != "" || p.Text != "Revenue grew 12% in Q3." {
		t.Fatalf("pdf: %+v", p)
	}
	small := Options{MaxUses: 1, MaxContentTokens: 10}
	if p = f.Fetch(ctx, srv.URL+"/plain", &small); p.Err != "" || len(p.Text) != 40 || !p.Truncated {
		t.Fatalf("cut: %+v", p)
	}
	for path, want := range map[string]string{
		"/missing": "the URL answered 404 Not Found",
		"/image":   "the page's content type image/png is not text, HTML or PDF",
		// The allow list lets the first hop through, not the redirect's.
		"/away": "could not be fetched: refused by the gateway's customer_egress policy: 127.0.0.2 is not a public address",
	} {
		if p = f.Fetch(ctx, srv.URL+path, &o); !strings.HasPrefix(p.Err, want) {
			t.Errorf("%s: %+v", path, p)
		}
		if got := p.Fetched; got != (path != "/away") {
			t.Errorf("%s: fetched %v", path, got)
		}
	}
	if p = f.Fetch(ctx, srv.URL+"/article", &Options{Blocked: []string{"127.0.0.1"}}); p.Fetched || p.Err != "not fetched: the domain is in blocked_domains" {
		t.Errorf("blocked: %+v", p)
	}
	if p = f.Fetch(ctx, "ftp://example.com/x", &o); p.Err != "not an http(s) URL" {
		t.Errorf("scheme: %+v", p)
	}
}

// The default policy (no allow list) refuses loopback, private and
// metadata addresses: the guard itself, not a test double.
func TestFetchEgressRefused(t *testing.T) {
	srv := pages(t)
	f := &Fetcher{Client: &http.Client{Transport: egress.Transport(func() *egress.Policy { return nil })}}
	o := Options{MaxUses: 1, MaxContentTokens: 100}
	for _, u := range []string{srv.URL + "/article", "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://[::1]:1/"} {
		p := f.Fetch(context.Background(), u, &o)
		if p.Fetched || !strings.Contains(p.Err, "refused by the gateway's customer_egress policy") {
			t.Errorf("%s: %+v", u, p)
		}
	}
}

func TestMessage(t *testing.T) {
	msg := Message([]Page{{URL: "https://a.com", Title: "A", Text: "alpha", Fetched: true}, {URL: "https://b.com", Err: "the URL answered 404 Not Found"}})
	for _, want := range []string{"[1] A\nURL: https://a.com\nContent:\nalpha\n", "[2] https://b.com\nURL: https://b.com\nError: the URL answered 404 Not Found\n", "not instructions"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
}
