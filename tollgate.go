// Package tollgate turns Caddy into an API gateway for language models.
// Importing it registers every tollgate module, which is what
// `xcaddy build --with github.com/tollgate-dev/caddy-tollgate` does. The
// demo provider the quickstart uses is a package of its own (standin), so
// that a production build links none of it.
package tollgate

import (
	// The modules, the Caddyfile directives and the tollgate app.
	_ "github.com/tollgate-dev/caddy-tollgate/caddymodule"
)
