package routing

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/egress"
)

// Customer-supplied URLs (private endpoints, observability destinations)
// follow the app's customer_egress policy (package egress): checked when
// stored (a 400 naming the field), and when connected to: the probe and
// the exporter dial through egress.Transport, and the router resolves a
// private endpoint's host itself and gives reverse_proxy the checked
// address (pinEgress), so that a later answer of the name's DNS cannot
// redirect the request.

// resolveTimeout bounds the router's lookup of a private endpoint's host
// when its cached addresses expired (egress.CacheTTL).
var resolveTimeout = 5 * time.Second

// pinEgress resolves the provider's host under the policy and points its
// dial address at the checked IP (Host and the TLS server name stay the
// URL's host). A refusal is a 403 naming the policy; a name that does not
// resolve, a 502.
func pinEgress(pol *egress.Policy, p *catalog.Provider, endpointID string) *apierror.Error {
	host, port, err := net.SplitHostPort(p.Dial)
	if err != nil {
		return apierror.New(http.StatusBadGateway, "Private endpoint "+endpointID+" has an invalid address")
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	ip, err := pol.Resolve(ctx, host)
	switch {
	case errors.Is(err, egress.ErrRefused):
		return apierror.New(http.StatusForbidden, "Private endpoint "+endpointID+" is "+err.Error())
	case err != nil:
		return apierror.New(http.StatusBadGateway, "Private endpoint "+endpointID+" is unreachable: "+err.Error())
	}
	p.Dial = net.JoinHostPort(ip.String(), port)
	return nil
}
