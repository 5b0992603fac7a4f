package handlers

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/pdftext/pdftest"
)

// A PDF part leaves the prompt's bound to the context window; the text
// the file parser made of it is bounded by its bytes.
func TestPromptBoundOfParsedFile(t *testing.T) {
	const text = "Revenue grew 12% in Q3."
	body := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Summarize:"},{"type":"file","file":{"filename":"q3.pdf","file_data":"data:application/pdf;base64,` +
		base64.StdEncoding.EncodeToString(pdftest.Build(text)) + `"}}]}]}`
	f, _ := reqbody.ParseObject([]byte(body))
	if b := prompt.NewBound(f, len(body), 1000); !b.Unbounded {
		t.Fatal("a file part should leave the bound to the context window")
	}
	out, parsed, apiErr := new(routing.Router).RewriteBody(new(pipeline.State), dialect.Chat, []byte(body), f, []upstream.Attempt{{}})
	if apiErr != nil || parsed == nil || !strings.Contains(string(out), text) {
		t.Fatalf("rewriteBody = %s, %v, %v", out, parsed, apiErr)
	}
	if b := prompt.NewBound(parsed, len(out), 1000); b.Unbounded || b.Tokens < int64(len(text)) {
		t.Fatalf("bound %+v for %d bytes of text", b, len(text))
	}
}
