package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect/openai"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/internal/redact"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Private endpoints: an account's own OpenAI-compatible model deployments,
// managed under /api/v1/private-endpoints with a management key. The
// lifecycle is draft -> validated (a real probe of the endpoint) ->
// enabled <-> disabled; an enabled endpoint is the first provider of the
// account's requests for its model, priced by its own pricing. The
// endpoint's API key is sealed at rest with byok_encryption_key and never
// returned (only a masked label).

const msgPrivateEndpointsOff = "Private endpoints are not configured on this gateway: the operator must set byok_encryption_key, which encrypts their API keys"

// probeTimeout bounds a validation probe.
var probeTimeout = 15 * time.Second

type endpointPricingView struct {
	Prompt     string `json:"prompt"`
	Completion string `json:"completion"`
	Request    string `json:"request"`
}

type endpointValidationView struct {
	Succeeded   bool    `json:"succeeded"`
	Error       *string `json:"error"`
	ValidatedAt string  `json:"validated_at"`
}

type privateEndpointView struct {
	ID             string                  `json:"id"`
	Name           string                  `json:"name"`
	Model          string                  `json:"model"`
	BaseURL        string                  `json:"base_url"`
	UpstreamModel  string                  `json:"upstream_model"`
	Status         string                  `json:"status"`
	APIKeyLabel    *string                 `json:"api_key_label"`
	Pricing        endpointPricingView     `json:"pricing"`
	LastValidation *endpointValidationView `json:"last_validation"`
	WorkspaceID    string                  `json:"workspace_id"`
	CreatedAt      string                  `json:"created_at"`
	UpdatedAt      string                  `json:"updated_at"`
}

func newPrivateEndpointView(e storage.PrivateEndpoint) privateEndpointView {
	v := privateEndpointView{
		ID: e.ID, Name: e.Name, Model: e.Model, BaseURL: e.BaseURL, UpstreamModel: e.UpstreamModel,
		Status: string(e.Status), Pricing: endpointPricingView(e.Pricing), WorkspaceID: e.WorkspaceID,
		CreatedAt: apiTime(e.CreatedAt), UpdatedAt: apiTime(e.UpdatedAt),
	}
	if e.Label != "" {
		l := e.Label
		v.APIKeyLabel = &l
	}
	if val := e.Validation; val != nil {
		vv := &endpointValidationView{Succeeded: val.Succeeded, ValidatedAt: apiTime(val.At)}
		if val.Error != "" {
			msg := val.Error
			vv.Error = &msg
		}
		v.LastValidation = vv
	}
	return v
}

type endpointRequest struct {
	*adminRequest
	sealer *storage.Sealer
	gw     gateway.Gateway
}

// openEndpoints prepares a request to the private endpoint routes; they
// all answer 400 while the gateway has no sealer.
func openEndpoints(ar *adminRequest) (*endpointRequest, *apierror.Error) {
	sealer := ar.gw.BYOKSealer()
	if sealer == nil {
		return nil, apierror.BadRequest(msgPrivateEndpointsOff)
	}
	return &endpointRequest{adminRequest: ar, sealer: sealer, gw: ar.gw}, nil
}

// activate, disable and enable are the status transitions an account may
// ask for: a validated endpoint enabled, an enabled one disabled, a
// disabled one enabled again.
func (er *endpointRequest) activate(id string) *apierror.Error {
	return er.transition(id, "activate", storage.EndpointValidated, storage.EndpointEnabled)
}

func (er *endpointRequest) disable(id string) *apierror.Error {
	return er.transition(id, "disable", storage.EndpointEnabled, storage.EndpointDisabled)
}

func (er *endpointRequest) enable(id string) *apierror.Error {
	return er.transition(id, "enable", storage.EndpointDisabled, storage.EndpointEnabled)
}

func (er *endpointRequest) own(id string) (storage.PrivateEndpoint, *apierror.Error) {
	e, ok := er.store.PrivateEndpoint(er.id.AccountID, id)
	if !ok {
		return storage.PrivateEndpoint{}, apierror.NotFound("Private endpoint not found")
	}
	return e, nil
}

func endpointError(err error) *apierror.Error {
	var se *storage.StateError
	if errors.As(err, &se) {
		return apierror.New(http.StatusConflict, "Cannot "+se.Action+" this private endpoint: its status is "+
			string(se.Status)+"; only a "+joinStatuses(se.Want)+" endpoint can be "+pastTense(se.Action))
	}
	if errors.Is(err, storage.ErrNotFound) && strings.Contains(err.Error(), "workspace") {
		return apierror.NotFound("Workspace not found")
	}
	return storeError(err, "Private endpoint")
}

func joinStatuses(ss []storage.EndpointStatus) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, " or ")
}

func pastTense(action string) string {
	switch action {
	case "update":
		return "updated"
	case "validate":
		return "validated"
	case "activate":
		return "activated"
	case "disable":
		return "disabled"
	case "enable":
		return "enabled"
	}
	return action + "d"
}

func (er *endpointRequest) list() *apierror.Error {
	offset, limit, apiErr := er.page()
	if apiErr != nil {
		return apiErr
	}
	eps, total := er.store.ListPrivateEndpoints(er.id.AccountID, offset, limit)
	out := make([]privateEndpointView, len(eps))
	for i, e := range eps {
		out[i] = newPrivateEndpointView(e)
	}
	apierror.WriteJSON(er.w, http.StatusOK, map[string]any{"data": out, "total_count": total})
	return nil
}

// endpointFields are the writable fields of a draft.
type endpointFields struct {
	name, model, baseURL, upstream string
	hasName, hasModel, hasBase     bool
	hasUpstream                    bool
	apiKey                         *string
	hasKey                         bool
}

func readEndpointFields(f *reqbody.Fields) (*endpointFields, *apierror.Error) {
	e := &endpointFields{}
	e.name, e.hasName = f.String("name")
	e.model, e.hasModel = f.String("model")
	e.baseURL, e.hasBase = f.String("base_url")
	e.upstream, e.hasUpstream = f.String("upstream_model")
	e.apiKey, e.hasKey = f.NullableString("api_key")
	if f.Err != nil {
		return nil, f.Err
	}
	switch {
	case e.hasName && strings.TrimSpace(e.name) == "":
		return nil, apierror.BadRequest("name: must not be empty")
	case e.hasModel && (e.model == "" || strings.ContainsAny(e.model, " \t\r\n")):
		return nil, apierror.BadRequest("model: expected a model id without spaces")
	case e.hasUpstream && (e.upstream == "" || strings.ContainsAny(e.upstream, " \t\r\n")):
		return nil, apierror.BadRequest("upstream_model: expected a model id without spaces")
	}
	if e.hasBase {
		if _, err := EndpointProvider(e.baseURL); err != nil {
			return nil, apierror.BadRequest("base_url: " + err.Error())
		}
		e.baseURL = strings.TrimRight(e.baseURL, "/")
	}
	if e.hasKey && e.apiKey != nil {
		k := strings.TrimSpace(*e.apiKey)
		if k == "" || len(k) > byokMaxKey || strings.IndexFunc(k, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			return nil, apierror.BadRequest("api_key: expected printable ASCII characters without spaces, at most 8192")
		}
		e.apiKey = &k
	}
	return e, nil
}

// endpointProvider derives reverse_proxy's address from a base URL.
func EndpointProvider(base string) (*catalog.Provider, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, errors.New("expected an http or https URL with a host and no query")
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p := &catalog.Provider{
		BaseURL: base, Style: openai.Style, Scheme: u.Scheme, Dial: net.JoinHostPort(u.Hostname(), port),
		Host: u.Host, BasePath: strings.TrimRight(u.EscapedPath(), "/"),
	}
	return p, p.Resolve()
}

// readPricing reads {prompt, completion, request?} as exact decimals
// (strings or numbers); required says whether prompt and completion must
// be present. prefix names the fields in errors.
func readPricing(v gjson.Result, prefix string, required bool) (storage.EndpointPricing, *apierror.Error) {
	p := storage.EndpointPricing{Prompt: "0", Completion: "0", Request: "0"}
	if !v.IsObject() {
		return p, apierror.BadRequest(prefix + ": expected an object {prompt, completion, request}")
	}
	for _, f := range []struct {
		name string
		dst  *string
		req  bool
	}{{"prompt", &p.Prompt, required}, {"completion", &p.Completion, required}, {"request", &p.Request, false}} {
		x := v.Get(f.name)
		if !x.Exists() {
			if f.req {
				return p, apierror.BadRequest(prefix + "." + f.name + ": required decimal string")
			}
			continue
		}
		if x.Type != gjson.String && x.Type != gjson.Number {
			return p, apierror.BadRequest(prefix + "." + f.name + ": expected a decimal string such as \"0.000001\"")
		}
		s := x.Str
		if x.Type == gjson.Number {
			s = x.Raw
		}
		pr, err := billing.ParsePrice(s)
		if err != nil || pr < 0 {
			return p, apierror.BadRequest(prefix + "." + f.name + ": expected a non-negative decimal with at most 15 decimal places")
		}
		*f.dst = pr.String()
	}
	return p, nil
}

// endpointFields reads the body's endpoint fields and checks a base_url
// against the customer egress policy.
func (er *endpointRequest) endpointFields(f *reqbody.Fields) (*endpointFields, *apierror.Error) {
	ef, apiErr := readEndpointFields(f)
	if apiErr == nil && ef.hasBase {
		apiErr = checkEgressURL(er.r.Context(), er.gw, "base_url", ef.baseURL)
	}
	if apiErr != nil {
		return nil, apiErr
	}
	return ef, nil
}

func (er *endpointRequest) create() *apierror.Error {
	f, apiErr := er.object()
	if apiErr != nil {
		return apiErr
	}
	ef, apiErr := er.endpointFields(f)
	if apiErr != nil {
		return apiErr
	}
	ws, _ := f.String("workspace_id")
	if f.Err != nil {
		return f.Err
	}
	switch {
	case !ef.hasName:
		return apierror.BadRequest("name: required string")
	case !ef.hasModel:
		return apierror.BadRequest("model: required string")
	case !ef.hasBase:
		return apierror.BadRequest("base_url: required string")
	}
	e := storage.PrivateEndpoint{
		ID: storage.NewEndpointID(), AccountID: er.id.AccountID, WorkspaceID: ws, Name: ef.name, Model: ef.model,
		BaseURL: ef.baseURL, UpstreamModel: ef.model, Pricing: storage.EndpointPricing{Prompt: "0", Completion: "0", Request: "0"},
	}
	if ef.hasUpstream {
		e.UpstreamModel = ef.upstream
	}
	if v, ok := f.Get("pricing"); ok {
		p, apiErr := readPricing(v, "pricing", false)
		if apiErr != nil {
			return apiErr
		}
		e.Pricing = p
	}
	if ef.apiKey != nil {
		e.SetSecret(er.sealer, *ef.apiKey)
	}
	e, err := er.store.CreatePrivateEndpoint(e)
	if err != nil {
		return endpointError(err)
	}
	return er.answer(http.StatusCreated, e)
}

func (er *endpointRequest) get(id string) *apierror.Error {
	e, apiErr := er.own(id)
	if apiErr != nil {
		return apiErr
	}
	return er.answer(http.StatusOK, e)
}

func (er *endpointRequest) update(id string) *apierror.Error {
	if _, apiErr := er.own(id); apiErr != nil {
		return apiErr
	}
	f, apiErr := er.object()
	if apiErr != nil {
		return apiErr
	}
	ef, apiErr := er.endpointFields(f)
	if apiErr != nil {
		return apiErr
	}
	return er.change(id, "update", []storage.EndpointStatus{storage.EndpointDraft},
		func(e *storage.PrivateEndpoint) error {
			reqbody.SetIf(&e.Name, ef.name, ef.hasName)
			reqbody.SetIf(&e.Model, ef.model, ef.hasModel)
			reqbody.SetIf(&e.BaseURL, ef.baseURL, ef.hasBase)
			reqbody.SetIf(&e.UpstreamModel, ef.upstream, ef.hasUpstream)
			if ef.hasKey {
				key := ""
				if ef.apiKey != nil {
					key = *ef.apiKey
				}
				e.SetSecret(er.sealer, key)
			}
			if ef.hasName || ef.hasModel || ef.hasBase || ef.hasUpstream || ef.hasKey {
				e.Validation = nil // an earlier probe no longer describes it
			}
			return nil
		})
}

func (er *endpointRequest) delete(id string) *apierror.Error {
	if _, apiErr := er.own(id); apiErr != nil {
		return apiErr
	}
	if err := er.store.DeletePrivateEndpoint(er.id.AccountID, id); err != nil {
		return endpointError(err)
	}
	apierror.WriteJSON(er.w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}

// transition moves an endpoint from one status to the next.
func (er *endpointRequest) transition(id, action string, from, to storage.EndpointStatus) *apierror.Error {
	if _, apiErr := er.own(id); apiErr != nil {
		return apiErr
	}
	return er.change(id, action, []storage.EndpointStatus{from},
		func(e *storage.PrivateEndpoint) error { e.Status = to; return nil })
}

func (er *endpointRequest) setPricing(id string) *apierror.Error {
	if _, apiErr := er.own(id); apiErr != nil {
		return apiErr
	}
	f, apiErr := er.object()
	if apiErr != nil {
		return apiErr
	}
	p, apiErr := readPricing(f.Root(), "pricing", true)
	if apiErr != nil {
		return apiErr
	}
	return er.change(id, "reprice", nil, func(e *storage.PrivateEndpoint) error { e.Pricing = p; return nil })
}

// answer writes the endpoint with status.
func (er *endpointRequest) answer(status int, e storage.PrivateEndpoint) *apierror.Error {
	apierror.WriteJSON(er.w, status, map[string]any{"data": newPrivateEndpointView(e)})
	return nil
}

// change applies fn to the endpoint when its status is one of from (any
// when from is empty) and answers with the endpoint.
func (er *endpointRequest) change(id, action string, from []storage.EndpointStatus, fn func(*storage.PrivateEndpoint) error) *apierror.Error {
	e, err := er.store.UpdatePrivateEndpoint(er.id.AccountID, id, action, from, fn)
	if err != nil {
		return endpointError(err)
	}
	return er.answer(http.StatusOK, e)
}

// validate probes a draft with a minimal chat completion and records the
// outcome: success makes it validated, failure keeps it a draft with the
// error. The answer is 200 either way, with the endpoint.
func (er *endpointRequest) validate(id string) *apierror.Error {
	cur, apiErr := er.own(id)
	if apiErr != nil {
		return apiErr
	}
	if cur.Status != storage.EndpointDraft {
		return endpointError(&storage.StateError{Action: "validate", Status: cur.Status, Want: []storage.EndpointStatus{storage.EndpointDraft}})
	}
	key, err := cur.OpenSecret(er.sealer)
	if err != nil {
		return apierror.New(http.StatusInternalServerError, "The endpoint's API key cannot be opened with this gateway's byok_encryption_key")
	}
	probeErr := probeEndpoint(er.r.Context(), cur, key, er.gw.EgressPolicy())
	e, err := er.store.UpdatePrivateEndpoint(er.id.AccountID, id, "validate", []storage.EndpointStatus{storage.EndpointDraft},
		func(e *storage.PrivateEndpoint) error {
			if !e.UpdatedAt.Equal(cur.UpdatedAt) {
				return fmt.Errorf("%w: the endpoint changed during validation; validate it again", storage.ErrConflict)
			}
			v := &storage.EndpointValidation{Succeeded: probeErr == nil, At: now().UTC()}
			if probeErr != nil {
				v.Error = probeErr.Error()
			} else {
				e.Status = storage.EndpointValidated
			}
			e.Validation = v
			return nil
		})
	if errors.Is(err, storage.ErrConflict) {
		return apierror.New(http.StatusConflict, strings.TrimPrefix(err.Error(), storage.ErrConflict.Error()+": "))
	}
	if err != nil {
		return endpointError(err)
	}
	return er.answer(http.StatusOK, e)
}

// probeEndpoint sends a one-token chat completion to the endpoint and
// checks that it answers 2xx with a chat completion object.
func probeEndpoint(ctx context.Context, e storage.PrivateEndpoint, key string, pol *egress.Policy) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{
		"model":      e.UpstreamModel,
		"messages":   []map[string]string{{"role": "user", "content": "ping"}},
		"max_tokens": 1,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the probe request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	// The connection is checked against the egress policy when dialed,
	// whatever the URL's name resolved to when it was stored.
	client := egressClient(pol)
	defer client.CloseIdleConnections()
	res, err := client.Do(req)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("the endpoint did not answer within %s", probeTimeout)
		}
		return fmt.Errorf("the endpoint is unreachable: %v", errors.Unwrap(err))
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		// The endpoint's own text may echo the key it was sent.
		msg := redact.Secrets(gjson.GetBytes(b, "error.message").Str, key)
		if msg == "" {
			return fmt.Errorf("the endpoint answered %d", res.StatusCode)
		}
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return fmt.Errorf("the endpoint answered %d: %s", res.StatusCode, msg)
	}
	if !jsoncheck.Valid(b) || !gjson.GetBytes(b, "choices").IsArray() {
		return errors.New("the endpoint's answer is not a chat completion (no choices array)")
	}
	return nil
}
