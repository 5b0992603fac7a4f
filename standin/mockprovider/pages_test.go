package mockprovider

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPages(t *testing.T) {
	for path, want := range map[string]struct {
		status int
		ctype  string
		body   string
	}{
		"/pages/article.html": {200, "text/html; charset=utf-8", "<h1>Caddy 2.10 released</h1>"},
		"/pages/report.pdf":   {200, "application/pdf", "%PDF-"},
		"/pages/other":        {404, "text/plain; charset=utf-8", "404 page not found"},
	} {
		w := httptest.NewRecorder()
		if err := new(Handler).ServeHTTP(w, httptest.NewRequest("GET", path, nil), nil); err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(w.Result().Body)
		if w.Code != want.status || w.Header().Get("Content-Type") != want.ctype || !strings.Contains(string(b), want.body) {
			t.Errorf("%s: %d %q %.60q", path, w.Code, w.Header().Get("Content-Type"), b)
		}
	}
	w := httptest.NewRecorder()
	_ = new(Handler).ServeHTTP(w, httptest.NewRequest("POST", "/pages/article.html", nil), nil)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", w.Code)
	}
}
