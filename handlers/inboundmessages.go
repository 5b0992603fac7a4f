package handlers

import (
	"net/http"
	"strings"
)

// anthropicAPIKey is the key of a Messages request sent as Anthropic's
// SDKs and Claude Code send an API key: "X-Api-Key: <key>" (with an auth
// token they send "Authorization: Bearer", which bearer reads).
func anthropicAPIKey(r *http.Request) (string, bool) {
	key := strings.TrimSpace(r.Header.Get("X-Api-Key"))
	return key, key != ""
}
