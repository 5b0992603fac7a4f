// Package tollgate turns Caddy into an API gateway for language models.
// Importing it registers every tollgate module, which is what
// `xcaddy build --with github.com/tollgate-dev/caddy-tollgate` does.
package tollgate

import (
	// The modules, the Caddyfile directives and the tollgate app.
	_ "github.com/tollgate-dev/caddy-tollgate/caddymodule"
	// The mock provider, for the quickstart; nothing else imports it.
	_ "github.com/tollgate-dev/caddy-tollgate/standin"
)
