package handlers

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

// The pipeline's calls into package telemetry, kept here so that the
// stages carry one line each.

// isInferencePost reports whether a request counts in requests_total: a
// POST to an inference route (the model lists and token counts are not).
func isInferencePost(r *http.Request, st *pipeline.State) bool {
	return r.Method == http.MethodPost && (st.API.Op == admin.OpInfer || st.API.Op == admin.OpInferBelow)
}

// observeAnswer counts how the gateway answered a request: its 402s and
// 429s on any route, and every answer to an inference POST. It returns
// err, so that callers can wrap their return.
func observeAnswer(r *http.Request, st *pipeline.State, err error) error {
	status, apiErr := answerStatus(r, st, err)
	if apiErr != nil {
		observeRefusal(apiErr)
	}
	if !st.Inference {
		return err
	}
	if st.Route != nil {
		metering.SeriesOf(st.Route).Request(status)
	} else {
		telemetry.For(string(st.API.Dialect()), telemetry.None, telemetry.None).Request(status)
	}
	return err
}

// answerStatus is the status a request was answered with: the gateway's
// error's, 499 when the client left, else the provider's (200 when no
// provider was called).
func answerStatus(r *http.Request, st *pipeline.State, err error) (int, *apierror.Error) {
	if err != nil {
		var he caddyhttp.HandlerError
		if errors.As(err, &he) {
			apiErr, _ := he.Err.(*apierror.Error)
			return he.StatusCode, apiErr
		}
		return http.StatusInternalServerError, nil
	}
	switch {
	case r.Context().Err() != nil:
		return 499, nil
	case st.Status != 0:
		return st.Status, nil
	}
	return http.StatusOK, nil
}

// observeRefusal counts a 402 by its limit_source and a 429 by its origin:
// the gateway's limit_type, or "provider" when every provider refused.
func observeRefusal(e *apierror.Error) {
	switch e.Status {
	case http.StatusPaymentRequired:
		if src, ok := e.Metadata["limit_source"].(string); ok {
			telemetry.Refused(src)
		}
	case http.StatusTooManyRequests:
		origin := "provider"
		if lt, ok := e.Metadata["limit_type"].(string); ok {
			origin = lt
		}
		telemetry.RateLimited(origin)
	}
}
