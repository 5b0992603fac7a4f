package mockprovider

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestAzureRefusesWhatAzureRefuses(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	const path = "/openai/deployments/gpt-prod/chat/completions?api-version=2024-10-21"
	const body = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, path string
		header     []string
		status     int
	}{
		{"no key", path, nil, http.StatusUnauthorized},
		{"a bearer key", path, []string{"Authorization", "Bearer k", "Api-Key", "k"}, http.StatusUnauthorized},
		{"no api-version", "/openai/deployments/gpt-prod/chat/completions", []string{"Api-Key", "k"}, http.StatusNotFound},
		{"bad api-version", "/openai/deployments/gpt-prod/chat/completions?api-version=latest", []string{"Api-Key", "k"}, http.StatusNotFound},
		{"no deployment route", "/openai/deployments/gpt-prod/responses?api-version=2024-10-21", []string{"Api-Key", "k"}, http.StatusNotFound},
		{"ok", path, []string{"Api-Key", "k"}, http.StatusOK},
	} {
		res := testgw.Post(t, srv, tc.path, body, tc.header...)
		if res.Status != tc.status {
			t.Errorf("%s: %d %s", tc.name, res.Status, res.Body)
		}
	}
	// As strict as OpenAI otherwise.
	res := testgw.Post(t, srv, path, `{"model":"gpt-4o","top_k":3,"messages":[{"role":"user","content":"hi"}]}`, "Api-Key", "k")
	if res.Status != http.StatusBadRequest || gjson.Get(res.Body, "error.message").Str == "" {
		t.Errorf("unknown parameter: %d %s", res.Status, res.Body)
	}
}
