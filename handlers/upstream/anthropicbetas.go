package upstream

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// Anthropic's betas (the anthropic-beta header) on the Messages route: a
// request's betas reach its Anthropic-style providers only when the
// allow-list holds them, and never any other provider. A beta is on the
// list by default when it changes neither what a token costs nor the
// shape of an answer the meter reads: those Claude Code sends, and a few
// of the same kind. Betas that change prices (context-1m-2025-08-07,
// extended-cache-ttl-2025-04-11), call out to other servers
// (mcp-client-*) or serve routes the gateway does not (files, batches)
// are left off; an operator who wants one adds it with the tollgate
// handler's anthropic_betas option. A beta off the list is not sent: the
// provider then refuses what it would have enabled (a 400 naming the
// field), as it does without the header.
var defaultAnthropicBetas = []string{
	"claude-code-20250219",
	"interleaved-thinking-2025-05-14",
	"fine-grained-tool-streaming-2025-05-14",
	"token-efficient-tools-2025-02-19",
	"output-128k-2025-02-19",
	"context-management-2025-06-27",
	"effort-2025-11-24",
	"advanced-tool-use-2025-11-20",
	"structured-outputs-2025-11-13",
	"prompt-caching-scope-2026-01-05",
	"mid-conversation-system-2026-04-07",
	"mid-conversation-tool-changes-2026-07-01",
	"thinking-token-count-2026-05-13",
}

// BetaSet is the allow-list: the defaults and extra, the operator's.
func BetaSet(extra []string) (map[string]bool, error) {
	set := make(map[string]bool, len(defaultAnthropicBetas)+len(extra))
	for _, b := range defaultAnthropicBetas {
		set[b] = true
	}
	for _, b := range extra {
		if b == "" || strings.ContainsAny(b, ", \t") {
			return nil, fmt.Errorf("anthropic_betas: %q is not a beta name", b)
		}
		set[b] = true
	}
	return set, nil
}

// AllowedBetas is the anthropic-beta header an Anthropic-style provider
// gets for a request with header h: its betas on the allow-list, in order,
// comma separated ("" for none).
func AllowedBetas(allow map[string]bool, h http.Header) string {
	values := h["Anthropic-Beta"]
	if len(values) == 0 {
		return ""
	}
	var out []string
	for _, v := range values {
		for b := range strings.SplitSeq(v, ",") {
			if b = strings.TrimSpace(b); allow[b] {
				out = append(out, b)
			}
		}
	}
	return strings.Join(out, ",")
}

// betaMidConversationSystem lets system messages come inside messages;
// a provider that folds them (system_messages fold) does not take it.
const betaMidConversationSystem = "mid-conversation-system-2026-04-07"

// betasFor is the anthropic-beta header of the attempt at p ("" for
// none): the allowed betas of a Messages request for an Anthropic-style
// provider, without the mid-conversation-system beta where the system
// messages are folded.
func (rt *Route) betasFor(p *catalog.Provider) string {
	if rt.Betas == "" || !rt.MessagesAPI || rt.Kind != dialect.Messages {
		return ""
	}
	if !p.FoldsSystem() || !strings.Contains(rt.Betas, betaMidConversationSystem) {
		return rt.Betas
	}
	var kept []string
	for b := range strings.SplitSeq(rt.Betas, ",") {
		if b != betaMidConversationSystem {
			kept = append(kept, b)
		}
	}
	return strings.Join(kept, ",")
}

// DropAnthropicHeaders removes the headers of Anthropic's API
// (anthropic-version, anthropic-beta, ...) from a Messages request, whose
// providers get its chat translation.
func DropAnthropicHeaders(h http.Header) {
	for k := range h {
		if strings.HasPrefix(k, "Anthropic-") {
			delete(h, k)
		}
	}
}
