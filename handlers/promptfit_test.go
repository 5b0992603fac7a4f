package handlers

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// The prompt's counting stops when the request's context ends (the client
// left): a 499, no count kept.
func TestCountPromptStopsWithTheRequest(t *testing.T) {
	enc, _ := tokenizer.Get(tokenizer.O200kBase)
	m := &catalog.Model{ID: "openai/m", ContextLength: 1 << 30, Tokenizer: enc}
	body := []byte(`{"model":"openai/m","messages":[{"role":"user","content":"` + strings.Repeat("many words here ", 20000) + `"}]}`)
	rt := &upstream.Route{Kind: "chat", Body: body, Attempts: []upstream.Attempt{{Model: m, Provider: &catalog.Provider{}}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if apiErr := rt.CountPrompt(ctx, prompt.DefaultMediaPartTokens); apiErr == nil || apiErr.Status != 499 {
		t.Fatalf("canceled: %v", apiErr)
	}
	if apiErr := rt.CountPrompt(context.Background(), prompt.DefaultMediaPartTokens); apiErr != nil {
		t.Fatal(apiErr)
	}
	if c, ok := rt.Prompt.Of(m); !ok || c.Tokens < 60000 {
		t.Fatalf("count %+v", c)
	}
}

// Counting stops past the largest context window the prompt could go
// to: a prompt of megabytes for models of small windows is refused after
// counting a little past them, its count named as a lower bound; a model
// without a stated window has it counted whole.
func TestCountPromptStopsPastTheWindows(t *testing.T) {
	enc, _ := tokenizer.Get(tokenizer.O200kBase)
	small := &catalog.Model{ID: "openai/small", ContextLength: 1000, Tokenizer: enc}
	smaller := &catalog.Model{ID: "openai/smaller", ContextLength: 500, Tokenizer: enc}
	body := []byte(`{"model":"openai/small","messages":[{"role":"user","content":"` + strings.Repeat("many words here ", 1<<18) + `"}]}`)
	rt := &upstream.Route{Kind: "chat", Body: body, Attempts: []upstream.Attempt{{Model: small, Provider: &catalog.Provider{}}, {Model: smaller, Provider: &catalog.Provider{}}}}
	apiErr := rt.CountPrompt(context.Background(), prompt.DefaultMediaPartTokens)
	if apiErr == nil || apiErr.Status != 400 || !strings.HasPrefix(apiErr.Message, "messages: the prompt has over ") {
		t.Fatalf("refusal %v", apiErr)
	}
	if c, _ := rt.Prompt.Of(small); !c.Partial || c.Tokens <= 1000 || c.Tokens > 64<<10 {
		t.Fatalf("count %+v", c)
	}
	unknown := &catalog.Model{ID: "openai/unknown", Tokenizer: enc}
	rt = &upstream.Route{Kind: "chat", Body: body, Attempts: []upstream.Attempt{{Model: small, Provider: &catalog.Provider{}}, {Model: unknown, Provider: &catalog.Provider{}}}}
	if apiErr := rt.CountPrompt(context.Background(), prompt.DefaultMediaPartTokens); apiErr != nil {
		t.Fatal(apiErr)
	}
	if c, _ := rt.Prompt.Of(unknown); c.Partial || c.Tokens < 3<<18 {
		t.Fatalf("count %+v", c)
	}
}
