package caddymodule

// The dashboard's pages kept in their own packages, registered with the
// dashboard from their init.
import (
	_ "github.com/tollgate-dev/caddy-tollgate/dashboard/consent"
)
