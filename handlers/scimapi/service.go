// Package scimapi is the SCIM 2.0 service (RFC 7643/7644) through which
// an organization's identity provider provisions its members and groups:
// the HTTP protocol over the records of package scim.
package scimapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	scimlib "github.com/elimity-com/scim"
	scimerrors "github.com/elimity-com/scim/errors"
	"github.com/elimity-com/scim/optional"
	"github.com/elimity-com/scim/schema"
	filter "github.com/scim2/filter-parser/v2"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/scim"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Prefix is where the SCIM 2.0 service (RFC 7643/7644) for the
// organizations' identity providers is served, on the gateway's site:
// /scim/v2/Users, /scim/v2/Groups, /scim/v2/ServiceProviderConfig,
// /scim/v2/Schemas and /scim/v2/ResourceTypes. The bearer token is the
// organization's SCIM token (issued by the operator); requests without a
// valid one get a SCIM 401.
//
// SCIM Users are the organization's members: userName and the primary
// email set the member's email (a userName that is an address serves when
// no email is given), name.givenName/familyName its first and last name,
// active false deactivates it (removed from every workspace, as for any
// deactivated member); DELETE deactivates it too and hides it from the
// service. SCIM Groups are stored as identity-provider groups with their
// members; group mappings and sync jobs (package scim) turn them into
// workspace memberships.
const Prefix = "/scim/v2"

// Serves reports whether path is the SCIM service's.
func Serves(path string) bool {
	return path == Prefix || strings.HasPrefix(path, Prefix+"/")
}

// maxBody bounds a SCIM request body.
const maxBody = 1 << 20

func init() {
	// Microsoft Entra sends booleans as "True"/"False" strings.
	schema.SetAllowStringValues(true)
}

type callerKey struct{}

// caller is the organization a SCIM request acts for.
type caller struct {
	store     *scim.Store
	accountID string
}

func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(callerKey{}).(caller)
	return c
}

// Service is the SCIM 2.0 service under Prefix, an http.Handler.
type Service struct {
	srv    scimlib.Server
	stores func() (*storage.Store, error)
	logger *zap.Logger
}

// NewService builds the SCIM service over the store that stores returns
// at each request (the gateway's current one).
func NewService(stores func() (*storage.Store, error), logger *zap.Logger) (*Service, error) {
	srv, err := newServer()
	if err != nil {
		return nil, err
	}
	return &Service{srv: srv, stores: stores, logger: logger}, nil
}

// newServer builds the SCIM library's server; its resource handlers find
// the store and the organization in the request's context.
func newServer() (scimlib.Server, error) {
	return scimlib.NewServer(&scimlib.ServerArgs{
		ServiceProviderConfig: &scimlib.ServiceProviderConfig{
			AuthenticationSchemes: []scimlib.AuthenticationScheme{{
				Type: scimlib.AuthenticationTypeOauthBearerToken, Name: "OAuth Bearer Token",
				Description: "The organization's SCIM token, issued by the gateway's operator", Primary: true,
			}},
			MaxResults: 100, SupportFiltering: true, SupportPatch: true,
		},
		ResourceTypes: []scimlib.ResourceType{
			{ID: optional.NewString("User"), Name: "User", Endpoint: "/Users",
				Description: optional.NewString("Organization members"), Schema: schema.CoreUserSchema(), Handler: userHandler{}},
			{ID: optional.NewString("Group"), Name: "Group", Endpoint: "/Groups",
				Description: optional.NewString("Identity-provider groups"), Schema: schema.CoreGroupSchema(), Handler: groupHandler{}},
		},
	})
}

// ServeHTTP authenticates the SCIM token and hands the request to the
// SCIM server.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st, err := s.stores()
	if err != nil {
		s.logger.Error("store unavailable", zap.Error(err))
		writeError(w, scimerrors.ScimErrorInternal)
		return
	}
	store := scim.StoreOf(st)
	token, ok := bearer(r)
	var acct storage.Account
	if ok {
		acct, ok = store.Account(token)
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="scim"`)
		writeError(w, scimerrors.ScimError{Status: http.StatusUnauthorized,
			Detail: "A valid SCIM bearer token of the organization is required"})
		return
	}
	r2 := r.WithContext(context.WithValue(r.Context(), callerKey{}, caller{store: store, accountID: acct.ID}))
	u := *r.URL
	u.Path = strings.TrimPrefix(r.URL.Path, "/scim")
	u.RawPath = ""
	r2.URL = &u
	r2.Header.Del("Authorization")
	body, e := readBody(w, r)
	if e != nil {
		writeError(w, *e)
		return
	}
	r2.Body = io.NopCloser(bytes.NewReader(body))
	s.srv.ServeHTTP(w, r2)
}

// bearer returns the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// readBody reads a request body up to maxBody and checks it with
// jsoncheck (CheckText: its strings are names and ids), because the SCIM
// library decodes it with encoding/json, which recurses up to 10,000
// levels and lets the last of repeated keys win. Its errors carry the
// messages of the gateway's other routes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *scimerrors.ScimError) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, &scimerrors.ScimError{Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("Request body is larger than %d bytes", maxBody)}
	}
	if err != nil {
		return nil, &scimerrors.ScimError{Status: http.StatusBadRequest, Detail: "Could not read request body"}
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return b, nil // the library answers for a missing body
	}
	if err := jsoncheck.CheckText(b, nil); err != nil {
		e := scimerrors.ScimErrorInvalidSyntax
		e.Detail = bodyMessage(err)
		return nil, &e
	}
	return b, nil
}

// bodyMessage says what is wrong with a body jsoncheck refused.
func bodyMessage(err *jsoncheck.Error) string {
	switch err.Kind {
	case jsoncheck.TooDeep:
		return fmt.Sprintf("Request body nests deeper than %d levels", jsoncheck.MaxDepth)
	case jsoncheck.Syntax:
		return "Request body is not valid JSON"
	}
	return err.Error()
}

func writeError(w http.ResponseWriter, e scimerrors.ScimError) {
	b, _ := json.Marshal(e)
	w.Header().Set("Content-Type", "application/scim+json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(b) // the status is sent: a failed write is a client gone
}

// scimError maps a store error to a SCIM error.
func scimError(err error, id string) error {
	msg := err.Error()
	for _, s := range []error{scim.ErrInvalid, scim.ErrConflict, scim.ErrNotFound} {
		msg = strings.TrimPrefix(msg, s.Error()+": ")
	}
	switch {
	case errors.Is(err, scim.ErrInvalid):
		e := scimerrors.ScimErrorInvalidValue
		e.Detail = msg
		return e
	case errors.Is(err, scim.ErrConflict):
		e := scimerrors.ScimErrorUniqueness
		e.Detail = msg
		return e
	case errors.Is(err, scim.ErrNotFound):
		if err == scim.ErrNotFound {
			return scimerrors.ScimErrorResourceNotFound(id)
		}
		e := scimerrors.ScimErrorInvalidValue
		e.Detail = msg
		return e
	}
	return scimerrors.ScimErrorInternal
}

func invalidValue(detail string) error {
	e := scimerrors.ScimErrorInvalidValue
	e.Detail = detail
	return e
}

// page applies startIndex/count and the filter to resources.
func scimPage(params scimlib.ListRequestParams, all []scimlib.Resource) scimlib.Page {
	matched := make([]scimlib.Resource, 0, len(all))
	for _, res := range all {
		if params.FilterValidator != nil {
			attrs := map[string]any{}
			for k, v := range res.Attributes {
				attrs[k] = v
			}
			attrs["id"] = res.ID
			if res.ExternalID.Present() {
				attrs["externalId"] = res.ExternalID.Value()
			}
			if params.FilterValidator.PassesFilter(attrs) != nil {
				continue
			}
		}
		matched = append(matched, res)
	}
	lo := min(params.StartIndex-1, len(matched))
	hi := min(lo+params.Count, len(matched))
	return scimlib.Page{TotalResults: len(matched), Resources: matched[lo:hi]}
}

// --- Users ---

type userHandler struct{}

func userResource(u scim.User) scimlib.Resource {
	name := map[string]any{}
	var parts []string
	if u.FirstName != nil {
		name["givenName"] = *u.FirstName
		parts = append(parts, *u.FirstName)
	}
	if u.LastName != nil {
		name["familyName"] = *u.LastName
		parts = append(parts, *u.LastName)
	}
	attrs := scimlib.ResourceAttributes{
		"userName": u.UserName,
		"active":   u.Active,
		"emails":   []any{map[string]any{"value": u.Email, "primary": true, "type": "work"}},
	}
	if len(name) > 0 {
		attrs["name"] = name
		attrs["displayName"] = strings.Join(parts, " ")
	}
	return scimResource(u.ID, attrs, u.ExternalID, u.CreatedAt, u.UpdatedAt)
}

// scimResource is a SCIM resource with its externalId (when set) and its
// creation and modification times.
func scimResource(id string, attrs scimlib.ResourceAttributes, externalID *string, created, updated time.Time) scimlib.Resource {
	res := scimlib.Resource{ID: id, Attributes: attrs}
	if externalID != nil {
		res.ExternalID = optional.NewString(*externalID)
	}
	res.Meta = scimlib.Meta{Created: &created, LastModified: &updated}
	return res
}

// userInput reads a user's attributes as the store takes them.
func userInput(a scimlib.ResourceAttributes) (scim.UserInput, error) {
	in := scim.UserInput{Active: true}
	in.UserName, _ = a["userName"].(string) // a missing or non-string userName is refused just below
	if in.UserName == "" {
		return in, invalidValue("userName: required")
	}
	if ext, ok := a["externalId"].(string); ok {
		in.ExternalID = &ext
	}
	if name, ok := a["name"].(map[string]any); ok {
		if g, ok := name["givenName"].(string); ok {
			in.FirstName = &g
		}
		if f, ok := name["familyName"].(string); ok {
			in.LastName = &f
		}
	}
	if emails, ok := a["emails"].([]any); ok {
		for _, e := range emails {
			m, _ := e.(map[string]any)
			v, _ := m["value"].(string)
			if v == "" {
				continue
			}
			if p, _ := m["primary"].(bool); p || in.Email == "" {
				in.Email = v
			}
		}
	}
	if in.Email == "" {
		in.Email = in.UserName
	}
	if active, ok := boolValue(a["active"]); ok {
		in.Active = active
	} else if a["active"] != nil {
		return in, invalidValue("active: expected a boolean")
	}
	return in, nil
}

func boolValue(v any) (bool, bool) {
	switch b := v.(type) {
	case bool:
		return b, true
	case string:
		switch strings.ToLower(b) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	return false, false
}

func (userHandler) Create(r *http.Request, a scimlib.ResourceAttributes) (scimlib.Resource, error) {
	c := callerOf(r)
	in, err := userInput(a)
	if err != nil {
		return scimlib.Resource{}, err
	}
	u, err := c.store.ProvisionUser(c.accountID, in)
	if err != nil {
		return scimlib.Resource{}, scimError(err, "")
	}
	return userResource(u), nil
}

func (userHandler) Get(r *http.Request, id string) (scimlib.Resource, error) {
	c := callerOf(r)
	u, ok := c.store.User(c.accountID, id)
	if !ok {
		return scimlib.Resource{}, scimerrors.ScimErrorResourceNotFound(id)
	}
	return userResource(u), nil
}

func (userHandler) GetAll(r *http.Request, params scimlib.ListRequestParams) (scimlib.Page, error) {
	c := callerOf(r)
	users := c.store.Users(c.accountID)
	all := make([]scimlib.Resource, len(users))
	for i, u := range users {
		all[i] = userResource(u)
	}
	return scimPage(params, all), nil
}

func (userHandler) Replace(r *http.Request, id string, a scimlib.ResourceAttributes) (scimlib.Resource, error) {
	c := callerOf(r)
	if _, ok := c.store.User(c.accountID, id); !ok {
		return scimlib.Resource{}, scimerrors.ScimErrorResourceNotFound(id)
	}
	in, err := userInput(a)
	if err != nil {
		return scimlib.Resource{}, err
	}
	u, err := c.store.ReplaceUser(c.accountID, id, in)
	if err != nil {
		return scimlib.Resource{}, scimError(err, id)
	}
	return userResource(u), nil
}

func (userHandler) Delete(r *http.Request, id string) error {
	c := callerOf(r)
	if _, ok := c.store.User(c.accountID, id); !ok {
		return scimerrors.ScimErrorResourceNotFound(id)
	}
	if err := c.store.DeleteUser(c.accountID, id); err != nil {
		return scimError(err, id)
	}
	return nil
}

// Patch applies the operations to the user's current attributes and
// replaces it with the result.
func (h userHandler) Patch(r *http.Request, id string, ops []scimlib.PatchOperation) (scimlib.Resource, error) {
	c := callerOf(r)
	u, ok := c.store.User(c.accountID, id)
	if !ok {
		return scimlib.Resource{}, scimerrors.ScimErrorResourceNotFound(id)
	}
	res := userResource(u)
	a := res.Attributes
	if res.ExternalID.Present() {
		a["externalId"] = res.ExternalID.Value()
	}
	for _, op := range ops {
		if err := patchUser(a, op); err != nil {
			return scimlib.Resource{}, err
		}
	}
	return h.Replace(r, id, a)
}

func patchUser(a scimlib.ResourceAttributes, op scimlib.PatchOperation) error {
	if op.Path == nil {
		m, ok := op.Value.(map[string]any)
		if !ok || op.Op == scimlib.PatchOperationRemove {
			return invalidValue("an operation without a path needs an object value")
		}
		for k, v := range m {
			if err := patchUser(a, scimlib.PatchOperation{Op: op.Op, Path: pathOf(k), Value: v}); err != nil {
				return err
			}
		}
		return nil
	}
	name := op.Path.AttributePath.AttributeName
	sub := op.Path.AttributePath.SubAttributeName()
	if sub == "" {
		sub = op.Path.SubAttributeName()
	}
	switch {
	case name == "emails" && op.Path.ValueExpression != nil || name == "emails" && sub == "value":
		if op.Op == scimlib.PatchOperationRemove {
			return invalidValue("emails: a member's email cannot be removed")
		}
		v, ok := op.Value.(string)
		if !ok {
			return invalidValue("emails.value: expected a string")
		}
		a["emails"] = []any{map[string]any{"value": v, "primary": true}}
	case sub != "":
		parent, _ := a[name].(map[string]any)
		if parent == nil {
			parent = map[string]any{}
		}
		if op.Op == scimlib.PatchOperationRemove {
			delete(parent, sub)
		} else {
			parent[sub] = op.Value
		}
		a[name] = parent
	case op.Op == scimlib.PatchOperationRemove:
		delete(a, name)
	case name == "name":
		m, ok := op.Value.(map[string]any)
		if !ok {
			return invalidValue("name: expected an object")
		}
		parent, _ := a["name"].(map[string]any)
		if parent == nil || op.Op == scimlib.PatchOperationReplace {
			parent = map[string]any{}
		}
		for k, v := range m {
			parent[k] = v
		}
		a["name"] = parent
	default:
		a[name] = op.Value
	}
	return nil
}

// pathOf turns an attribute name (possibly "name.givenName") into a path.
func pathOf(k string) *filter.Path {
	name, sub, ok := strings.Cut(k, ".")
	p := &filter.Path{AttributePath: filter.AttributePath{AttributeName: name}}
	if ok {
		p.AttributePath.SubAttribute = &sub
	}
	return p
}

// --- Groups ---

type groupHandler struct{}

func groupResource(g scim.Group, users map[string]scim.User) scimlib.Resource {
	members := make([]any, 0, len(g.Members))
	for _, id := range g.MemberIDs() {
		m := map[string]any{"value": id, "$ref": "Users/" + id, "type": "User"}
		if u, ok := users[id]; ok {
			m["display"] = u.UserName
		}
		members = append(members, m)
	}
	attrs := scimlib.ResourceAttributes{"displayName": g.DisplayName, "members": members}
	return scimResource(g.ID, attrs, g.ExternalID, g.CreatedAt, g.UpdatedAt)
}

func (c caller) usersByID() map[string]scim.User {
	out := map[string]scim.User{}
	for _, u := range c.store.Users(c.accountID) {
		out[u.ID] = u
	}
	return out
}

// memberValues reads the "value" of each entry of a members array.
func memberValues(v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		if m, isMap := v.(map[string]any); isMap {
			list = []any{m}
		} else {
			return nil, invalidValue("members: expected an array of {value}")
		}
	}
	var out []string
	for _, e := range list {
		m, _ := e.(map[string]any)
		id, _ := m["value"].(string)
		if id == "" {
			return nil, invalidValue("members: every member needs a value (a user id)")
		}
		out = append(out, id)
	}
	return out, nil
}

func (groupHandler) Create(r *http.Request, a scimlib.ResourceAttributes) (scimlib.Resource, error) {
	c := callerOf(r)
	name, _ := a["displayName"].(string)
	members, err := memberValues(a["members"])
	if err != nil {
		return scimlib.Resource{}, err
	}
	var ext *string
	if e, ok := a["externalId"].(string); ok {
		ext = &e
	}
	g, err := c.store.CreateGroup(c.accountID, name, ext, members)
	if err != nil {
		return scimlib.Resource{}, scimError(err, "")
	}
	return groupResource(g, c.usersByID()), nil
}

func (groupHandler) Get(r *http.Request, id string) (scimlib.Resource, error) {
	c := callerOf(r)
	g, ok := c.store.Group(c.accountID, id)
	if !ok {
		return scimlib.Resource{}, scimerrors.ScimErrorResourceNotFound(id)
	}
	return groupResource(g, c.usersByID()), nil
}

func (groupHandler) GetAll(r *http.Request, params scimlib.ListRequestParams) (scimlib.Page, error) {
	c := callerOf(r)
	users := c.usersByID()
	groups := c.store.Groups(c.accountID)
	all := make([]scimlib.Resource, len(groups))
	for i, g := range groups {
		all[i] = groupResource(g, users)
	}
	return scimPage(params, all), nil
}

func (groupHandler) Replace(r *http.Request, id string, a scimlib.ResourceAttributes) (scimlib.Resource, error) {
	c := callerOf(r)
	members, err := memberValues(a["members"])
	if err != nil {
		return scimlib.Resource{}, err
	}
	name, _ := a["displayName"].(string)
	g, err := c.store.UpdateGroup(c.accountID, id, func(g *scim.Group) error {
		g.DisplayName = name
		g.ExternalID = nil
		if e, ok := a["externalId"].(string); ok {
			g.ExternalID = &e
		}
		g.Members = map[string]bool{}
		for _, m := range members {
			g.Members[m] = true
		}
		return nil
	})
	if err != nil {
		return scimlib.Resource{}, scimError(err, id)
	}
	return groupResource(g, c.usersByID()), nil
}

func (groupHandler) Delete(r *http.Request, id string) error {
	c := callerOf(r)
	if err := c.store.DeleteGroup(c.accountID, id); err != nil {
		return scimError(err, id)
	}
	return nil
}

func (groupHandler) Patch(r *http.Request, id string, ops []scimlib.PatchOperation) (scimlib.Resource, error) {
	c := callerOf(r)
	var opErr error
	g, err := c.store.UpdateGroup(c.accountID, id, func(g *scim.Group) error {
		for _, op := range ops {
			if opErr = patchGroup(g, op); opErr != nil {
				return scim.ErrInvalid
			}
		}
		return nil
	})
	if opErr != nil {
		return scimlib.Resource{}, opErr
	}
	if err != nil {
		return scimlib.Resource{}, scimError(err, id)
	}
	return groupResource(g, c.usersByID()), nil
}

func patchGroup(g *scim.Group, op scimlib.PatchOperation) error {
	if op.Path == nil {
		m, ok := op.Value.(map[string]any)
		if !ok || op.Op == scimlib.PatchOperationRemove {
			return invalidValue("an operation without a path needs an object value")
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := patchGroup(g, scimlib.PatchOperation{Op: op.Op, Path: pathOf(k), Value: m[k]}); err != nil {
				return err
			}
		}
		return nil
	}
	switch op.Path.AttributePath.AttributeName {
	case "displayName":
		s, ok := op.Value.(string)
		if !ok || op.Op == scimlib.PatchOperationRemove {
			return invalidValue("displayName: expected a string")
		}
		g.DisplayName = s
	case "externalId":
		if s, ok := op.Value.(string); ok && op.Op != scimlib.PatchOperationRemove {
			g.ExternalID = &s
		} else {
			g.ExternalID = nil
		}
	case "members":
		return patchMembers(g, op)
	default:
		e := scimerrors.ScimErrorNoTarget
		e.Detail = "unsupported path " + op.Path.String()
		return e
	}
	return nil
}

func patchMembers(g *scim.Group, op scimlib.PatchOperation) error {
	// members[value eq "id"]: the member named by the filter.
	if op.Path.ValueExpression != nil {
		e, ok := op.Path.ValueExpression.(*filter.AttributeExpression)
		id, isStr := "", false
		if ok {
			id, isStr = e.CompareValue.(string)
		}
		if !ok || e.AttributePath.AttributeName != "value" || e.Operator != filter.EQ || !isStr {
			return invalidValue(`members: only the filter members[value eq "<user id>"] is supported`)
		}
		if op.Op != scimlib.PatchOperationRemove {
			return invalidValue("members[...]: only remove takes a filter")
		}
		delete(g.Members, id)
		return nil
	}
	ids, err := memberValues(op.Value)
	if err != nil {
		return err
	}
	switch op.Op {
	case scimlib.PatchOperationAdd:
		for _, id := range ids {
			g.Members[id] = true
		}
	case scimlib.PatchOperationReplace:
		g.Members = map[string]bool{}
		for _, id := range ids {
			g.Members[id] = true
		}
	case scimlib.PatchOperationRemove:
		if op.Value == nil {
			g.Members = map[string]bool{}
		}
		for _, id := range ids {
			delete(g.Members, id)
		}
	}
	return nil
}
