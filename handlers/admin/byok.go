package admin

import (
	"net/http"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// BYOK (bring your own key) credentials: an account's own provider keys,
// managed under /api/v1/byok with a management key. The provider key is
// write-only: it is sealed at rest with the app's byok_encryption_key,
// never returned (only a masked label) and never logged. The router calls a
// provider with the account's own key when the calling key's workspace
// holds an enabled credential for it, and the meter then charges the
// byok_usage counters.
//
// A credential belongs to one workspace of the account: created in the one
// workspace_id names (id or slug; omitted: the default workspace), listed
// per workspace (omitted: the default workspace) and used only by the API
// keys of that workspace. An unknown workspace is a 400, as the public
// schema has no 404 on these routes.

// Bounds of the write fields (public schema).
const (
	byokMaxName     = 255
	byokMaxKey      = 8192
	byokMaxListItem = 100
)

// msgBYOKOff answers every BYOK route when the operator set no key.
const msgBYOKOff = "BYOK is not configured on this gateway: the operator must set byok_encryption_key"

var keyHashPattern = regexp.MustCompile(`^[a-f0-9]{64}$`)

// byokView is a BYOK credential as the public schema has it.
type byokView struct {
	ID                  string   `json:"id"`
	Provider            string   `json:"provider"`
	WorkspaceID         *string  `json:"workspace_id"`
	Name                *string  `json:"name"`
	Label               string   `json:"label"`
	Disabled            bool     `json:"disabled"`
	IsFallback          bool     `json:"is_fallback"`
	IsBYOKOnly          bool     `json:"is_byok_only"`
	IsRequired          bool     `json:"is_required"`
	DeclaredZDR         *bool    `json:"declared_zdr"`
	AllowedModels       []string `json:"allowed_models"`
	AllowedAPIKeyHashes []string `json:"allowed_api_key_hashes"`
	AllowedUserIDs      []string `json:"allowed_user_ids"`
	SortOrder           int      `json:"sort_order"`
	CreatedAt           string   `json:"created_at"`
	UpdatedAt           string   `json:"updated_at"`
}

func newBYOKView(c storage.Credential) byokView {
	v := byokView{
		ID: c.ID, Provider: c.Provider, Name: c.Name, Label: c.Label, Disabled: c.Disabled,
		IsFallback: c.IsFallback, IsBYOKOnly: c.IsBYOKOnly, IsRequired: c.IsRequired, DeclaredZDR: c.DeclaredZDR,
		AllowedModels: c.AllowedModels, AllowedAPIKeyHashes: c.AllowedAPIKeyHashes, AllowedUserIDs: c.AllowedUserIDs,
		SortOrder: c.SortOrder, CreatedAt: apiTime(c.CreatedAt), UpdatedAt: apiTime(c.UpdatedAt),
	}
	if c.WorkspaceID != "" {
		ws := c.WorkspaceID
		v.WorkspaceID = &ws
	}
	return v
}

// byokRequest is one request to the BYOK routes.
type byokRequest struct {
	*adminRequest
	sealer  *storage.Sealer
	catalog *catalog.Catalog
}

// openBYOK prepares a request to the BYOK routes; they all answer 400
// while the gateway has no sealer.
func openBYOK(ar *adminRequest) (*byokRequest, *apierror.Error) {
	sealer := ar.gw.BYOKSealer()
	if sealer == nil {
		return nil, apierror.BadRequest(msgBYOKOff)
	}
	return &byokRequest{adminRequest: ar, sealer: sealer, catalog: ar.gw.Catalog()}, nil
}

// own returns one of the caller's account's credentials; another
// account's is reported as missing, so that ids cannot be probed.
func (br *byokRequest) own(id string) (storage.Credential, *apierror.Error) {
	c, ok := br.store.BYOK(br.id.AccountID, id)
	if !ok {
		return storage.Credential{}, apierror.NotFound("BYOK credential not found")
	}
	return c, nil
}

func (br *byokRequest) list() *apierror.Error {
	offset, limit, apiErr := br.page()
	if apiErr != nil {
		return apiErr
	}
	q := br.r.URL.Query()
	f := storage.BYOKFilter{AccountID: br.id.AccountID, WorkspaceID: br.id.Account.DefaultWorkspaceID,
		Provider: q.Get("provider"), Offset: offset, Limit: limit}
	if v := q.Get("workspace_id"); v != "" {
		w, ok := br.store.Workspace(br.id.AccountID, v)
		if !ok {
			return apierror.BadRequest("workspace_id: " + quote(v) + " is not a workspace of this account")
		}
		f.WorkspaceID = w.ID
	}
	creds, total := br.store.ListBYOK(f)
	out := make([]byokView, len(creds))
	for i, c := range creds {
		out[i] = newBYOKView(c)
	}
	apierror.WriteJSON(br.w, http.StatusOK, map[string]any{"data": out, "total_count": total})
	return nil
}

func (br *byokRequest) create() *apierror.Error {
	f, apiErr := br.object()
	if apiErr != nil {
		return apiErr
	}
	provider, ok := f.String("provider")
	if f.Err == nil && (!ok || provider == "") {
		return apierror.BadRequest("provider: required string")
	}
	secret, hasKey := br.secret(f)
	if f.Err == nil && !hasKey {
		return apierror.BadRequest("key: required non-empty string")
	}
	n := storage.NewBYOK{AccountID: br.id.AccountID, Provider: provider, Secret: secret}
	// The second results only say whether a member is present: f.Err
	// holds the first bad value, checked below.
	n.WorkspaceID, _ = f.String("workspace_id")
	n.Name, _ = br.name(f)
	n.Disabled, _ = f.Bool("disabled")
	n.IsFallback, _ = f.Bool("is_fallback")
	n.IsBYOKOnly, _ = f.Bool("is_byok_only")
	n.IsRequired, _ = f.Bool("is_required")
	n.DeclaredZDR, _ = f.NullableBool("declared_zdr")
	n.AllowedAPIKeyHashes, _ = stringList(f, "allowed_api_key_hashes", 1, keyHashPattern, "a key hash (64 lowercase hex digits)")
	n.AllowedModels, _ = stringList(f, "allowed_models", 0, nil, "")
	n.AllowedUserIDs, _ = stringList(f, "allowed_user_ids", 0, nil, "")
	if f.Err != nil {
		return f.Err
	}
	if apiErr := br.checkProvider(provider); apiErr != nil {
		return apiErr
	}
	c, err := br.store.CreateBYOK(n, br.sealer)
	if err != nil {
		return storeError(err, "Account")
	}
	apierror.WriteJSON(br.w, http.StatusCreated, map[string]any{"data": newBYOKView(c)})
	return nil
}

func (br *byokRequest) get(id string) *apierror.Error {
	c, apiErr := br.own(id)
	if apiErr != nil {
		return apiErr
	}
	apierror.WriteJSON(br.w, http.StatusOK, map[string]any{"data": newBYOKView(c)})
	return nil
}

func (br *byokRequest) update(id string) *apierror.Error {
	if _, apiErr := br.own(id); apiErr != nil {
		return apiErr
	}
	f, apiErr := br.object()
	if apiErr != nil {
		return apiErr
	}
	secret, hasKey := br.secret(f)
	name, hasName := br.name(f)
	disabled, hasDisabled := f.Bool("disabled")
	fallback, hasFallback := f.Bool("is_fallback")
	byokOnly, hasBYOKOnly := f.Bool("is_byok_only")
	required, hasRequired := f.Bool("is_required")
	zdr, hasZDR := f.NullableBool("declared_zdr")
	hashes, hasHashes := stringList(f, "allowed_api_key_hashes", 1, keyHashPattern, "a key hash (64 lowercase hex digits)")
	models, hasModels := stringList(f, "allowed_models", 0, nil, "")
	users, hasUsers := stringList(f, "allowed_user_ids", 0, nil, "")
	if f.Err != nil {
		return f.Err
	}
	c, err := br.store.UpdateBYOK(br.id.AccountID, id, func(c *storage.Credential) error {
		if hasKey {
			c.SetSecret(br.sealer, secret)
		}
		reqbody.SetIf(&c.Name, name, hasName)
		reqbody.SetIf(&c.Disabled, disabled, hasDisabled)
		reqbody.SetIf(&c.IsFallback, fallback, hasFallback)
		reqbody.SetIf(&c.IsBYOKOnly, byokOnly, hasBYOKOnly)
		reqbody.SetIf(&c.IsRequired, required, hasRequired)
		reqbody.SetIf(&c.DeclaredZDR, zdr, hasZDR)
		reqbody.SetIf(&c.AllowedAPIKeyHashes, hashes, hasHashes)
		reqbody.SetIf(&c.AllowedModels, models, hasModels)
		reqbody.SetIf(&c.AllowedUserIDs, users, hasUsers)
		return nil
	})
	if err != nil {
		return storeError(err, "BYOK credential")
	}
	apierror.WriteJSON(br.w, http.StatusOK, map[string]any{"data": newBYOKView(c)})
	return nil
}

func (br *byokRequest) delete(id string) *apierror.Error {
	if _, apiErr := br.own(id); apiErr != nil {
		return apiErr
	}
	if err := br.store.DeleteBYOK(br.id.AccountID, id); err != nil {
		return storeError(err, "BYOK credential")
	}
	apierror.WriteJSON(br.w, http.StatusOK, map[string]any{"deleted": true})
	return nil
}

// secret reads the write-only `key`: a non-empty header-safe string
// (printable ASCII, no spaces inside), surrounding whitespace trimmed. Its
// value never appears in an error.
func (br *byokRequest) secret(f *reqbody.Fields) (string, bool) {
	s, ok := f.String("key")
	if !ok || f.Err != nil {
		return "", false
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		f.Fail("key", "a non-empty string")
		return "", false
	case len(s) > byokMaxKey:
		f.Fail("key", "at most 8192 characters")
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			f.Fail("key", "printable ASCII characters without spaces")
			return "", false
		}
	}
	return s, true
}

// name reads the nullable `name`, at most 255 characters.
func (br *byokRequest) name(f *reqbody.Fields) (*string, bool) {
	n, ok := f.NullableString("name")
	if ok && n != nil && utf8.RuneCountInString(*n) > byokMaxName {
		f.Fail("name", "at most 255 characters")
		return nil, false
	}
	return n, ok
}

// checkProvider accepts the providers of the operator's catalog.
func (br *byokRequest) checkProvider(name string) *apierror.Error {
	names := catalogProviders(br.catalog)
	for _, n := range names {
		if n == name {
			return nil
		}
	}
	if len(names) == 0 {
		return apierror.BadRequest("provider: unknown provider " + quote(name) + "; this gateway has no providers")
	}
	return apierror.BadRequest("provider: unknown provider " + quote(name) + "; expected one of: " + strings.Join(names, ", "))
}

// catalogProviders is the sorted set of provider names in the catalog.
func catalogProviders(c *catalog.Catalog) []string {
	seen := map[string]bool{}
	var names []string
	for _, m := range c.Models() {
		for _, p := range m.Providers {
			if !seen[p.Name] {
				seen[p.Name] = true
				names = append(names, p.Name)
			}
		}
	}
	sort.Strings(names)
	return names
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// stringList reads an array-of-strings-or-null field with between minItems
// and 100 entries; a present null yields nil, true. pattern, when set,
// constrains each entry (described by what).
func stringList(f *reqbody.Fields, name string, minItems int, pattern *regexp.Regexp, what string) ([]string, bool) {
	v, ok := f.Get(name)
	if !ok || f.Err != nil {
		return nil, false
	}
	if v.Type == gjson.Null {
		return nil, true
	}
	want := "an array of strings or null"
	if minItems > 0 {
		want = "null or an array of 1 to 100 strings"
	}
	if !v.IsArray() {
		f.Fail(name, want)
		return nil, false
	}
	items := v.Array()
	if len(items) < minItems || len(items) > byokMaxListItem {
		f.Fail(name, want)
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		if it.Type != gjson.String || it.Str == "" {
			f.Fail(name, "non-empty strings")
			return nil, false
		}
		if pattern != nil && !pattern.MatchString(it.Str) {
			f.Fail(name, "entries that are "+what)
			return nil, false
		}
		out = append(out, it.Str)
	}
	return out, true
}
