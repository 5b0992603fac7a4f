package handlers

import (

	// The built-in plugins: each registers its module.
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/autorouter"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/contextcompression"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/fileparser"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/moderation"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/responsehealing"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/webfetch"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/websearch"
)
