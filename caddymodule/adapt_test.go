package caddymodule

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// adaptCase is one testdata/adapt/*.caddyfiletest file: a Caddyfile, a line
// of ten dashes, then either the exact JSON it adapts to or, when that part
// does not start with '{', the error message it must fail with.
type adaptCase struct {
	caddyfile string
	expected  string
}

var newlines = regexp.MustCompile(`\r?\n`)

func readAdaptCase(t *testing.T, path string) adaptCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := newlines.ReplaceAllString(string(data), "\n")
	caddyfile, expected, ok := strings.Cut(text, "\n----------\n")
	if !ok {
		t.Fatalf("%s: no ---------- separator line", path)
	}
	return adaptCase{caddyfile: strings.TrimSpace(caddyfile) + "\n", expected: strings.TrimSpace(expected)}
}

// TestCaddyfileAdapt adapts every golden Caddyfile. Regenerate a golden
// with `go run ./cmd/caddy adapt --config F --adapter caddyfile --pretty`
// and review the diff before saving it.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/adapt/*.caddyfiletest")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d golden files", len(files))
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".caddyfiletest"), func(t *testing.T) {
			tc := readAdaptCase(t, path)
			if strings.HasPrefix(tc.expected, "{") {
				if !caddytest.CompareAdapt(t, path, tc.caddyfile, "caddyfile", tc.expected) {
					t.Errorf("%s does not adapt to its golden JSON (diff above)", path)
				}
				return
			}
			_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(tc.caddyfile), nil)
			if err == nil {
				t.Fatalf("adapted without error; want %q", tc.expected)
			}
			if got := newlines.ReplaceAllString(err.Error(), "\n"); got != tc.expected {
				t.Errorf("error = %q\nwant    %q", got, tc.expected)
			}
		})
	}
}

// TestCaddyfileExample adapts ../Caddyfile.example as read from disk and
// checks it against the golden that imports it.
func TestCaddyfileExample(t *testing.T) {
	example, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	golden := readAdaptCase(t, "testdata/adapt/caddyfile_example.caddyfiletest")
	if !strings.Contains(golden.caddyfile, "\nimport ../Caddyfile.example\n") {
		t.Fatalf("the example golden must import ../Caddyfile.example, not a copy of it")
	}
	if !caddytest.CompareAdapt(t, "Caddyfile.example", string(example), "caddyfile", golden.expected) {
		t.Error("Caddyfile.example does not adapt to testdata/adapt/caddyfile_example.caddyfiletest (diff above)")
	}
}

// adaptApps adapts a Caddyfile and returns its apps.
func adaptApps(t *testing.T, caddyfile string) map[string]json.RawMessage {
	t.Helper()
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps map[string]json.RawMessage `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Apps
}

// TestGlobalOptionDecodes checks that the adapted app JSON decodes into the
// App the option described, with amounts exact.
func TestGlobalOptionDecodes(t *testing.T) {
	apps := adaptApps(t, readAdaptCase(t, "testdata/adapt/global_option_full.caddyfiletest").caddyfile)
	var app App
	if err := json.Unmarshal(apps[gateway.AppName], &app); err != nil {
		t.Fatal(err)
	}
	want := gateway.FreeModelLimits{PerMinute: 5, PerDay: 40, PerDayPaid: 900, PaidThreshold: 12_500_000_000}
	if app.DataDir != "/var/lib/tollgate" || app.BrandName != "acme-gw_2" ||
		time.Duration(app.GCInterval) != 90*time.Second || app.FreeModel != want {
		t.Errorf("app = data_dir %q brand %q gc %v free_model %+v", app.DataDir, app.BrandName, time.Duration(app.GCInterval), app.FreeModel)
	}
}

func TestAppProvisionDefaults(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name  string
		app   *App
		brand string
		gc    time.Duration
		free  gateway.FreeModelLimits
		dir   string
	}{
		{
			name: "defaults", app: &App{DataDir: dir},
			brand: "service", gc: 5 * time.Minute,
			free: gateway.FreeModelLimits{PerMinute: 20, PerDay: 50, PerDayPaid: 1000, PaidThreshold: 9 * money.AmountScale},
			dir:  dir,
		},
		{
			name: "set", app: &App{DataDir: dir + "/sub/", BrandName: "acme", GCInterval: caddy.Duration(time.Hour),
				FreeModel: gateway.FreeModelLimits{PerDay: 3, PaidThreshold: 1}},
			brand: "acme", gc: time.Hour,
			free: gateway.FreeModelLimits{PerMinute: 20, PerDay: 3, PerDayPaid: 1000, PaidThreshold: 1},
			dir:  filepath.Join(dir, "sub"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := tt.app
			if err := app.Provision(appContext(t)); err != nil {
				t.Fatal(err)
			}
			if app.Brand() != tt.brand || time.Duration(app.GCInterval) != tt.gc || app.FreeModelLimits() != tt.free || app.dir != tt.dir {
				t.Errorf("provisioned brand %q gc %v free %+v dir %q", app.Brand(), time.Duration(app.GCInterval), app.FreeModelLimits(), app.dir)
			}
			if err := app.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestAppValidateBrand(t *testing.T) {
	tests := []struct {
		brand string
		ok    bool
	}{
		{"service", true},
		{"acme-gw_2", true},
		{"0", true},
		{"", true}, // Provision fills in the default
		{"Service", false},
		{"acme gw", false},
		{"acme.gw", false},
		{"acme/gw", false},
		{"acme:", false},
		{"café", false},
		{"{env.BRAND}", false},
	}
	for _, tt := range tests {
		err := (&App{BrandName: tt.brand}).Validate()
		if tt.ok {
			if err != nil {
				t.Errorf("Validate(brand %q) = %v, want nil", tt.brand, err)
			}
			continue
		}
		want := `brand "` + tt.brand + `": only lowercase letters, digits, '-' and '_' are allowed`
		if err == nil || err.Error() != want {
			t.Errorf("Validate(brand %q) = %v, want %q", tt.brand, err, want)
		}
	}
}

// TestBadBrandAdaptsButFailsValidation: the adapter does not check the
// brand; the app's Validate does, when the config loads.
func TestBadBrandAdaptsButFailsValidation(t *testing.T) {
	apps := adaptApps(t, "{\n\ttollgate {\n\t\tbrand Bad!\n\t}\n}\n\n:8080 {\n\ttollgate\n}\n")
	var app App
	if err := json.Unmarshal(apps[gateway.AppName], &app); err != nil {
		t.Fatal(err)
	}
	if err := app.Provision(appContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := app.Validate(); err == nil || !strings.Contains(err.Error(), `brand "Bad!"`) {
		t.Errorf("Validate = %v, want a brand error", err)
	}
}
