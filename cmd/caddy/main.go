// Command caddy is Caddy with the tollgate plugin, as xcaddy would generate
// it from xcaddy.json, plus the demo provider that the quickstart's
// Caddyfile.example calls; it lets a machine without xcaddy build the
// gateway.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// plug in Caddy modules here
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/tollgate-dev/caddy-tollgate"

	// The demo: the mock provider and the search engines' stand-ins.
	_ "github.com/tollgate-dev/caddy-tollgate/standin"
)

func main() {
	caddycmd.Main()
}
