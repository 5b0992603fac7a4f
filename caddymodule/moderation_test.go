package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/moderation"
)

func TestModerationCaddyfile(t *testing.T) {
	app := adaptApp(t, `	tollgate {
		moderation {
			base_url https://api.openai.com/v1
			api_key {env.OPENAI_KEY}
			model omni-moderation-latest
			name OpenAI
			timeout 5s
			price 0.0001
			fail_open
		}
		model m {
			moderation
			pricing {
				prompt 0
				completion 0
			}
		}
	}`)
	want := moderation.Config{BaseURL: "https://api.openai.com/v1", APIKey: "{env.OPENAI_KEY}", Model: "omni-moderation-latest",
		Name: "OpenAI", Timeout: caddy.Duration(5 * time.Second), FailOpen: true, Price: "0.0001"}
	if app.Moderation == nil || *app.Moderation != want {
		t.Fatalf("moderation = %+v", app.Moderation)
	}
	if len(app.Models) != 1 || !app.Models[0].Moderation {
		t.Fatalf("model switch: %+v", app.Models)
	}
	p := provisioned(t, app)
	if p.ModerationService() == nil || !p.catalog.Models()[0].Moderation {
		t.Fatal("not provisioned")
	}

	for _, tt := range []struct{ global, want string }{
		{"tollgate {\n moderation {\n model x\n }\n}", "moderation: base_url is required"},
		{"tollgate {\n moderation {\n base_url http://x\n level 3\n }\n}", `unrecognized moderation option "level"`},
		{"tollgate {\n moderation {\n base_url http://x\n fail_open yes\n }\n}", "wrong argument count"},
		{"tollgate {\n model a {\n moderation on\n }\n}", "wrong argument count"},
		{"tollgate {\n moderation {\n base_url http://x\n price -0.001\n }\n}", "moderation: price: expected a non-negative decimal"},
		{"tollgate {\n moderation {\n base_url http://x\n price abc\n }\n}", "moderation: price:"},
		{"tollgate {\n moderation {\n base_url http://x\n price 0.0000000001\n }\n}", "at most 9 decimal places"},
	} {
		caddyfile := "{\n" + tt.global + "\n}\n\n:8080 {\n\ttollgate\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.global, err, tt.want)
		}
	}
	if _, err := (&moderation.Config{BaseURL: "ftp://x"}).Build(nil); err == nil {
		t.Error("ftp base_url accepted")
	}
	// JSON configs, which skip the Caddyfile, are checked at provision.
	if _, err := (&moderation.Config{BaseURL: "http://x", Price: "-1"}).Build(nil); err == nil || !strings.Contains(err.Error(), "moderation: price") {
		t.Errorf("negative price: %v", err)
	}
}
