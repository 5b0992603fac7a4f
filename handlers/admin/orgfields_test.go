package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWritePage(t *testing.T) {
	for _, tc := range []struct {
		offset, limit int
		want          string
	}{
		{0, 2, `{"data":["1","2"],"total_count":3}`},
		{2, 2, `{"data":["3"],"total_count":3}`},
		{5, 2, `{"data":[],"total_count":3}`},
	} {
		w := httptest.NewRecorder()
		writePage(w, []int{1, 2, 3}, tc.offset, tc.limit, func(n int) string { return string(rune('0' + n)) })
		if got := strings.TrimSpace(w.Body.String()); got != tc.want || w.Code != http.StatusOK {
			t.Errorf("offset %d limit %d: %d %s, want %s", tc.offset, tc.limit, w.Code, got, tc.want)
		}
	}
}
