package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
	"github.com/tollgate-dev/caddy-tollgate/telemetry/telemetrytest"
)

// metricsRegistry is a registry with the gateway's collectors, as a
// config's would be.
func metricsRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := telemetry.Register(reg, false); err != nil {
		t.Fatal(err)
	}
	return reg
}

// counterValue is the counter name's value for one label's value; 0 when
// the series does not exist yet.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	v, _ := telemetrytest.Lookup(t, reg, name, map[string]string{label: value})
	return v
}

func TestAnswerStatus(t *testing.T) {
	r := httptest.NewRequest("POST", "/api/v1/chat/completions", nil)
	refused := &apierror.Error{Status: http.StatusPaymentRequired, Message: "no"}
	type answerCase struct {
		name     string
		r        *http.Request
		upstream int
		err      error
		want     int
		apiErr   *apierror.Error
	}
	cases := []answerCase{
		{"served", r, 200, nil, 200, nil},
		{"served, no attempt", r, 0, nil, 200, nil},
		{"provider status passed through", r, 201, nil, 201, nil},
		{"gateway error", r, 0, caddyhttp.Error(refused.Status, refused), 402, refused},
		{"other error", r, 0, errors.New("boom"), 500, nil},
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cases = append(cases, answerCase{"client gone", r.WithContext(ctx), 200, nil, 499, nil})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, apiErr := answerStatus(c.r, &pipeline.State{Status: c.upstream}, c.err)
			if got != c.want || apiErr != c.apiErr {
				t.Fatalf("answerStatus = %d, %v; want %d, %v", got, apiErr, c.want, c.apiErr)
			}
		})
	}
}

func TestObserveRefusals(t *testing.T) {
	reg := metricsRegistry(t)
	const src = "unit_key_limit"
	before := counterValue(t, reg, "tollgate_credit_refusals_total", "limit_source", src)
	refusal := &apierror.Error{Status: http.StatusPaymentRequired, Metadata: map[string]any{"limit_source": src}}
	observeRefusal(refusal)
	observeRefusal(refusal)
	if v := counterValue(t, reg, "tollgate_credit_refusals_total", "limit_source", src); v != before+2 {
		t.Fatalf("credit_refusals_total{limit_source=%s} = %v, want %v", src, v, before+2)
	}

	// The gateway's 429s carry their limit_type; a provider's has none.
	now := counterValue(t, reg, "tollgate_rate_limited_total", "origin", "abuse_per_key")
	provider := counterValue(t, reg, "tollgate_rate_limited_total", "origin", "provider")
	operator := counterValue(t, reg, "tollgate_rate_limited_total", "origin", "workspace_requests_per_minute")
	observeRefusal(metering.RateLimitError(&gateway.RateLimited{Scope: "abuse_per_key"}, time.Now()))
	observeRefusal(metering.RateLimitError(&gateway.RateLimited{Limit: 3, Scope: "workspace_requests_per_minute"}, time.Now()))
	observeRefusal(answer.FailuresError([]answer.Failure{{Status: 429, Provider: "up"}}))
	observeRefusal(&apierror.Error{Status: http.StatusBadRequest})
	if v := counterValue(t, reg, "tollgate_rate_limited_total", "origin", "abuse_per_key"); v != now+1 {
		t.Errorf("rate_limited_total{origin=abuse_per_key} = %v, want %v", v, now+1)
	}
	if v := counterValue(t, reg, "tollgate_rate_limited_total", "origin", "workspace_requests_per_minute"); v != operator+1 {
		t.Errorf("rate_limited_total{origin=workspace_requests_per_minute} = %v, want %v", v, operator+1)
	}
	if v := counterValue(t, reg, "tollgate_rate_limited_total", "origin", "provider"); v != provider+1 {
		t.Errorf("rate_limited_total{origin=provider} = %v, want %v", v, provider+1)
	}
}
