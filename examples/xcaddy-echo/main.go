// Command xcaddy-echo is Caddy with the tollgate plugin and the example
// third-party dialect, search engine and plugin, as `xcaddy build --with
// github.com/tollgate-dev/caddy-tollgate --with
// .../examples/dialect-echo --with .../examples/engine-echo --with
// .../examples/plugin-echo` generates it: each is one import line,
// nothing else changes.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"
	_ "github.com/tollgate-dev/caddy-tollgate"

	_ "github.com/tollgate-dev/caddy-tollgate/examples/dialect-echo"
	_ "github.com/tollgate-dev/caddy-tollgate/examples/engine-echo"
	_ "github.com/tollgate-dev/caddy-tollgate/examples/plugin-echo"
)

func main() {
	caddycmd.Main()
}
