package handlers

// The provider dialects (style in a provider block): each registers its
// Caddy module in namespace tollgate.dialects. A new dialect is its
// package and one line here (or xcaddy's --with).
import (
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/bedrock"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/gemini"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/openai"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/rerank"
)
