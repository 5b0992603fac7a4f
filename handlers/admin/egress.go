package admin

import (
	"context"
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
)

// checkEgressURL is the store-time check of a customer URL; field names
// it in the 400.
func checkEgressURL(ctx context.Context, gw gateway.Gateway, field, raw string) *apierror.Error {
	if err := gw.EgressPolicy().Check(ctx, raw); err != nil {
		return apierror.BadRequest(field + ": " + err.Error())
	}
	return nil
}

// egressClient is an HTTP client for one probe of a customer URL.
func egressClient(pol *egress.Policy) *http.Client {
	return &http.Client{
		Transport:     egress.Transport(func() *egress.Policy { return pol }),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
