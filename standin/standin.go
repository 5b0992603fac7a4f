// Package standin holds the stand-ins of the upstreams a gateway talks to:
// the mock provider (package mockprovider) and the search APIs (package
// searchapis). The quickstart, the demos and the tests run against them;
// nothing on the production path imports them. cmd/caddy imports this
// package so that the quickstart's build has the demo provider; an xcaddy
// build adds it with `--with github.com/tollgate-dev/caddy-tollgate/standin`.
//
// Importing standin plugs the mock provider into the Caddyfile: its
// directive is ordered after the tollgate pipeline's, as the upstream it
// stands in for would answer. Both orders are "before reverse_proxy", so
// the one registered last comes later; this package imports caddymodule,
// which Go therefore initializes first.
package standin

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	_ "github.com/tollgate-dev/caddy-tollgate/caddymodule"
	"github.com/tollgate-dev/caddy-tollgate/standin/mockprovider"
)

func init() {
	httpcaddyfile.RegisterDirectiveOrder(mockprovider.Directive, httpcaddyfile.Before, "reverse_proxy")
}
