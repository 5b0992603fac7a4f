package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The gateway built with the example dialect and engine lists their
// modules and adapts a Caddyfile that uses them: a provider with `style
// echo` and its option, a web_search engine echo.
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
	for _, id := range []string{"tollgate.dialects.echo", "tollgate.dialects.openai", "tollgate.search_engines.echo", "tollgate.search_engines.exa"} {
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
	tollgate
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
