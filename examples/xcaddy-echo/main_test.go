package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The gateway built with the example dialect, engine and plugin lists their
// modules and adapts a Caddyfile that uses them: a provider with `style
// echo` and its option, a web_search engine echo, the echo plugin with its header.
func TestBuiltWithExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "caddy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "list-modules").CombinedOutput()
	if err != nil {
		t.Fatalf("list-modules: %v\n%s", err, out)
	}
	for _, id := range []string{"tollgate.dialects.echo", "tollgate.dialects.openai", "tollgate.search_engines.echo", "tollgate.search_engines.exa",
		"tollgate.plugins.echo", "tollgate.plugins.response_healing"} {
		if !strings.Contains(string(out), id+"\n") {
			t.Errorf("module %s is not listed:\n%s", id, out)
		}
	}
	caddyfile := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(caddyfile, []byte(`{
	tollgate {
		model echo/m {
			pricing {
				prompt 0.000001
				completion 0.000002
			}
			provider echo https://echo.example/v1 {
				api_key {env.ECHO_KEY}
				style echo {
					greeting hello
				}
			}
		}
		web_search {
			default_engine echo
			engine echo {
				base_url https://echo.example
				api_key {env.ECHO_KEY}
			}
		}
	}
}

:8080 {
	tollgate {
		plugins {
			echo {
				header X-Echo-Value
			}
		}
	}
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "adapt", "--config", caddyfile).Output()
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, out)
	}
	app := gjson.GetBytes(out, "apps.tollgate")
	if app.Get("models.0.providers.0.dialect").Raw != `{"greeting":"hello","style":"echo"}` ||
		app.Get("web_search.engines.echo.base_url").Str != "https://echo.example" {
		t.Errorf("adapted %s", app.Raw)
	}
	if h := gjson.GetBytes(out, `apps.http.servers.srv0.routes.0.handle.0.plugins.echo`); h.Raw != `{"header":"X-Echo-Value"}` {
		t.Errorf("the echo plugin's configuration: %s\n%s", h.Raw, out)
	}
	// validate provisions the config: the gateway loads the echo plugin
	// with the rest, and refuses a plugin configured that it does not have.
	withData := strings.Replace(mustRead(t, caddyfile), "\ttollgate {\n", "\ttollgate {\n\t\tdata_dir "+filepath.Join(dir, "data")+"\n", 1)
	if err := os.WriteFile(caddyfile, []byte(withData), 0o600); err != nil {
		t.Fatal(err)
	}
	validate := exec.Command(bin, "validate", "--config", caddyfile)
	validate.Env = append(os.Environ(), "ECHO_KEY=k")
	if out, err := validate.CombinedOutput(); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	unknown := strings.Replace(withData, "echo {\n\t\t\t\theader", "nosuch {\n\t\t\t\theader", 1)
	if err := os.WriteFile(caddyfile, []byte(unknown), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "validate", "--config", caddyfile).CombinedOutput(); err == nil || !strings.Contains(string(out), "nosuch") {
		t.Errorf("an unknown plugin: %v\n%s", err, out)
	}
	if err := os.WriteFile(caddyfile, []byte(withData), 0o600); err != nil {
		t.Fatal(err)
	}
	// A greeting the module's Validate refuses is refused at adapt time.
	bad := strings.Replace(mustRead(t, caddyfile), "greeting hello", "greeting "+strings.Repeat("o", 65), 1)
	if err := os.WriteFile(caddyfile, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "adapt", "--config", caddyfile).CombinedOutput(); err == nil || !strings.Contains(string(out), "greeting: at most 64 bytes") {
		t.Errorf("a bad greeting: %v\n%s", err, out)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
