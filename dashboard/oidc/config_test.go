package oidc

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testissuer"
)

func TestSettingsCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    Settings
		field string
	}{
		{"ok https", Settings{Issuer: "https://idp.example.com/tenant", ClientID: "c"}, ""},
		{"ok loopback http", Settings{Issuer: "http://127.0.0.1:8080", ClientID: "c"}, ""},
		{"ok localhost", Settings{Issuer: "http://localhost:8080", ClientID: "c"}, ""},
		{"empty issuer", Settings{ClientID: "c"}, "issuer"},
		{"http elsewhere", Settings{Issuer: "http://idp.example.com", ClientID: "c"}, "issuer"},
		{"not a url", Settings{Issuer: "idp.example.com", ClientID: "c"}, "issuer"},
		{"ftp", Settings{Issuer: "ftp://idp.example.com", ClientID: "c"}, "issuer"},
		{"userinfo", Settings{Issuer: "https://u:p@idp.example.com", ClientID: "c"}, "issuer"},
		{"query", Settings{Issuer: "https://idp.example.com/?x=1", ClientID: "c"}, "issuer"},
		{"no client id", Settings{Issuer: "https://idp.example.com"}, "client_id"},
		{"control chars", Settings{Issuer: "https://idp.example.com", ClientID: "a\nb"}, "client_id"},
		{"secret control", Settings{Issuer: "https://idp.example.com", ClientID: "c", ClientSecret: "a\x00"}, "client_secret"},
		{"bad domain", Settings{Issuer: "https://idp.example.com", ClientID: "c", AllowedDomains: []string{"@acme"}}, "allowed_email_domains"},
		{"ok domains", Settings{Issuer: "https://idp.example.com", ClientID: "c", AllowedDomains: []string{"Acme.COM", "acme.com"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			fe := in.Check()
			switch {
			case tc.field == "" && fe != nil:
				t.Fatalf("refused: %v", fe)
			case tc.field != "" && (fe == nil || fe.Field != tc.field):
				t.Fatalf("got %v, want a refusal of %s", fe, tc.field)
			}
			if tc.name == "ok domains" && (len(in.AllowedDomains) != 1 || in.AllowedDomains[0] != "acme.com") {
				t.Fatalf("domains %v", in.AllowedDomains)
			}
		})
	}
}

func TestStorePutSealsAndPersists(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.Open(storage.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	org, _ := st.CreateAccount(storage.NewAccount{Name: "Acme", Kind: storage.AccountOrganization})
	personal, _ := st.CreateAccount(storage.NewAccount{Name: "Me", Kind: storage.AccountPersonal})
	sealer := testSealer(t)
	s := StoreOf(st)
	in := Settings{Issuer: "https://idp.example.com", ClientID: "c"}
	if _, _, err := s.Put(org.ID, in, sealer); !errors.Is(err, storage.ErrInvalid) || !strings.Contains(err.Error(), "client_secret") {
		t.Fatalf("first put without a secret: %v", err)
	}
	if _, _, err := s.Put(personal.ID, Settings{Issuer: "https://idp.example.com", ClientID: "c", ClientSecret: "x"}, sealer); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("personal account: %v", err)
	}
	if _, _, err := s.Put("org_missing", Settings{Issuer: "https://idp.example.com", ClientID: "c", ClientSecret: "x"}, sealer); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown account: %v", err)
	}
	if _, _, err := s.Put(org.ID, Settings{Issuer: "https://idp.example.com", ClientID: "c", ClientSecret: "x"}, nil); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("no sealer: %v", err)
	}
	in.ClientSecret = "the-client-secret-value-1234"
	c, created, err := s.Put(org.ID, in, sealer)
	if err != nil || !created || c.SecretLabel != "****1234" {
		t.Fatalf("put: %+v %v %v", c, created, err)
	}
	if bytes.Contains(c.SealedSecret, []byte("the-client-secret")) {
		t.Fatal("secret stored in clear")
	}
	// An update without a secret keeps it.
	in.ClientSecret, in.ClientID = "", "c2"
	if c, created, err = s.Put(org.ID, in, sealer); err != nil || created {
		t.Fatalf("update: %v %v", created, err)
	}
	st.Close()

	st, err = storage.Open(storage.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s = StoreOf(st)
	got, ok := s.Config(org.ID)
	if !ok || got.ClientID != "c2" || got.Issuer != "https://idp.example.com" {
		t.Fatalf("after reopening: %+v %v", got, ok)
	}
	if secret, err := got.ClientSecret(sealer); err != nil || secret != "the-client-secret-value-1234" {
		t.Fatalf("secret %q %v", secret, err)
	}
	// Sealed for this organization only.
	moved := got
	moved.AccountID = "org_other"
	if _, err := moved.ClientSecret(sealer); err == nil {
		t.Fatal("a secret opened for another organization")
	}
	if err := s.Delete(org.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Config(org.ID); ok {
		t.Fatal("deleted settings still there")
	}
	if err := s.Delete(org.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestDiscover(t *testing.T) {
	is := testissuer.New(t, "c", "s")
	ctx := context.Background()
	if _, err := Discover(ctx, NewHTTPClient(), is.URL); err != nil {
		t.Fatal(err)
	}
	// Another issuer than the document names.
	if _, err := Discover(ctx, NewHTTPClient(), is.URL+"/"); err == nil || !strings.Contains(err.Error(), "names issuer") {
		t.Fatalf("mismatch: %v", err)
	}
	// Not a provider.
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	if _, err := Discover(ctx, NewHTTPClient(), plain.URL); err == nil || !strings.Contains(err.Error(), "discovery document") {
		t.Fatalf("no discovery: %v", err)
	}
	// A document pointing at a plain-http endpoint off the host.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"http://` + r.Host + `","authorization_endpoint":"http://idp.example.com/a","token_endpoint":"http://` + r.Host + `/t","jwks_uri":"http://` + r.Host + `/k"}`))
	}))
	defer bad.Close()
	if _, err := Discover(ctx, NewHTTPClient(), bad.URL); err == nil || !strings.Contains(err.Error(), "authorization_endpoint") {
		t.Fatalf("http endpoint: %v", err)
	}
	// A huge answer is cut off.
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte(" "), 2*maxIdPBody))
	}))
	defer huge.Close()
	if _, err := Discover(ctx, NewHTTPClient(), huge.URL); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("huge: %v", err)
	}
}

// Two replicas on one Redis: settings set on one are used by the other,
// and removed there too.
func TestSettingsShareAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	open := func() *storage.Store {
		st, err := storage.Open(storage.Options{Redis: &kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "oidc:"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	a, b := open(), open()
	acct, err := a.CreateAccount(storage.NewAccount{Name: "Acme", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%s: not within 5s", what)
			}
		}
	}
	until("account on b", func() bool { _, ok := b.Account(acct.ID); return ok })
	sealer := testSealer(t)
	if _, _, err := StoreOf(a).Put(acct.ID, Settings{Issuer: "https://idp.example.com", ClientID: "c", ClientSecret: "secret-on-a-0000"}, sealer); err != nil {
		t.Fatal(err)
	}
	until("settings on b", func() bool {
		c, ok := StoreOf(b).Config(acct.ID)
		secret, err := c.ClientSecret(sealer)
		return ok && err == nil && secret == "secret-on-a-0000"
	})
	if err := StoreOf(b).Delete(acct.ID); err != nil {
		t.Fatal(err)
	}
	until("removal on a", func() bool { _, ok := StoreOf(a).Config(acct.ID); return !ok })
}

func TestConfigureChecksDiscoveryFirst(t *testing.T) {
	st, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	org, _ := st.CreateAccount(storage.NewAccount{Name: "Acme", Kind: storage.AccountOrganization})
	personal, _ := st.CreateAccount(storage.NewAccount{Name: "Me", Kind: storage.AccountPersonal})
	is := testissuer.New(t, "c", "s")
	sealer, client, ctx := testSealer(t), NewHTTPClient(), context.Background()
	field := func(err error) string {
		var fe *FieldError
		if errors.As(err, &fe) {
			return fe.Field
		}
		return ""
	}
	good := Settings{Issuer: is.URL, ClientID: "c", ClientSecret: "s"}
	down := good
	down.Issuer = "http://127.0.0.1:1"
	if _, _, err := Configure(ctx, st, org.ID, down, sealer, client); field(err) != "issuer" {
		t.Fatalf("unreachable issuer: %v", err)
	}
	if _, ok := StoreOf(st).Config(org.ID); ok {
		t.Fatal("stored despite a failed discovery")
	}
	if _, _, err := Configure(ctx, st, personal.ID, good, sealer, client); field(err) != "account" {
		t.Fatalf("personal: %v", err)
	}
	if _, _, err := Configure(ctx, st, "org_missing", good, sealer, client); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	if _, _, err := Configure(ctx, st, org.ID, good, nil, client); !errors.Is(err, ErrNoSealer) {
		t.Fatalf("no sealer: %v", err)
	}
	c, created, err := Configure(ctx, st, org.ID, good, sealer, client)
	if err != nil || !created || c.View().RedirectPath != "/dashboard/signin/oidc/callback" || c.View().AllowedDomains == nil {
		t.Fatalf("%+v %v %v", c, created, err)
	}
}
