package mockprovider

import (
	"net/http"
	"regexp"
	"strings"
)

// azurePrefix starts Azure OpenAI's deployment paths:
// /openai/deployments/<deployment>/chat/completions?api-version=<date>.
const azurePrefix = "/openai/deployments/"

// azureVersion is the form of Azure's api-version values.
var azureVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)

// serveAzure answers Azure OpenAI's deployment routes as strictly as
// Azure: the api-version query parameter and the api-key header are
// required (an API key sent as a bearer token is not an Entra ID token:
// 401), and only chat completions are served at a deployment. The answer
// is chat completions' (with strict's rules when set).
func (m *Handler) serveAzure(w http.ResponseWriter, r *http.Request, path string) error {
	rest := path[strings.Index(path, azurePrefix)+len(azurePrefix):]
	deployment, route, _ := strings.Cut(rest, "/")
	switch {
	case r.Header.Get("Authorization") != "":
		writeError(w, &apiError{Code: http.StatusUnauthorized, Message: "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired."})
	case r.Header.Get("Api-Key") == "":
		writeError(w, &apiError{Code: http.StatusUnauthorized, Message: "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."})
	case !azureVersion.MatchString(r.URL.Query().Get("api-version")):
		writeError(w, &apiError{Code: http.StatusNotFound, Message: "Resource not found"})
	case deployment == "" || route != "chat/completions":
		writeError(w, &apiError{Code: http.StatusNotFound, Message: "Resource not found"})
	default:
		return m.serveGeneration(w, r, "chat", parseChatRequest, m.writeChat)
	}
	return nil
}
