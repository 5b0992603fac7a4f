package apierror

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	w.Header().Set("Content-Length", "99")
	Write(w, &Error{
		Status: 429, Message: "Rate limit exceeded",
		Metadata: map[string]any{"error_type": "rate_limit_exceeded"},
		Header:   http.Header{"Retry-After": {"3"}},
	})
	want := `{"error":{"code":429,"message":"Rate limit exceeded","metadata":{"error_type":"rate_limit_exceeded"}}}` + "\n"
	if w.Code != 429 || w.Body.String() != want {
		t.Errorf("got %d %s", w.Code, w.Body.String())
	}
	h := w.Header()
	if h.Get("Content-Type") != "application/json" || h.Get("Retry-After") != "3" || h.Get("Content-Length") != "" {
		t.Errorf("headers = %v", h)
	}
	if got := (&Error{Status: 404, Message: "x"}).Error(); got != "404 x" {
		t.Errorf("Error() = %q", got)
	}
}
