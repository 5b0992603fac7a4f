package handlers

import (
	"fmt"
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/audio"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/presets"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// pipelineStages lists the stages of an inference request, in their
// order, from its body to the provider call: the one place the pipeline's
// order is written. Each reads and changes the request's state; the first
// to refuse the request answers it. The meter then sends the attempts and
// charges the answer (Tollgate.infer).
func (t *Tollgate) pipelineStages() []pipeline.Stage {
	return []pipeline.Stage{
		// A key that cannot pay is refused before the body costs any work.
		admissionCheck{&t.meter},
		bodyReader{&t.router},
		// The preset a request names is merged before anything reads its
		// body: the guardrails scan the preset's system prompt too.
		presetBody{},
		uploadForm{},
		contentFilter{&t.router},
		// The plugins planned before routing, in the order of their
		// module IDs: web-fetch before web search, which reorders tools,
		// so that the web_fetch tool's errors name its place as the
		// client sent it.
		prerouted{t},
		&t.router,
		routePlaceholders{},
		attemptFilters{},
		pluginPlan{t},
		// Once every part of the request is known: a hit still passes
		// admission and is charged by the meter.
		responseCache{t},
	}
}

// admissionCheck refuses a key that cannot pay (metering.Meter.Precheck).
type admissionCheck struct{ m *metering.Meter }

func (s admissionCheck) Serve(st *pipeline.State, _ http.ResponseWriter, _ *http.Request) *apierror.Error {
	return s.m.Precheck(st)
}

// bodyReader reads the request's body, up to the handler's bound.
type bodyReader struct{ rt *routing.Router }

func (s bodyReader) Serve(st *pipeline.State, w http.ResponseWriter, r *http.Request) *apierror.Error {
	var apiErr *apierror.Error
	st.Body, apiErr = reqbody.Read(w, r, s.rt.MaxBodyBytes)
	return apiErr
}

// presetBody merges the preset an inference request names (its model
// "@preset/<slug>", or its preset member) into its body, by the rules of
// presets.Apply, and notes the preset for the generation record. An
// unknown or inactive preset is a 400 naming the member that names it.
type presetBody struct{}

func (presetBody) Serve(st *pipeline.State, _ http.ResponseWriter, _ *http.Request) *apierror.Error {
	kind := st.API.Dialect()
	if st.API.Op != admin.OpInfer || kind != dialect.Chat && kind != dialect.Messages && kind != dialect.Responses {
		return nil
	}
	slug, field, err := presets.Named(st.Body)
	if err != nil {
		return apierror.BadRequest(err.Error())
	}
	if slug == "" || st.ID == nil {
		return nil
	}
	v, id, status, ok := presets.StoreOf(st.Store).Designated(st.ID.AccountID, slug)
	switch {
	case !ok || v == nil:
		return apierror.BadRequest(fmt.Sprintf("%s: preset %q not found", field, slug))
	case status != record.PresetActive:
		return apierror.BadRequest(fmt.Sprintf("%s: preset %q is %s", field, slug, status))
	}
	body, err := presets.Apply(kind, st.Body, v)
	if err != nil {
		return apierror.BadRequest(err.Error())
	}
	st.Body, st.PresetID = body, id
	return nil
}

// uploadForm reads a transcription's multipart upload into its JSON form
// (audio.FormBody), which the later stages read as any request's body.
type uploadForm struct{}

func (uploadForm) Serve(st *pipeline.State, _ http.ResponseWriter, r *http.Request) *apierror.Error {
	if st.API.Sub != "/audio/transcriptions" || !audio.IsForm(r.Header.Get("Content-Type")) {
		return nil
	}
	var apiErr *apierror.Error
	st.Body, apiErr = audio.FormBody(st.Body, r.Header.Get("Content-Type"))
	return apiErr
}

// contentFilter applies the guardrails' content filters to the body
// (routing.Router.FilterBody).
type contentFilter struct{ rt *routing.Router }

func (s contentFilter) Serve(st *pipeline.State, _ http.ResponseWriter, r *http.Request) *apierror.Error {
	var apiErr *apierror.Error
	st.Body, apiErr = s.rt.FilterBody(r.Context(), st, st.Body)
	return apiErr
}

// prerouted has the plugins that plan before routing (plugin.Prerouter:
// web-fetch, web search) plan an inference request: st.Plugins gets their runs.
type prerouted struct{ t *Tollgate }

func (s prerouted) Serve(st *pipeline.State, w http.ResponseWriter, r *http.Request) *apierror.Error {
	kind := st.API.Dialect()
	if st.API.Op != admin.OpInfer || kind == dialect.Other {
		return nil
	}
	req := &st.OwnPluginReq
	*req = plugin.Request{Kind: kind, Ctx: r.Context(), Header: w.Header(), Filters: guardrails{st}}
	for _, p := range s.t.plugins {
		pr, ok := p.(plugin.Prerouter)
		if !ok {
			continue
		}
		req.Body = st.Body
		body, run, apiErr := pr.Preroute(req)
		if apiErr != nil {
			return apiErr
		}
		st.Body = body
		if run != nil {
			if st.Plugins == nil {
				st.Plugins = st.OwnPlugins[:0]
			}
			st.Plugins = append(st.Plugins, run)
		}
	}
	return nil
}

// routePlaceholders exposes the route's placeholders (State.MapRoute).
type routePlaceholders struct{}

func (routePlaceholders) Serve(st *pipeline.State, _ http.ResponseWriter, r *http.Request) *apierror.Error {
	st.MapRoute(r)
	return nil
}

// attemptFilters keeps the attempts that can serve the runs planned
// before routing (plugin.AttemptFilter: the web_fetch server tool's).
type attemptFilters struct{}

func (attemptFilters) Serve(st *pipeline.State, _ http.ResponseWriter, _ *http.Request) *apierror.Error {
	for _, run := range st.Plugins {
		if af, ok := run.(plugin.AttemptFilter); ok {
			if apiErr := af.FilterAttempts(st.Route); apiErr != nil {
				return apiErr
			}
		}
	}
	return nil
}

// pluginPlan has the plugins the request asks for plan their part.
type pluginPlan struct{ t *Tollgate }

func (s pluginPlan) Serve(st *pipeline.State, _ http.ResponseWriter, _ *http.Request) *apierror.Error {
	return s.t.planPlugins(st, st.Body)
}

// responseCache plans the response cache's part in the request
// (responsecache.Request.Plan): whether its model is cached, what the
// client's Cache-Control asks, the request's key.
type responseCache struct{ t *Tollgate }

func (s responseCache) Serve(st *pipeline.State, _ http.ResponseWriter, r *http.Request) *apierror.Error {
	if s.t.cache == nil {
		return nil
	}
	return st.Cache.Plan(s.t.cache, r.Context(), st.Store, r.Header, st.ID, st.Route, st.Body, len(st.Plugins) > 0)
}

// Interface guards
var (
	_ pipeline.Stage = admissionCheck{}
	_ pipeline.Stage = bodyReader{}
	_ pipeline.Stage = contentFilter{}
	_ pipeline.Stage = prerouted{}
	_ pipeline.Stage = (*routing.Router)(nil)
	_ pipeline.Stage = routePlaceholders{}
	_ pipeline.Stage = attemptFilters{}
	_ pipeline.Stage = pluginPlan{}
	_ pipeline.Stage = responseCache{}
)
