package caddymodule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
)

func TestProviderDataPolicyFromCaddyfile(t *testing.T) {
	app := provisioned(t, adaptApp(t, `	tollgate {
		model acme/m {
			pricing {
				prompt 0
				completion 0
			}
			provider plain http://127.0.0.1:1/v1
			provider zdr http://127.0.0.1:2/v1 {
				zdr
				region europe
			}
			provider private http://127.0.0.1:3/v1 {
				data_collection deny
				publication allow
				region us
			}
			provider public http://127.0.0.1:4/v1 {
				data_collection allow
				publication deny
				region global
			}
		}
	}`))
	m, ok := app.Catalog().Lookup("acme/m")
	if !ok || len(m.Providers) != 4 {
		t.Fatalf("model = %+v", m)
	}
	want := []catalog.DataPolicy{
		{},
		{ZDR: true, NoDataCollection: true, NoPublication: true, Region: "europe"},
		{NoDataCollection: true, Region: "us"},
		{NoPublication: true, Region: "global"},
	}
	for i, p := range m.Providers {
		if p.DataPolicy != want[i] {
			t.Errorf("provider %s: data policy %+v, want %+v", p.Name, p.DataPolicy, want[i])
		}
	}
}

func TestProviderDataPolicyFromModelsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "models.json")
	file := `{"data":[{"id":"acme/f","pricing":{"prompt":"0","completion":"0"},"tollgate":{"providers":[
		{"name":"a","base_url":"http://127.0.0.1:1/v1","zdr":true,"region":"us"},
		{"name":"b","base_url":"http://127.0.0.1:2/v1","data_collection":"deny","publication":"deny"},
		{"name":"c","base_url":"http://127.0.0.1:3/v1"}]}}]}`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	app := provisioned(t, &App{ModelsFile: path})
	m, _ := app.Catalog().Lookup("acme/f")
	want := []catalog.DataPolicy{
		{ZDR: true, NoDataCollection: true, NoPublication: true, Region: "us"},
		{NoDataCollection: true, NoPublication: true},
		{},
	}
	for i, p := range m.Providers {
		if p.DataPolicy != want[i] {
			t.Errorf("provider %s: data policy %+v, want %+v", p.Name, p.DataPolicy, want[i])
		}
	}
}

func TestProviderDataPolicyErrors(t *testing.T) {
	ok := PricingConfig{Prompt: "0", Completion: "0"}
	for _, tt := range []struct {
		p    ProviderConfig
		want string
	}{
		{ProviderConfig{DataCollection: "maybe"}, `model "m": provider "p": data_collection: expected allow or deny, got "maybe"`},
		{ProviderConfig{Publication: "no"}, `model "m": provider "p": publication: expected allow or deny, got "no"`},
		{ProviderConfig{ZDR: true, DataCollection: "allow"}, `model "m": provider "p": data_collection: allow contradicts zdr`},
		{ProviderConfig{ZDR: true, Publication: "allow"}, `model "m": provider "p": publication: allow contradicts zdr`},
		{ProviderConfig{Region: "asia"}, `model "m": provider "p": region: expected global, europe or us, got "asia"`},
	} {
		tt.p.Name, tt.p.BaseURL = "p", "http://127.0.0.1:1/v1"
		app := &App{DataDir: t.TempDir(), Models: []ModelConfig{{ID: "m", Pricing: ok, Providers: []ProviderConfig{tt.p}}}}
		if err := app.Provision(appContext(t)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: Provision = %v, want %q", tt.p, err, tt.want)
		}
	}
	path := filepath.Join(t.TempDir(), "models.json")
	file := `{"data":[{"id":"f","pricing":{"prompt":"0","completion":"0"},"tollgate":{"providers":[{"name":"p","base_url":"http://x","region":"mars"}]}}]}`
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	app := &App{DataDir: t.TempDir(), ModelsFile: path}
	if err := app.Provision(appContext(t)); err == nil || !strings.Contains(err.Error(), `model "f": tollgate: provider "p": region: expected`) {
		t.Errorf("models_file: Provision = %v", err)
	}

	for _, tt := range []struct{ block, want string }{
		{"zdr yes", "wrong argument count"},
		{"data_collection", "wrong argument count"},
		{"data_collection maybe", `provider "p": data_collection: expected allow or deny`},
		{"publication allow\n zdr", `provider "p": publication: allow contradicts zdr`},
		{"region", "wrong argument count"},
		{"region mars", `provider "p": region: expected global, europe or us`},
	} {
		caddyfile := "{\n tollgate {\n model m {\n provider p http://x {\n " + tt.block + "\n }\n }\n }\n}\n\n:8080 {\n\ttollgate\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.block, err, tt.want)
		}
	}
}
