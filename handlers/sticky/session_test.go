package sticky

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
)

func TestSessionID(t *testing.T) {
	long := strings.Repeat("a", 257)
	for _, c := range []struct {
		name, body, header, want, err string
	}{
		{"none", `{}`, "", "", ""},
		{"body", `{"session_id":"s-body"}`, "", "s-body", ""},
		{"header", `{}`, "s-header", "s-header", ""},
		{"the body wins", `{"session_id":"s-body"}`, "s-header", "s-body", ""},
		{"the body wins over a bad header", `{"session_id":"s-body"}`, long, "s-body", ""},
		{"an empty body's names none", `{"session_id":""}`, "s-header", "s-header", ""},
		{"header too long", `{}`, long, "", "x-session-id: expected at most 256 characters"},
		{"header at its bound", `{}`, strings.Repeat("é", 256), strings.Repeat("é", 256), ""},
		{"header with a control character", `{}`, "a\x01b", "", "x-session-id: control characters are not allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, apiErr := reqbody.ParseObject([]byte(c.body))
			if apiErr != nil {
				t.Fatal(apiErr)
			}
			h := http.Header{}
			if c.header != "" {
				h.Set("x-session-id", c.header)
			}
			got, apiErr := SessionID(f, h)
			gotErr := ""
			if apiErr != nil {
				gotErr = apiErr.Message
				if apiErr.Status != http.StatusBadRequest {
					t.Errorf("status %d, want 400", apiErr.Status)
				}
			}
			if got != c.want || gotErr != c.err {
				t.Fatalf("SessionID = %q, %q; want %q, %q", got, gotErr, c.want, c.err)
			}
		})
	}
}
