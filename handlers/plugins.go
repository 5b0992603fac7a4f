package handlers

// The built-in plugins (package plugin): each registers its module.
import (
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/fileparser"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/responsehealing"
)
