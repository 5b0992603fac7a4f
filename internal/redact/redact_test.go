package redact

import (
	"strings"
	"testing"
)

func TestSecrets(t *testing.T) {
	const key = "sk-proj-abc123DEF456ghi789JKL/xyz"
	cases := []string{
		"Incorrect API key provided: " + key,
		"Incorrect API key provided: Bearer " + key,
		"Incorrect API key provided: " + key[:14] + "..." + key[len(key)-4:],
		`{"error":{"message":"bad key ` + strings.ReplaceAll(key, "/", `\/`) + `"}}`,
		"key ends in " + key[len(key)-10:],
	}
	for _, c := range cases {
		got := Secrets(c, key, "")
		if !strings.Contains(got, Mark) {
			t.Errorf("%q: nothing Mark: %q", c, got)
		}
		for i := 0; i+MinRun <= len(key); i++ {
			if strings.Contains(got, key[i:i+MinRun]) {
				t.Errorf("%q: %q still holds %q", c, got, key[i:i+MinRun])
			}
		}
	}
	if got := Secrets("Incorrect API key provided: Bearer "+key, key); got != "Incorrect API key provided: Bearer "+Mark {
		t.Errorf("whole key: %q", got)
	}
	// Text that shares no run of 8 characters with a secret is untouched,
	// and so is a secret too short to tell from ordinary words.
	for _, c := range []string{"The model is overloaded", "sk-proj", ""} {
		if got := Secrets(c, key, "k"); got != c {
			t.Errorf("%q changed: %q", c, got)
		}
	}
	if got := Secrets("short key abcdef given", "abcdef"); got != "short key "+Mark+" given" {
		t.Errorf("short key: %q", got)
	}
}
