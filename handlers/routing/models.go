package routing

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// maxModelsLimit is the largest page of the model lists.
const maxModelsLimit = 1000

// modelList is one of the model lists serveModels answers.
type modelList uint8

const (
	publicModels    modelList = iota // GET /models
	userModels                       // GET /models/user
	embeddingModels                  // GET /embeddings/models
)

// serveModels answers GET /models (the public catalog, narrowed and
// sorted by its query: modelQuery), GET /models/user (the models the
// calling key can use) and GET /embeddings/models (the models whose
// output is embeddings). With both offset and limit omitted the whole
// list is returned; otherwise one page and a link to the next, with the
// same query.
func (rt *Router) serveModels(w http.ResponseWriter, r *http.Request, st *pipeline.State, list modelList) error {
	perUser := list == userModels
	q := r.URL.Query()
	offset, limit, paged := 0, 0, q.Has("offset") || q.Has("limit")
	if paged {
		var apiErr *apierror.Error
		if offset, apiErr = reqbody.IntParam(q.Get("offset"), "offset", 0, 0, -1); apiErr == nil {
			limit, apiErr = reqbody.IntParam(q.Get("limit"), "limit", 500, 1, maxModelsLimit)
		}
		if apiErr != nil {
			return apierror.Fail(r, apiErr)
		}
	}
	var mq *modelQuery
	switch list {
	case publicModels:
		var apiErr *apierror.Error
		if mq, apiErr = parseModelQuery(q, false); apiErr != nil {
			return apierror.Fail(r, apiErr)
		}
	case embeddingModels:
		// Its only parameters are the page's.
		mq = &modelQuery{output: []string{"embeddings"}, minAge: -1, maxAge: -1}
	}

	var models []*catalog.Model
	if perUser || filtersCatalog(st.ID) {
		var apiErr *apierror.Error
		if models, apiErr = rt.ModelsFor(st); apiErr != nil {
			return apierror.Fail(r, apiErr)
		}
	} else {
		models = rt.catalog().Models()
	}
	if mq != nil {
		models = mq.filter(models)
	}

	total, next := len(models), "null"
	if paged {
		end := min(offset+limit, total)
		models = models[min(offset, total):end]
		if end < total {
			path := admin.APIPrefix + "/models"
			switch list {
			case userModels:
				path += "/user"
			case embeddingModels:
				path = admin.APIPrefix + "/embeddings/models"
			}
			next = strconv.Quote(path + "?offset=" + strconv.Itoa(end) + "&limit=" + strconv.Itoa(limit) + otherParams(r.URL.RawQuery))
		}
	}
	// Written by hand: the public objects are already JSON, and
	// encoding/json would re-escape them.
	var b bytes.Buffer
	b.WriteString(`{"data":[`)
	for i, m := range models {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m.Public)
	}
	fmt.Fprintf(&b, `],"total_count":%d,"links":{"next":%s}}`+"\n", total, next)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes()) // the status is sent: a failed write is a client gone
	return nil
}

// otherParams is a query's parameters other than offset and limit, as
// the client wrote them, each after a '&'.
func otherParams(rawQuery string) string {
	var b strings.Builder
	for p := range strings.SplitSeq(rawQuery, "&") {
		name, _, _ := strings.Cut(p, "=")
		if p != "" && name != "offset" && name != "limit" {
			b.WriteByte('&')
			b.WriteString(p)
		}
	}
	return b.String()
}

// countModels answers GET /models/count: the catalog's models of the
// output modalities its query asks for (text by default).
func (rt *Router) countModels(w http.ResponseWriter, r *http.Request) error {
	mq, apiErr := parseModelQuery(r.URL.Query(), true)
	if apiErr != nil {
		return apierror.Fail(r, apiErr)
	}
	apierror.WriteJSON(w, http.StatusOK, map[string]any{"data": map[string]int{"count": len(mq.filter(rt.catalog().Models()))}})
	return nil
}

// filtersCatalog reports whether GET /models answers for the caller as
// GET /models/user does: for a regular key of an organization that enabled
// is_filtered_model_catalog_enabled.
func filtersCatalog(id *gateway.Identity) bool {
	return id != nil && !id.Management &&
		id.Account.Kind == storage.AccountOrganization && id.Account.FilteredModelCatalog
}

// ModelsFor is the per-user catalog: the models the caller can use, in
// catalog order: those with a provider the gateway can call with the
// operator's key or with one of the account's BYOK credentials.
// The caller's guardrails narrow it (package policy): a model they do
// not admit, or whose usable providers they all exclude, is left out.
// Guardrails that cannot be read refuse the listing (RulesFor).
func (rt *Router) ModelsFor(st *pipeline.State) ([]*catalog.Model, *apierror.Error) {
	var out []*catalog.Model
	rules, apiErr := RulesFor(st)
	if apiErr != nil {
		return nil, apiErr
	}
	for _, m := range rt.catalog().Models() {
		if !slices.ContainsFunc(m.Providers, operatorUsable) && !rt.reachableByBYOK(m, st) {
			continue
		}
		if rules != nil && len(rules.Guardrails) > 0 && !policy.AdmitsModel(rules, m, rt.usableBy(m, st)) {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}
