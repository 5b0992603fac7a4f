package consent

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dashboard"
)

// The page that returns to the app refreshes to the callback with its
// query intact, escaped for HTML, and links to it.
func TestReturnPageRefreshesToTheCallback(t *testing.T) {
	to := "http://localhost:5555/cb?a=1&code=auth_code_abc&state=x%22y"
	body, err := dashboard.ExecuteBody(templates, "return", map[string]string{"Origin": "http://localhost:5555", "URL": to})
	if err != nil {
		t.Fatal(err)
	}
	html := string(body)
	want := `<meta http-equiv="refresh" content="0; url=http://localhost:5555/cb?a=1&amp;code=auth_code_abc&amp;state=x%22y">`
	if !strings.Contains(html, want) || !strings.Contains(html, `href="http://localhost:5555/cb?a=1&amp;code=auth_code_abc&amp;state=x%22y"`) {
		t.Fatalf("return page:\n%s", html)
	}
}
