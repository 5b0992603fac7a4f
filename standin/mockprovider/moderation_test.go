package mockprovider

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The mock's moderation endpoint answers OpenAI's shape and refuses what
// OpenAI refuses.
func TestMockModeration(t *testing.T) {
	srv := mockServer(t, &Handler{})
	post := func(key, body string) (int, gjson.Result) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/moderations", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, gjson.ParseBytes(b)
	}
	status, j := post("k", `{"model":"omni-moderation-latest","input":["hello","I will kill it"]}`)
	if status != 200 || j.Get("results.#").Int() != 2 || j.Get("results.0.flagged").Bool() ||
		!j.Get("results.1.flagged").Bool() || !j.Get("results.1.categories.violence").Bool() {
		t.Fatalf("%d %s", status, j.Raw)
	}
	if status, j = post("k", `{"input":"fine"}`); status != 200 || j.Get("results.0.flagged").Bool() {
		t.Fatalf("string input: %d %s", status, j.Raw)
	}
	for _, body := range []string{`{"input":[]}`, `{"input":5}`, `{}`, `{"input":"x","extra":1}`, `[1]`} {
		if status, _ := post("k", body); status != 400 {
			t.Errorf("%s: %d, want 400", body, status)
		}
	}
	if status, _ := post("", `{"input":"x"}`); status != 401 {
		t.Errorf("no key: %d", status)
	}
	if status, _ := post("k", `{"model":"x-error-500","input":"x"}`); status != 500 {
		t.Errorf("injected fault: %d", status)
	}
}
