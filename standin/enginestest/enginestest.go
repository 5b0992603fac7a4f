// Package enginestest runs the search API stand-ins (package searchapis) on a
// loopback server, for tests of the engines and of web search.
package enginestest

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"

	"github.com/tollgate-dev/caddy-tollgate/standin/searchapis"
)

// TestServer serves the four search APIs on a loopback address and records
// every request; its knobs are those of searchapis.APIs. Point an engine's
// Config.BaseURL at URL.
type TestServer struct {
	*searchapis.APIs
	// URL is the base URL of the server, for Config.BaseURL.
	URL string

	srv *httptest.Server
}

// RecordedRequest is one request the TestServer received.
type RecordedRequest = searchapis.RecordedRequest

// DefaultTestHosts are the hosts results cycle through when the request has
// no include filter.
var DefaultTestHosts = searchapis.DefaultHosts

// StartTestServer starts a TestServer. Close it when done.
func StartTestServer() *TestServer {
	apis := searchapis.NewRecording()
	srv := httptest.NewServer(apis)
	return &TestServer{APIs: apis, URL: srv.URL, srv: srv}
}

// Close shuts the server down.
func (s *TestServer) Close() { s.srv.Close() }

// Client returns an HTTP client suited to the server.
func (s *TestServer) Client() *http.Client { return s.srv.Client() }

// BasicAuthHeader returns the Authorization header value of HTTP Basic auth,
// for comparing against RecordedRequest.Header in tests.
func BasicAuthHeader(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}
