package mockprovider

import (
	"net/http"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/pdftext/pdftest"
)

// mockPagesPrefix is where the mock serves a small web site, so that the
// web-fetch plugin and server tool work offline: GET
// <mock>/pages/article.html (an HTML article with navigation and a
// footer) and <mock>/pages/report.pdf (a one-page PDF with text). Any
// other page is a 404.
const mockPagesPrefix = "/pages"

const mockArticle = `<!doctype html>
<html><head><title>Caddy 2.10 released</title></head>
<body>
<nav><a href="/">Home</a> <a href="/blog">Blog</a></nav>
<main>
<h1>Caddy 2.10 released</h1>
<p>The release adds <strong>encrypted ClientHello</strong> support and post-quantum key exchange by default.</p>
</main>
<footer>Copyright the authors</footer>
</body></html>
`

var mockReport = pdftest.Build("Revenue grew 12% in Q3.")

// servePage serves the mock's web site.
func servePage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch strings.TrimPrefix(r.URL.Path, mockPagesPrefix) {
	case "/article.html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(mockArticle))
	case "/report.pdf":
		w.Header().Set("Content-Type", "application/pdf")
		_, _ = w.Write(mockReport)
	default:
		http.NotFound(w, r)
	}
}
