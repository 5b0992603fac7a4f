package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dashboard/oidc/testissuer"
)

const oidcSecret = "oidc-client-secret-never-logged-7f3a"

// TestOIDCOperatorAPI sets, shows and removes an organization's identity
// provider through the operator API: bad settings are 400s naming the
// field, the provider's discovery is checked before anything is stored,
// and the secret is never shown.
func TestOIDCOperatorAPI(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("")
	is := testissuer.New(t, "tollgate", oidcSecret)
	path := "/accounts/" + org.AccountID + "/oidc"

	c.operator("GET", path, nil).expectError(t, 404, "no identity provider")
	for _, tc := range []struct{ body, msg string }{
		{`{"client_id":"tollgate","client_secret":"x"}`, "issuer: must be a non-empty URL"},
		{`{"issuer":"http://idp.example.com","client_id":"tollgate","client_secret":"x"}`, "issuer: must use https"},
		{`{"issuer":"` + is.URL + `","client_secret":"x"}`, "client_id: must be a non-empty string"},
		{`{"issuer":"` + is.URL + `","client_id":"tollgate"}`, "client_secret: must be a non-empty string"},
		{`{"issuer":"` + is.URL + `","client_id":"tollgate","client_secret":"x","allowed_email_domains":"acme.com"}`, "allowed_email_domains: must be an array"},
		{`{"issuer":"` + is.URL + `","client_id":"tollgate","client_secret":"x","allowed_email_domains":["not a domain"]}`, "allowed_email_domains:"},
		{`{"issuer":"` + is.URL + `","client_id":"tollgate","client_secret":"x","scopes":["openid"]}`, "scopes: unknown field"},
		// Discovery fails: nothing answers there, or not as a provider.
		{`{"issuer":"http://127.0.0.1:1","client_id":"tollgate","client_secret":"x"}`, "issuer: its discovery document"},
		{`{"issuer":"` + is.URL + `/","client_id":"tollgate","client_secret":"x"}`, "issuer: the discovery document names issuer"},
	} {
		c.operator("PUT", path, tc.body).expectError(t, 400, tc.msg)
	}
	c.operator("GET", path, nil).expect(t, 404)

	set := c.operator("PUT", path, `{"issuer":"`+is.URL+`","client_id":"tollgate","client_secret":"`+oidcSecret+`","allowed_email_domains":["Example.com"]}`).expect(t, 201)
	d := set.JSON.Get("data")
	if d.Get("issuer").Str != is.URL || d.Get("client_id").Str != "tollgate" || d.Get("client_secret_label").Str != "****7f3a" ||
		d.Get("allowed_email_domains.0").Str != "example.com" || d.Get("redirect_path").Str != "/dashboard/signin/oidc/callback" ||
		d.Get("signin_path").Str != "/dashboard/signin/oidc?account="+org.AccountID {
		t.Fatalf("set: %s", set.Body)
	}
	// Changed without the secret: it is kept.
	c.operator("PUT", path, `{"issuer":"`+is.URL+`","client_id":"tollgate"}`).expect(t, 200)
	shown := c.operator("GET", path, nil).expect(t, 200)
	if strings.Contains(string(shown.Body), oidcSecret[:20]) || shown.JSON.Get("data.client_secret_label").Str != "****7f3a" ||
		shown.JSON.Get("data.allowed_email_domains.#").Int() != 0 {
		t.Fatalf("show: %s", shown.Body)
	}
	c.operator("POST", path, `{}`).expectError(t, 405, "")

	personal := c.newTenant("personal", "")
	c.operator("PUT", "/accounts/"+personal.AccountID+"/oidc", `{"issuer":"`+is.URL+`","client_id":"tollgate","client_secret":"x"}`).
		expectError(t, 400, "only organizations")
	c.operator("PUT", "/accounts/org_missing/oidc", `{}`).expectError(t, 404, "account org_missing not found")

	c.operator("DELETE", path, nil).expect(t, 200)
	c.operator("GET", path, nil).expect(t, 404)
	c.operator("DELETE", path, nil).expectError(t, 404, "no identity provider")
}

// TestOIDCCLIAndRestart sets the provider with `caddy tollgate oidc`, the
// secret read from a file; the settings survive kill -9, and the secret
// is in no log line.
func TestOIDCCLIAndRestart(t *testing.T) {
	p := startProcess(t, t.TempDir())
	is := testissuer.New(t, "tollgate", oidcSecret)
	acct := cli(t, p, "account", "create", "--name", "Acme", "--type", "organization").Get("data.id").Str
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(oidcSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set := cli(t, p, "oidc", "set", "--account", acct, "--issuer", is.URL, "--client-id", "tollgate",
		"--client-secret-file", secretFile, "--allowed-email-domain", "acme.com", "--allowed-email-domain", "corp.acme.com")
	if set.Get("data.client_secret_label").Str != "****7f3a" || set.Get("data.allowed_email_domains.#").Int() != 2 {
		t.Fatalf("oidc set: %s", set.Raw)
	}
	p.kill()
	p.start(t)
	shown := cli(t, p, "oidc", "show", "--account", acct)
	if shown.Get("data.issuer").Str != is.URL || shown.Get("data.client_id").Str != "tollgate" || strings.Contains(shown.Raw, oidcSecret) {
		t.Fatalf("oidc show after restart: %s", shown.Raw)
	}
	if del := cli(t, p, "oidc", "delete", "--account", acct); !del.Get("deleted").Bool() {
		t.Fatalf("oidc delete: %s", del.Raw)
	}
	if strings.Contains(p.log.String(), oidcSecret) {
		t.Fatal("the client secret is in the gateway's log")
	}
}
