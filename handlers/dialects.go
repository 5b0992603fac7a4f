package handlers

// The provider dialects (style in a provider block): each registers itself
// with handlers/dialect. A new dialect is its package and one line here.
import (
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/dialect/anthropic"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/dialect/bedrock"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/dialect/gemini"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/dialect/openai"
)
