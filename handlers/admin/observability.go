package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/export"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Observability destinations, under /api/v1/observability/destinations
// with a management key: where the account's generation records are
// exported (package export does the exporting). A destination's config is
// sealed at rest with the app's byok_encryption_key, so these routes need
// it set; API answers mask its secrets and header values.

// destinationTypes are every type of the public schema; export.Supported
// are those the gateway can export to.
var destinationTypes = []string{"arize", "braintrust", "clickhouse", "datadog", "grafana", "langfuse", "langsmith",
	"newrelic", "opik", "otel-collector", "posthog", "ramp", "s3", "sentry", "snowflake", "weave", "webhook"}

const msgObservabilityOff = "Observability destinations are not configured on this gateway: the operator must set byok_encryption_key, which encrypts their credentials"

// destinationView is a destination as the public schema has it.
type destinationView struct {
	ID                      string          `json:"id"`
	Type                    string          `json:"type"`
	Name                    *string         `json:"name"`
	Enabled                 bool            `json:"enabled"`
	APIKeyHashes            []string        `json:"api_key_hashes"`
	BroadcastCost           bool            `json:"broadcast_generation_cost"`
	BroadcastIdentity       bool            `json:"broadcast_generation_identity"`
	BroadcastRequestContext bool            `json:"broadcast_generation_request_context"`
	Config                  json.RawMessage `json:"config"`
	FilterRules             json.RawMessage `json:"filter_rules"`
	PrivacyMode             bool            `json:"privacy_mode"`
	Regions                 []string        `json:"regions"`
	SamplingRate            float64         `json:"sampling_rate"`
	WorkspaceID             string          `json:"workspace_id"`
	CreatedAt               string          `json:"created_at"`
	UpdatedAt               string          `json:"updated_at"`
}

func newDestinationView(d storage.Destination) destinationView {
	v := destinationView{
		ID: d.ID, Type: d.Type, Name: d.Name, Enabled: d.Enabled, APIKeyHashes: d.APIKeyHashes,
		BroadcastCost: d.BroadcastCost, BroadcastIdentity: d.BroadcastIdentity, BroadcastRequestContext: d.BroadcastRequestContext,
		Config: d.Config, FilterRules: d.FilterRules, PrivacyMode: d.PrivacyMode, Regions: d.Regions,
		SamplingRate: d.SamplingRate, WorkspaceID: d.WorkspaceID, CreatedAt: apiTime(d.CreatedAt), UpdatedAt: apiTime(d.UpdatedAt),
	}
	if len(v.FilterRules) == 0 {
		v.FilterRules = json.RawMessage("null")
	}
	if v.Regions == nil {
		v.Regions = []string{}
	}
	return v
}

type destinationRequest struct {
	*adminRequest
	sealer *storage.Sealer
	gw     gateway.Gateway
}

// openDestinations prepares a request to the observability destination
// routes; they all answer 400 while the gateway has no sealer.
func openDestinations(ar *adminRequest) (*destinationRequest, *apierror.Error) {
	sealer := ar.gw.BYOKSealer()
	if sealer == nil {
		return nil, apierror.BadRequest(msgObservabilityOff)
	}
	return &destinationRequest{adminRequest: ar, sealer: sealer, gw: ar.gw}, nil
}

func (dr *destinationRequest) own(id string) (storage.Destination, *apierror.Error) {
	d, ok := dr.store.Destination(dr.id.AccountID, id)
	if !ok {
		return storage.Destination{}, apierror.NotFound("Observability destination not found")
	}
	return d, nil
}

func (dr *destinationRequest) list() *apierror.Error {
	offset, limit, apiErr := dr.page()
	if apiErr != nil {
		return apiErr
	}
	q := dr.r.URL.Query()
	ws := dr.id.Account.DefaultWorkspaceID
	if v := q.Get("workspace_id"); v != "" {
		if v != ws {
			return apierror.NotFound("Workspace not found")
		}
	}
	dests, total := dr.store.ListDestinations(dr.id.AccountID, ws, offset, limit)
	out := make([]destinationView, len(dests))
	for i, d := range dests {
		out[i] = newDestinationView(d)
	}
	apierror.WriteJSON(dr.w, http.StatusOK, map[string]any{"data": out, "total_count": total})
	return nil
}

// settings are the fields shared by create and update.
type destinationSettings struct {
	name                  string
	hasName               bool
	enabled, hasEnabled   bool
	hashes                []string
	hasHashes             bool
	cost, hasCost         bool
	identity, hasIdentity bool
	reqctx, hasReqctx     bool
	privacy, hasPrivacy   bool
	filter                json.RawMessage
	hasFilter             bool
	rate                  float64
	hasRate               bool
	regions               []string
	hasRegions            bool
	config                json.RawMessage
	hasConfig             bool
}

func (dr *destinationRequest) settings(f *reqbody.Fields) (*destinationSettings, *apierror.Error) {
	s := &destinationSettings{}
	s.name, s.hasName = f.String("name")
	s.enabled, s.hasEnabled = f.Bool("enabled")
	s.hashes, s.hasHashes = stringList(f, "api_key_hashes", 1, keyHashPattern, "a key hash (64 lowercase hex digits)")
	s.cost, s.hasCost = f.Bool("broadcast_generation_cost")
	s.identity, s.hasIdentity = f.Bool("broadcast_generation_identity")
	s.reqctx, s.hasReqctx = f.Bool("broadcast_generation_request_context")
	s.privacy, s.hasPrivacy = f.Bool("privacy_mode")
	if f.Err != nil {
		return nil, f.Err
	}
	if s.hasName && strings.TrimSpace(s.name) == "" {
		return nil, apierror.BadRequest("name: must not be empty")
	}
	if v, ok := f.Get("filter_rules"); ok {
		s.hasFilter = true
		if v.Type != gjson.Null {
			if !v.IsObject() {
				return nil, apierror.BadRequest("filter_rules: expected an object or null")
			}
			if _, err := export.CompileFilter(json.RawMessage(v.Raw)); err != nil {
				return nil, apierror.BadRequest(err.Error())
			}
			s.filter = normalizeFilter(v)
		}
	}
	if v, ok := f.Get("sampling_rate"); ok {
		if v.Type != gjson.Number || v.Float() < 0.0001 || v.Float() > 1 {
			return nil, apierror.BadRequest("sampling_rate: expected a number between 0.0001 and 1")
		}
		s.rate, s.hasRate = v.Float(), true
	}
	if v, ok := f.Get("regions"); ok {
		if !v.IsArray() {
			return nil, apierror.BadRequest("regions: expected an array of global, europe, us or eu")
		}
		s.hasRegions = true
		s.regions = []string{}
		for _, r := range v.Array() {
			switch r.Str {
			case "global", "europe", "us":
				s.regions = append(s.regions, r.Str)
			case "eu":
				s.regions = append(s.regions, "europe")
			default:
				return nil, apierror.BadRequest("regions: expected an array of global, europe, us or eu")
			}
		}
	}
	if v, ok := f.Get("config"); ok {
		if !v.IsObject() {
			return nil, apierror.BadRequest("config: expected an object")
		}
		s.config, s.hasConfig = json.RawMessage(v.Raw), true
	}
	return s, nil
}

// normalizeFilter fills the defaults of filter_rules (enabled true, logic
// "and") so that answers show what is applied.
func normalizeFilter(v gjson.Result) json.RawMessage {
	type ruleOut struct {
		Field    string `json:"field"`
		Operator string `json:"operator"`
		Value    any    `json:"value,omitempty"`
	}
	type groupOut struct {
		Logic string    `json:"logic"`
		Rules []ruleOut `json:"rules"`
	}
	out := struct {
		Enabled bool       `json:"enabled"`
		Groups  []groupOut `json:"groups"`
	}{Enabled: true, Groups: []groupOut{}}
	if e := v.Get("enabled"); e.Exists() {
		out.Enabled = e.Bool()
	}
	for _, g := range v.Get("groups").Array() {
		og := groupOut{Logic: "and", Rules: []ruleOut{}}
		if l := g.Get("logic"); l.Exists() {
			og.Logic = l.Str
		}
		for _, r := range g.Get("rules").Array() {
			or := ruleOut{Field: r.Get("field").Str, Operator: r.Get("operator").Str}
			if val := r.Get("value"); val.Exists() {
				or.Value = val.Value()
			}
			og.Rules = append(og.Rules, or)
		}
		out.Groups = append(out.Groups, og)
	}
	b, _ := json.Marshal(out)
	return b
}

// sealConfig checks the config for the type and stores its sealed and
// public forms in d; it returns the full config when a webhook secret was
// generated, to show once.
func (dr *destinationRequest) sealConfig(d *storage.Destination, raw json.RawMessage, prev export.Config) (export.Config, *apierror.Error) {
	full, generated, err := export.PrepareConfig(d.Type, raw, prev)
	if err != nil {
		return nil, apierror.BadRequest(err.Error())
	}
	if name, u := export.URLField(d.Type, full); u != "" {
		if apiErr := checkEgressURL(dr.r.Context(), dr.gw, "config."+name, u); apiErr != nil {
			return nil, apiErr
		}
	}
	// full was read from JSON (strings, numbers, booleans, nested maps):
	// encoding it again cannot fail.
	b, _ := json.Marshal(full)
	d.SealConfig(dr.sealer, b)
	d.Config, _ = json.Marshal(export.Public(d.Type, full))
	if generated {
		return full, nil
	}
	return nil, nil
}

func (dr *destinationRequest) create() *apierror.Error {
	f, apiErr := dr.object()
	if apiErr != nil {
		return apiErr
	}
	typ, ok := f.String("type")
	if f.Err == nil && !ok {
		return apierror.BadRequest("type: required string")
	}
	ws, _ := f.String("workspace_id")
	if f.Err != nil {
		return f.Err
	}
	s, apiErr := dr.settings(f)
	if apiErr != nil {
		return apiErr
	}
	if !slices.Contains(destinationTypes, typ) {
		return apierror.BadRequest("type: expected one of " + strings.Join(destinationTypes, ", "))
	}
	if !export.IsSupported(typ) {
		return apierror.BadRequest("type: the gateway cannot export to " + quote(typ) + "; supported types: " + strings.Join(export.Supported, ", "))
	}
	if !s.hasName {
		return apierror.BadRequest("name: required string")
	}
	if !s.hasConfig {
		return apierror.BadRequest("config: required object")
	}
	name := s.name
	d := storage.Destination{
		ID: storage.NewEndpointID(), AccountID: dr.id.AccountID, WorkspaceID: ws, Type: typ, Name: &name,
		Enabled: !s.hasEnabled || s.enabled, APIKeyHashes: s.hashes, BroadcastCost: s.cost,
		BroadcastIdentity: s.identity, BroadcastRequestContext: s.reqctx, PrivacyMode: s.privacy,
		FilterRules: s.filter, SamplingRate: 1, Regions: []string{"global"},
	}
	if s.hasRate {
		d.SamplingRate = s.rate
	}
	if s.hasRegions {
		d.Regions = s.regions
	}
	shown, apiErr := dr.sealConfig(&d, s.config, nil)
	if apiErr != nil {
		return apiErr
	}
	d, err := dr.store.CreateDestination(d)
	if err != nil {
		return destinationError(err)
	}
	v := newDestinationView(d)
	if shown != nil {
		// A generated webhook secret is shown in full once, here.
		pub := export.Public(d.Type, shown)
		pub["secret"] = shown["secret"]
		v.Config, _ = json.Marshal(pub) // values read from JSON: cannot fail
	}
	apierror.WriteJSON(dr.w, http.StatusCreated, map[string]any{"data": v})
	return nil
}

func destinationError(err error) *apierror.Error {
	switch {
	case errors.Is(err, storage.ErrConflict):
		return apierror.New(http.StatusConflict, strings.TrimPrefix(err.Error(), storage.ErrConflict.Error()+": "))
	case errors.Is(err, storage.ErrNotFound) && strings.Contains(err.Error(), "workspace"):
		return apierror.NotFound("Workspace not found")
	}
	return storeError(err, "Observability destination")
}

func (dr *destinationRequest) get(id string) *apierror.Error {
	d, apiErr := dr.own(id)
	if apiErr != nil {
		return apiErr
	}
	apierror.WriteJSON(dr.w, http.StatusOK, map[string]any{"data": newDestinationView(d)})
	return nil
}

func (dr *destinationRequest) update(id string) *apierror.Error {
	cur, apiErr := dr.own(id)
	if apiErr != nil {
		return apiErr
	}
	f, apiErr := dr.object()
	if apiErr != nil {
		return apiErr
	}
	s, apiErr := dr.settings(f)
	if apiErr != nil {
		return apiErr
	}
	var prev export.Config
	if s.hasConfig {
		// A stored config that cannot be opened or read (its sealing key
		// replaced) leaves prev empty: the new config then stands alone,
		// and a webhook without a secret gets a new one, returned in this
		// answer as on creation, rather than the update failing for good.
		raw, err := cur.OpenConfig(dr.sealer)
		if err == nil && json.Unmarshal(raw, &prev) != nil {
			prev = nil
		}
		if _, apiErr := dr.sealConfig(&cur, s.config, prev); apiErr != nil {
			return apiErr
		}
	}
	d, err := dr.store.UpdateDestination(dr.id.AccountID, id, func(d *storage.Destination) error {
		if s.hasName {
			name := s.name
			d.Name = &name
		}
		reqbody.SetIf(&d.Enabled, s.enabled, s.hasEnabled)
		reqbody.SetIf(&d.APIKeyHashes, s.hashes, s.hasHashes)
		reqbody.SetIf(&d.BroadcastCost, s.cost, s.hasCost)
		reqbody.SetIf(&d.BroadcastIdentity, s.identity, s.hasIdentity)
		reqbody.SetIf(&d.BroadcastRequestContext, s.reqctx, s.hasReqctx)
		reqbody.SetIf(&d.PrivacyMode, s.privacy, s.hasPrivacy)
		reqbody.SetIf(&d.FilterRules, s.filter, s.hasFilter)
		reqbody.SetIf(&d.SamplingRate, s.rate, s.hasRate)
		reqbody.SetIf(&d.Regions, s.regions, s.hasRegions)
		if s.hasConfig {
			d.Config, d.Sealed = cur.Config, cur.Sealed
		}
		return nil
	})
	if err != nil {
		return destinationError(err)
	}
	apierror.WriteJSON(dr.w, http.StatusOK, map[string]any{"data": newDestinationView(d)})
	return nil
}

func (dr *destinationRequest) delete(id string) *apierror.Error {
	if _, apiErr := dr.own(id); apiErr != nil {
		return apiErr
	}
	if err := dr.store.DeleteDestination(dr.id.AccountID, id); err != nil {
		return destinationError(err)
	}
	apierror.WriteJSON(dr.w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}
