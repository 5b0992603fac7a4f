package admin

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func TestParseAnalyticsQueryErrors(t *testing.T) {
	at := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for body, want := range map[string]string{
		`[]`:                      "Request body must be a JSON object",
		`{}`:                      "metrics: required non-empty array of metric names",
		`{"metrics":[]}`:          "metrics: required non-empty array of metric names",
		`{"metrics":["x"]}`:       `metrics[0]: unknown metric "x"; see GET /analytics/meta`,
		`{"metrics":["usage",3]}`: "metrics[1]: unknown metric 3; see GET /analytics/meta",
		`{"metrics":["usage"],"dimensions":["model","provider","status"]}`:                                      "dimensions: at most 2 dimensions",
		`{"metrics":["usage"],"dimensions":["model","model"]}`:                                                  `dimensions[1]: "model" is repeated`,
		`{"metrics":["usage"],"dimensions":["country"]}`:                                                        `dimensions[0]: unknown dimension "country"; expected one of model, provider, api_key_id, end_user, workspace, status, byok, user`,
		`{"metrics":["usage"],"granularity":"minute"}`:                                                          "granularity: expected one of hour, day, week, month (the data's resolution is one hour)",
		`{"metrics":["usage"],"time_range":{"start":"2026-01-02T00:00:00Z"}}`:                                   "time_range.end: required RFC 3339 date-time",
		`{"metrics":["usage"],"time_range":{"start":"2026-01-02T00:00:00Z","end":"2026-01-01T00:00:00Z"}}`:      "time_range: start must be before end",
		`{"metrics":["usage"],"limit":0}`:                                                                       "limit: expected an integer from 1 to 10000",
		`{"metrics":["usage"],"group_limit":1.5}`:                                                               "group_limit: expected an integer from 1 to 10000",
		`{"metrics":["usage"],"filters":{}}`:                                                                    "filters: expected an array",
		`{"metrics":["usage"],"filters":[{"field":"model","operator":"in","value":"a"}]}`:                       "filters[0].value: expected an array for in",
		`{"metrics":["usage"],"filters":[{"field":"model","operator":"eq","value":["a"]}]}`:                     "filters[0].value: expected a string or number for eq",
		`{"metrics":["usage"],"filters":[{"field":"byok","operator":"eq","value":"yes"}]}`:                      "filters[0].value: byok is true or false",
		`{"metrics":["usage"],"filters":[{"field":"model","operator":"in","value":["a"],"include_unset":"x"}]}`: "filters[0].include_unset: expected a boolean",
		`{"metrics":["usage"],"order_by":{"field":"prompt_tokens","direction":"asc"}}`:                          `order_by.field: "prompt_tokens" is not a requested metric, request_count, a requested dimension or date`,
		`{"metrics":["usage"],"order_by":{"field":"usage","direction":"up"}}`:                                   "order_by.direction: expected asc or desc",
		`{"metrics":["usage"],"classifier_dimensions":{"classifier_id":"x"}}`:                                   "classifier_dimensions: classifiers are not supported by this gateway",
	} {
		_, apiErr := parseAnalyticsQuery([]byte(body), at)
		if apiErr == nil || apiErr.Status != 400 || apiErr.Message != want {
			t.Errorf("%s: got %v, want 400 %q", body, apiErr, want)
		}
	}
}

func TestParseAnalyticsQuery(t *testing.T) {
	at := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	q, apiErr := parseAnalyticsQuery([]byte(`{"metrics":["usage","request_count"],"dimensions":["end_user"],
		"filters":[{"field":"provider","operator":"not_in","value":["a",1],"include_unset":true},{"field":"model","operator":"neq","value":"m"}],
		"granularity":"week","time_range":{"start":"2026-01-01T00:00:00Z","end":"2026-02-01T00:30:00Z"},
		"order_by":{"field":"end_user","direction":"desc"},"limit":5,"group_limit":2}`), at)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	u := q.usage
	if u.Granularity != "week" || len(u.GroupBy) != 1 || u.GroupBy[0] != "end_user" || q.limit != 5 || q.groupLimit != 2 ||
		q.orderField != "end_user" || !q.orderDesc || !u.From.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("parsed %+v", q)
	}
	f := u.Filters
	if len(f) != 2 || !f[0].Negate || !f[0].IncludeUnset || f[0].Values[1] != "1" || !f[1].Negate || f[1].Values[0] != "m" {
		t.Fatalf("filters %+v", f)
	}
	// Defaults: the last 30 days, 1000 rows, the busiest groups first.
	q, _ = parseAnalyticsQuery([]byte(`{"metrics":["usage"]}`), at)
	if !q.usage.From.Equal(at.AddDate(0, 0, -30)) || !q.usage.To.After(at) || q.limit != 1000 || q.orderField != "request_count" || !q.orderDesc {
		t.Fatalf("defaults %+v", q)
	}
}

func TestAnalyticsSortIsDeterministic(t *testing.T) {
	q, _ := parseAnalyticsQuery([]byte(`{"metrics":["usage"],"dimensions":["model"]}`), time.Now())
	rows := []storage.UsageRow{
		{Dims: []string{"b"}, Sums: storage.Sums{Requests: 1}},
		{Dims: []string{"a"}, Sums: storage.Sums{Requests: 1}},
		{Dims: []string{"c"}, Sums: storage.Sums{Requests: 5}},
	}
	q.sort(rows)
	if rows[0].Dims[0] != "c" || rows[1].Dims[0] != "a" || rows[2].Dims[0] != "b" {
		t.Fatalf("order %v", rows)
	}
}

func TestEndpointIDIsStableUUID(t *testing.T) {
	a, b := endpointID("m", "p"), endpointID("m", "p")
	if a != b || len(a) != 36 || a[14] != '5' || endpointID("m", "q") == a {
		t.Fatalf("endpoint ids %s %s", a, endpointID("m", "q"))
	}
}

func TestFeedbackValidation(t *testing.T) {
	f := newAdminFixture(t)
	c := f.c
	for body, want := range map[string]string{
		`{"category":"other"}`:                                 "generation_id: required non-empty string",
		`{"generation_id":"","category":"other"}`:              "generation_id: required non-empty string",
		`{"generation_id":"g"}`:                                "category: required string, one of latency, incoherence, incorrect_response, formatting, billing, api_error, other",
		`{"generation_id":"g","category":"rude"}`:              "category: expected one of latency, incoherence, incorrect_response, formatting, billing, api_error, other",
		`{"generation_id":"g","category":"other","comment":1}`: "comment: expected a string or null",
	} {
		c.do(t, "POST", "/api/v1/generation/feedback", f.OrgMgmt, body).WantError(t, 400, want)
	}
	long := `{"generation_id":"g","category":"other","comment":"` + strings.Repeat("é", 1001) + `"}`
	c.do(t, "POST", "/api/v1/generation/feedback", f.OrgMgmt, long).WantError(t, 400, "comment: expected at most 1000 characters")
	c.do(t, "POST", "/api/v1/generation/feedback", f.OrgMgmt, `{"generation_id":"gen-x","category":"other"}`).WantError(t, 404, "Generation not found")
	c.do(t, "GET", "/api/v1/generation/feedback", f.OrgMgmt, "").Must(t, 405)
}
