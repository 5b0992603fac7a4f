package dashboard

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestCaddyfile(t *testing.T) {
	d := new(Dashboard)
	in := "tollgate_dashboard /admin/ui {\n\tsession_ttl 2h\n\tsignin_attempts 5\n}"
	if err := d.UnmarshalCaddyfile(caddyfile.NewTestDispenser(in)); err != nil {
		t.Fatal(err)
	}
	if d.Prefix != "/admin/ui" || d.SessionTTL != caddy.Duration(2*time.Hour) || d.SignInAttempts != 5 {
		t.Fatalf("parsed %+v", d)
	}
	for in, want := range map[string]string{
		"tollgate_dashboard /a /b":                     "wrong argument count",
		"tollgate_dashboard {\n\tsession_ttl soon\n}":  "session_ttl",
		"tollgate_dashboard {\n\tsignin_attempts 0\n}": "signin_attempts",
		"tollgate_dashboard {\n\tsesion_ttl 1h\n}":     "expected session_ttl or signin_attempts",
	} {
		err := new(Dashboard).UnmarshalCaddyfile(caddyfile.NewTestDispenser(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	for _, prefix := range []string{"dashboard", "/"} {
		if err := (&Dashboard{Prefix: prefix}).Validate(); err == nil || !strings.Contains(err.Error(), "prefix") {
			t.Errorf("prefix %q: %v", prefix, err)
		}
	}
}
