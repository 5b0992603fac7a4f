package caddymodule

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

func TestBYOKEncryptionKey(t *testing.T) {
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))
	app := adaptApp(t, "\ttollgate {\n\t\tbyok_encryption_key {env.TOLLGATE_TEST_BYOK_KEY}\n\t}")
	if app.BYOKKey != "{env.TOLLGATE_TEST_BYOK_KEY}" {
		t.Fatalf("adapted byok_encryption_key = %q", app.BYOKKey)
	}
	// unset: BYOK is off
	if provisioned(t, app).BYOKSealer() != nil {
		t.Fatal("a sealer without a key")
	}
	t.Setenv("TOLLGATE_TEST_BYOK_KEY", key)
	s := provisioned(t, adaptApp(t, "\ttollgate {\n\t\tbyok_encryption_key {env.TOLLGATE_TEST_BYOK_KEY}\n\t}")).BYOKSealer()
	if s == nil {
		t.Fatal("no sealer")
	}
	sealed := s.Seal([]byte("x"), []byte("id"))
	if pt, err := provisioned(t, &App{BYOKKey: key}).BYOKSealer().Open(sealed, []byte("id")); err != nil || string(pt) != "x" {
		t.Fatalf("same key, other app: %q %v", pt, err)
	}

	for _, bad := range []string{"not base64!", base64.StdEncoding.EncodeToString(make([]byte, 16)), base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 32))} {
		app := &App{BYOKKey: bad, DataDir: t.TempDir()}
		err := app.Provision(appContext(t))
		if err == nil || !strings.Contains(err.Error(), "byok_encryption_key: expected 32 bytes in standard base64") {
			t.Fatalf("%q: %v", bad, err)
		}
		if strings.Contains(err.Error(), bad) {
			t.Fatalf("error shows the key: %v", err)
		}
	}
	_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("{\n\ttollgate {\n\t\tbyok_encryption_key\n\t}\n}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "wrong argument count") {
		t.Fatalf("missing argument: %v", err)
	}
}
