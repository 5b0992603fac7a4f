package integration

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The secrets the log test uses: the operator's provider keys (an
// OpenAI-style and an Anthropic-style provider), the customer's BYOK keys
// for both, and a client's cookie. Account keys and the SCIM token are made
// by the test.
const (
	logProviderKey     = "sk-provider-openai-secret-1b2c3d4e5f60"
	logAnthropicKey    = "sk-ant-provider-secret-9a8b7c6d5e4f30"
	logBYOKKey         = "sk-byok-openai-secret-5f6e7d8c9b0a11"
	logBYOKAnthropic   = "sk-ant-byok-secret-0a1b2c3d4e5f6a22"
	logSessionCookieID = "session-cookie-secret-7e8f9a0b1c2d33"
	logEndpointKey     = "sk-private-endpoint-secret-4c5d6e7f8a"
	logWrongSCIMToken  = "sk-tg-scim-v1-0000wrong0000token0000secret0000"
	logWrongAPIKey     = "sk-tg-v1-0000wrong0000key0000secret0000"
)

// logRedaction is the documented access and error log filter ("Logs and
// secrets"): the headers and query parameters that can carry a key as the
// client sent it.
const logRedaction = `
(tollgate_log_redaction) {
	format filter {
		wrap json
		request>headers>X-Api-Key replace REDACTED
		request>headers>X-Goog-Api-Key replace REDACTED
		request>headers>Api-Key replace REDACTED
		request>uri query {
			replace key REDACTED
			replace api_key REDACTED
			replace api-key REDACTED
		}
	}
}
`

// withLogSecrets is the log test's gateway: the providers carry the test's
// keys, an Anthropic-style provider and models that inject the faults (a
// cut stream, a 500, an answer slower than the proxies' 1s header
// timeout), and the mock streams slowly enough for a client to leave
// mid-stream. logging is the global options' log settings; siteLog the
// gateway site's access log.
func withLogSecrets(t *testing.T, logging, siteLog string) func(string) string {
	pricing := "\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"
	return func(cfg string) string {
		_, rest, _ := strings.Cut(cfg, "provider mock http://")
		mock, _, _ := strings.Cut(rest, "/v1")
		var models strings.Builder
		for _, m := range []struct{ id, upstream, style, key string }{
			{"mock/break", "tollgate-mock-stream-break", "", logProviderKey},
			{"mock/e500", "tollgate-mock-error-500", "", logProviderKey},
			{"mock/slow", "tollgate-mock-slow", "", logProviderKey},
			{"anthropic/claude", "claude-mock", "anthropic", logAnthropicKey},
			{"anthropic/break", "claude-stream-break", "anthropic", logAnthropicKey},
			{"anthropic/e500", "claude-error-500", "anthropic", logAnthropicKey},
			{"anthropic/slow", "claude-slow", "anthropic", logAnthropicKey},
		} {
			name, base, style := "mock", "http://"+mock+"/v1", ""
			if m.style != "" { // Anthropic's base URL is the host: its path is /v1/messages
				name, base, style = "anthropic", "http://"+mock, "\t\t\t\tstyle anthropic\n"
			}
			fmt.Fprintf(&models, "\t\tmodel %s {\n\t\t\tcontext_length 8192\n\t\t\tmax_completion_tokens 1000\n%s"+
				"\t\t\tprovider %s %s {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key %s\n%s\t\t\t}\n\t\t}\n",
				m.id, pricing, name, base, m.upstream, m.key, style)
		}
		cfg = strings.ReplaceAll(cfg, "api_key mock\n", "api_key "+logProviderKey+"\n")
		cfg = replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", models.String()+"\t\tmodel tollgate-mock:free {\n")
		cfg = replaceOnce(t, cfg, "\tadmin ", logging+"\tadmin ")
		cfg = replaceOnce(t, cfg, "\ttollgate {\n\t\t# the gateway's options\n",
			siteLog+"\ttollgate_dashboard\n\ttollgate {\n\t\t# the gateway's options\n\t\ttransport http {\n\t\t\tresponse_header_timeout 1s\n\t\t}\n")
		cfg = replaceOnce(t, cfg, "\t\tlatency 1ms\n", "\t\tlatency 1ms\n\t\tchunk_delay 50ms\n")
		// The mock stands for a remote provider: its own access log (on
		// with log_credentials, which turns on every server's) is the
		// provider's, not the gateway's.
		cfg = replaceOnce(t, cfg, "\ttollgate_mock_provider {\n", "\tlog_skip\n\ttollgate_mock_provider {\n")
		return logRedaction + cfg
	}
}

// TestNoSecretInAnyLogLine runs every inference route and dialect (chat
// completions, Responses, Messages with a bearer key and with X-Api-Key; an
// OpenAI-style and an Anthropic-style provider; the operator's keys and a
// BYOK account's), the administrative routes that take secrets, and the
// faults (a client leaving mid-stream, a provider cutting its stream, an
// upstream timeout, a provider 500) with debug logging and an access log,
// then looks for every secret used in the whole log output.
//
// With Caddy's default logging, and at DEBUG with the documented log filter,
// every secret must be absent. With log_credentials on and no filter (the
// operator asked Caddy to log the credentials clients send), the gateway's
// own secrets, the provider and BYOK keys, must still be absent: they are
// added to the upstream request after anything logs it.
func TestNoSecretInAnyLogLine(t *testing.T) {
	gatewayOwn := []string{"provider key", "Anthropic provider key", "BYOK key", "Anthropic BYOK key", "private endpoint key"}
	debug := []string{`"level":"debug"`, "http.log.access", "upstream roundtrip", "/v1/messages", "/scim/v2/Users"}
	for _, tc := range []struct {
		name, logging, siteLog string
		want                   []string // in the log: the test saw what it needs
		check                  []string // the secrets that must be absent; nil: all
	}{
		// Caddy's defaults: no access log, INFO and above.
		{"default", "", "", nil, nil},
		{"debug_redacted", "\tlog default {\n\t\tlevel DEBUG\n\t\timport tollgate_log_redaction\n\t}\n",
			"\tlog {\n\t\timport tollgate_log_redaction\n\t}\n", debug, nil},
		{"debug_log_credentials", "\tdebug\n\tservers {\n\t\tlog_credentials\n\t}\n", "\tlog\n", debug, gatewayOwn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProcessWith(t, t.TempDir(), withLogSecrets(t, tc.logging, tc.siteLog))
			secrets := useEverySecret(t, newClient(t, p.gateway, p.admin), p.mock)
			p.stop(t) // every request, aborted ones too, has ended and logged
			logs := p.log.String()
			// A client leaving mid-stream is a WARN at any level.
			for _, want := range append(tc.want, "aborting with incomplete response") {
				if !strings.Contains(logs, want) {
					t.Fatalf("the test needs its logs and faults; %q is not in the log:\n%.3000s", want, logs)
				}
			}
			names := tc.check
			if names == nil {
				for name := range secrets {
					names = append(names, name)
				}
			}
			for _, name := range names {
				s := secrets[name]
				if s == "" {
					t.Fatalf("no secret %q", name)
				}
				if i := strings.Index(logs, s); i >= 0 {
					t.Errorf("the %s is in the logs: %s", name, logs[max(i-1500, 0):min(i+100, len(logs))])
				}
			}
		})
	}
}

// useEverySecret sends each secret where the gateway takes it, on success
// and fault paths, and returns the secrets by name.
func useEverySecret(t *testing.T, c *client, mock string) map[string]string {
	t.Helper()
	tn := c.newTenant("organization", "10")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"logs"}`)
	byok := c.newTenant("organization", "10")
	byokKey, _ := c.newKey(byok.MgmtKey, `{"name":"byok logs"}`)
	c.api("POST", "/byok", byok.MgmtKey, `{"provider":"mock","key":"`+logBYOKKey+`"}`).expect(t, 201)
	c.api("POST", "/byok", byok.MgmtKey, `{"provider":"anthropic","key":"`+logBYOKAnthropic+`"}`).expect(t, 201)
	org, idp := newSCIMOrg(t, c)
	idp.do("POST", "/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"logs@example.com","name":{"givenName":"Lo","familyName":"Gs"},"emails":[{"value":"logs@example.com","primary":true}]}`).expect(t, 201)
	idp.do("GET", "/Users", "").expect(t, 200)
	scimClient{c: c, token: logWrongSCIMToken}.do("GET", "/Users", "").expect(t, 401)
	secrets := map[string]string{
		"provider key": logProviderKey, "Anthropic provider key": logAnthropicKey,
		"BYOK key": logBYOKKey, "Anthropic BYOK key": logBYOKAnthropic,
		"API key": key, "BYOK account's API key": byokKey,
		"management key": tn.MgmtKey, "BYOK account's management key": byok.MgmtKey, "SCIM organization's management key": org.Mgmt,
		"SCIM token": idp.token, "session cookie": logSessionCookieID,
		"private endpoint key": logEndpointKey, "wrong SCIM token": logWrongSCIMToken, "wrong API key": logWrongAPIKey,
	}

	// Administrative routes with management keys, one sent as X-Api-Key
	// (refused: only /messages takes it).
	c.api("GET", "/keys", tn.MgmtKey, nil).expect(t, 200)
	c.api("GET", "/byok", byok.MgmtKey, nil).expect(t, 200)
	c.api("GET", "/keys", org.Mgmt, nil).expect(t, 200)
	logRequest(t, c, "GET", "/keys", http.Header{"X-Api-Key": {tn.MgmtKey}}, "", false).expect(t, 401)

	// A customer's own deployment (a private endpoint), called with its key.
	pe := c.api("POST", "/private-endpoints", tn.MgmtKey, `{"name":"mine","model":"acme/private","base_url":"http://`+mock+`/v1",
		"upstream_model":"tollgate-mock","api_key":"`+logEndpointKey+`"}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/private-endpoints/"+pe+"/validate", tn.MgmtKey, nil).expect(t, 200)
	c.api("POST", "/private-endpoints/"+pe+"/activate", tn.MgmtKey, nil).expect(t, 200)
	// Keys the gateway refuses.
	logRequest(t, c, "POST", "/messages", http.Header{"X-Api-Key": {logWrongAPIKey}}, `{}`, false).expect(t, 401)
	logRequest(t, c, "POST", "/chat/completions", http.Header{"Authorization": {"Bearer " + logWrongAPIKey}}, `{}`, false).expect(t, 401)

	chat := func(model string, stream bool) string {
		return fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":20,"messages":[{"role":"user","content":"hello there friend"}]}`, model, stream)
	}
	resp := func(model string, stream bool) string {
		return fmt.Sprintf(`{"model":%q,"stream":%t,"max_output_tokens":20,"input":"hello there friend"}`, model, stream)
	}
	msgs := chat // the same shape: model, stream, max_tokens, messages
	for _, k := range []string{key, byokKey} {
		bearer := http.Header{"Authorization": {"Bearer " + k}}
		// A client that also sends its key the ways other APIs take one
		// (Google's header and query parameter, Azure's header) and a cookie.
		everyWay := http.Header{"Authorization": {"Bearer " + k}, "X-Goog-Api-Key": {k}, "Api-Key": {k},
			"Cookie": {"session=" + logSessionCookieID}}
		apiKey := http.Header{"X-Api-Key": {k}, "Anthropic-Version": {"2023-06-01"}}
		for _, pfx := range []string{"mock", "anthropic"} {
			model := pfx + "/claude"
			if pfx == "mock" {
				model = "tollgate-mock"
			}
			for _, stream := range []bool{false, true} {
				logRequest(t, c, "POST", "/chat/completions?key="+k, everyWay, chat(model, stream), stream).expect(t, 200)
				logRequest(t, c, "POST", "/responses?api_key="+k, everyWay, resp(model, stream), stream).expect(t, 200)
				logRequest(t, c, "POST", "/messages", bearer, msgs(model, stream), stream).expect(t, 200)
				logRequest(t, c, "POST", "/messages?beta=true", apiKey, msgs(model, stream), stream).expect(t, 200)
			}
			// The client leaves mid-stream.
			abortMidStream(t, c, "/chat/completions", everyWay, chat(model, true))
			abortMidStream(t, c, "/responses", bearer, resp(model, true))
			abortMidStream(t, c, "/messages", apiKey, msgs(model, true))
			// The provider cuts its stream, fails, or does not answer in time.
			logRequest(t, c, "POST", "/chat/completions", everyWay, chat(pfx+"/break", true), true)
			logRequest(t, c, "POST", "/messages", apiKey, msgs(pfx+"/break", true), true)
			logRequest(t, c, "POST", "/chat/completions", everyWay, chat(pfx+"/e500", false), false).expectFault(t)
			logRequest(t, c, "POST", "/messages", apiKey, msgs(pfx+"/e500", true), true).expectFault(t)
			logRequest(t, c, "POST", "/responses", bearer, resp(pfx+"/slow", false), false).expectFault(t)
			logRequest(t, c, "POST", "/messages", apiKey, msgs(pfx+"/slow", false), false).expectFault(t)
		}
	}
	for name, secret := range useConnectSecrets(t, c, true) {
		secrets[name] = secret
	}
	bearer := http.Header{"Authorization": {"Bearer " + key}}
	logRequest(t, c, "POST", "/chat/completions", bearer, chat("acme/private", false), false).expect(t, 200)
	logRequest(t, c, "POST", "/chat/completions", bearer, chat("acme/private", true), true).expect(t, 200)
	abortMidStream(t, c, "/chat/completions", bearer, chat("acme/private", true))
	return secrets
}

// logRequest sends a request under /api/v1 with exactly the headers given
// (and a JSON Content-Type with a body), reading the whole answer.
func logRequest(t *testing.T, c *client, method, path string, h http.Header, body string, stream bool) response {
	t.Helper()
	res := logSend(t, c, method, path, h, body)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil && !stream {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

func logSend(t *testing.T, c *client, method, path string, h http.Header, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.gateway+"/api/v1"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return res
}

// abortMidStream starts a stream, reads its first event and hangs up.
func abortMidStream(t *testing.T, c *client, path string, h http.Header, body string) {
	t.Helper()
	res := logSend(t, c, "POST", path, h, body)
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("POST %s: status %d: %s", path, res.StatusCode, b)
	}
	if _, err := readEvent(bufio.NewReader(res.Body)); err != nil {
		t.Fatalf("POST %s: first event: %v", path, err)
	}
}

// expectFault checks that a provider's failure reached the client as a
// error (a timeout is 408).
func (r response) expectFault(t *testing.T) {
	t.Helper()
	if r.Status < 400 {
		t.Fatalf("status %d, want an error; body: %s", r.Status, r.Body)
	}
}
