package openai

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// StyleAzure is Azure OpenAI: OpenAI's chat completions (and completions,
// embeddings) at a deployment's URL, authenticated by an api-key header.
const StyleAzure = "azure"

// Azure is an Azure OpenAI deployment: the OpenAI dialect but for its
// URLs, its key header and the API version every request names.
type Azure struct {
	*Dialect
	// prefix is the deployment's path, /openai/deployments/<name>, and
	// query its ?api-version=<version>.
	prefix, query string
}

var (
	// Azure's deployment names: letters, digits, '-', '_' and '.'.
	deploymentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	// Azure's API versions: a date, maybe a preview.
	apiVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)
)

// NewAzure is the dialect of one style azure provider block: its
// deployment and api_version (o.Settings) are required.
func NewAzure(o dialect.Options) (dialect.Dialect, error) {
	m := &AzureModule{Deployment: o.Settings["deployment"], APIVersion: o.Settings["api_version"]}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m.New(o)
}

// AzureModule is the azure dialect as a guest module: an Azure OpenAI
// deployment and the API version its requests name.
type AzureModule struct {
	// Deployment is the deployment's name in Azure OpenAI.
	Deployment string `json:"deployment,omitempty"`
	// APIVersion is the api-version every request names, e.g. 2024-10-21.
	APIVersion string `json:"api_version,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (AzureModule) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: dialect.Namespace + "." + StyleAzure, New: func() caddy.Module { return new(AzureModule) }}
}

// UnmarshalCaddyfile reads `azure { deployment <name>; api_version <date> }`.
func (m *AzureModule) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return dialect.UnmarshalOptions(d, StyleAzure, map[string]*string{"deployment": &m.Deployment, "api_version": &m.APIVersion})
}

// Validate checks that both options are set and well formed.
func (m *AzureModule) Validate() error {
	switch dep, ver := m.Deployment, m.APIVersion; {
	case dep == "":
		return errors.New("deployment: required for style azure (the deployment's name in Azure OpenAI)")
	case !deploymentName.MatchString(dep):
		return fmt.Errorf("deployment: %q is not a deployment name (letters, digits, '-', '_', '.')", dep)
	case ver == "":
		return errors.New("api_version: required for style azure, e.g. 2024-10-21")
	case !apiVersion.MatchString(ver):
		return fmt.Errorf("api_version: expected a date such as 2024-10-21 or 2025-04-01-preview, got %q", ver)
	}
	return nil
}

// New implements dialect.Module.
func (m *AzureModule) New(o dialect.Options) (dialect.Dialect, error) {
	base := newDialect(o)
	// Azure serves Chat Completions at deployments; Responses requests
	// reach it as chat.
	base.chatOnly = true
	return &Azure{Dialect: base, prefix: "/openai/deployments/" + m.Deployment, query: "?api-version=" + m.APIVersion}, nil
}

var (
	_ dialect.Module        = (*AzureModule)(nil)
	_ caddy.Validator       = (*AzureModule)(nil)
	_ caddyfile.Unmarshaler = (*AzureModule)(nil)
)

// Name implements dialect.Dialect.
func (a *Azure) Name() string { return StyleAzure }

// RequiresKey implements dialect.KeyRequirer: an Azure resource is always
// called with its key.
func (a *Azure) RequiresKey() bool { return true }

// URI implements dialect.Dialect: the deployment's path for the route
// (chat completions for translated requests) and the API version; the
// client's own query is not passed.
func (a *Azure) URI(k dialect.Kind, native bool, uri string, _ bool) string {
	path := "/chat/completions"
	if native && k == dialect.Other {
		path = uri
		for i := 0; i < len(uri); i++ {
			if uri[i] == '?' {
				path = uri[:i]
				break
			}
		}
	}
	return a.prefix + path + a.query
}

// SetKey implements dialect.Dialect: KeyEntry's header (not the
// embedded Dialect's).
func (a *Azure) SetKey(h http.Header, key string) {
	name, value := a.KeyEntry(key)
	h[name] = []string{value}
}

// KeyEntry implements dialect.KeyEntry: Azure's api-key header.
func (a *Azure) KeyEntry(key string) (string, string) { return "Api-Key", key }

// ImagesURI implements dialect.ImageGenerator: the deployment's images
// path, with the API version.
func (a *Azure) ImagesURI() string { return a.prefix + "/images/generations" + a.query }

// SpeechURI implements dialect.Speaker: the deployment's speech path,
// with the API version.
func (a *Azure) SpeechURI() string { return a.prefix + "/audio/speech" + a.query }

// TranscriptionsURI implements dialect.Transcriber: the deployment's
// transcriptions path, with the API version.
func (a *Azure) TranscriptionsURI() string { return a.prefix + "/audio/transcriptions" + a.query }
