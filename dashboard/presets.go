package dashboard

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// The presets pages: the account's presets, each with its versions. An
// owner or admin makes a preset, or its next version, from a config
// object and a system prompt, through the API's
// POST /presets/{slug}/chat/completions; a member sees them.

func (d *Dashboard) presetsRoutes(page pageFunc) {
	page("GET /presets", d.presetsList)
	page("POST /presets", d.createPreset)
	page("GET /presets/{slug}", d.presetPage)
	page("POST /presets/{slug}", d.updatePreset)
	page("POST /presets/{slug}/details", d.updatePresetDetails)
}

type presetsData struct {
	Prefix    string
	CanManage bool
	Presets   []gjson.Result
	Off       string // why the presets could not be listed
	Form      url.Values
	Errors    formErrors
	Saved     string
}

type presetData struct {
	Prefix    string
	CanManage bool
	Preset    gjson.Result
	Versions  []gjson.Result
	Config    string // the designated version's config, indented
	System    string
	Form      url.Values
	Errors    formErrors
	Saved     bool
}

func (d *Dashboard) presetsList(w http.ResponseWriter, r *http.Request, s Session) {
	d.renderPresets(w, r, s, http.StatusOK, nil, nil)
}

func (d *Dashboard) renderPresets(w http.ResponseWriter, r *http.Request, s Session, status int, form url.Values, errs formErrors) {
	data := presetsData{Prefix: d.Prefix, CanManage: s.CanManageAccount(), Form: form, Errors: errs, Saved: r.URL.Query().Get("saved")}
	if data.Form == nil {
		data.Form = url.Values{"config": {"{\n  \"model\": \"\"\n}"}}
	}
	if a := d.callAccount(r, s, http.MethodGet, "/presets", "limit=100", nil); a.ok() {
		data.Presets = a.get("data").Array()
	} else {
		data.Off = a.Err.Message
	}
	d.page(w, r, status, "Presets", "presets", "presets", data)
}

// presetBody is the chat completions body a preset's next version is made
// from: the config object's members and the system prompt as a system
// message. A config that is not a JSON object is an error naming it.
func presetBody(config, system string) (map[string]any, string) {
	body := map[string]any{}
	if strings.TrimSpace(config) != "" {
		dec := json.NewDecoder(bytes.NewReader([]byte(config)))
		dec.UseNumber()
		if err := dec.Decode(&body); err != nil || body == nil {
			return nil, "config: expected a JSON object"
		}
	}
	delete(body, "messages")
	if strings.TrimSpace(system) != "" {
		body["messages"] = []map[string]string{{"role": "system", "content": system}}
	}
	return body, ""
}

func (d *Dashboard) createPreset(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "make presets") {
		return
	}
	slug := strings.TrimSpace(r.PostFormValue("slug"))
	body, bad := presetBody(r.PostFormValue("config"), r.PostFormValue("system_prompt"))
	if bad != "" {
		d.renderPresets(w, r, s, http.StatusBadRequest, r.PostForm, formErrors{"config": strings.TrimPrefix(bad, "config: ")})
		return
	}
	if slug == "" {
		d.renderPresets(w, r, s, http.StatusBadRequest, r.PostForm, formErrors{"slug": "required"})
		return
	}
	a := d.callAccount(r, s, http.MethodPost, "/presets/"+url.PathEscape(slug)+"/chat/completions", "", body)
	d.logAction(r, s, "make preset", a)
	if !a.ok() {
		d.renderPresets(w, r, s, a.Status, r.PostForm, fieldError(a.Err, "slug", "model", "provider", "config"))
		return
	}
	http.Redirect(w, r, d.Prefix+"/presets/"+url.PathEscape(slug)+"?saved=1", http.StatusSeeOther)
}

func (d *Dashboard) presetPage(w http.ResponseWriter, r *http.Request, s Session) {
	d.renderPreset(w, r, s, http.StatusOK, nil, nil)
}

func (d *Dashboard) renderPreset(w http.ResponseWriter, r *http.Request, s Session, status int, form url.Values, errs formErrors) {
	slug := url.PathEscape(r.PathValue("slug"))
	a := d.callAccount(r, s, http.MethodGet, "/presets/"+slug, "", nil)
	if !a.ok() {
		d.errorPage(w, r, http.StatusNotFound, "Preset not found", "There is no preset "+r.PathValue("slug")+" in this account.")
		return
	}
	data := presetData{Prefix: d.Prefix, CanManage: s.CanManageAccount(), Preset: a.get("data"), Form: form, Errors: errs,
		Saved: r.URL.Query().Get("saved") != ""}
	dv := data.Preset.Get("designated_version")
	var indented bytes.Buffer
	if json.Indent(&indented, []byte(dv.Get("config").Raw), "", "  ") == nil {
		data.Config = indented.String()
	}
	data.System = dv.Get("system_prompt").Str
	if data.Form == nil {
		data.Form = url.Values{"config": {data.Config}, "system_prompt": {data.System}}
	}
	if v := d.callAccount(r, s, http.MethodGet, "/presets/"+slug+"/versions", "limit=100", nil); v.ok() {
		vs := v.get("data").Array()
		for i := len(vs) - 1; i >= 0; i-- { // newest first
			data.Versions = append(data.Versions, vs[i])
		}
	}
	d.page(w, r, status, "Preset "+data.Preset.Get("slug").Str, "presets", "preset", data)
}

func (d *Dashboard) updatePreset(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "change presets") {
		return
	}
	slug := r.PathValue("slug")
	body, bad := presetBody(r.PostFormValue("config"), r.PostFormValue("system_prompt"))
	if bad != "" {
		d.renderPreset(w, r, s, http.StatusBadRequest, r.PostForm, formErrors{"config": strings.TrimPrefix(bad, "config: ")})
		return
	}
	if a := d.callAccount(r, s, http.MethodGet, "/presets/"+url.PathEscape(slug), "", nil); !a.ok() {
		d.errorPage(w, r, http.StatusNotFound, "Preset not found", "There is no preset "+slug+" in this account. Nothing was changed.")
		return
	}
	a := d.callAccount(r, s, http.MethodPost, "/presets/"+url.PathEscape(slug)+"/chat/completions", "", body)
	d.logAction(r, s, "new preset version", a)
	if !a.ok() {
		d.renderPreset(w, r, s, a.Status, r.PostForm, fieldError(a.Err, "model", "provider", "config"))
		return
	}
	http.Redirect(w, r, d.Prefix+"/presets/"+url.PathEscape(slug)+"?saved=1", http.StatusSeeOther)
}

// updatePresetDetails changes a preset's name and status (PATCH
// /presets/{slug}).
func (d *Dashboard) updatePresetDetails(w http.ResponseWriter, r *http.Request, s Session) {
	if !d.requireManage(w, r, s, "change presets") {
		return
	}
	slug := r.PathValue("slug")
	a := d.callAccount(r, s, http.MethodPatch, "/presets/"+url.PathEscape(slug), "",
		map[string]any{"name": r.PostFormValue("name"), "status": r.PostFormValue("status")})
	d.logAction(r, s, "update preset", a)
	if !a.ok() {
		if a.Status == http.StatusNotFound {
			d.errorPage(w, r, http.StatusNotFound, "Preset not found", "There is no preset "+slug+" in this account. Nothing was changed.")
			return
		}
		d.renderPreset(w, r, s, a.Status, nil, fieldError(a.Err, "name", "status"))
		return
	}
	http.Redirect(w, r, d.Prefix+"/presets/"+url.PathEscape(slug)+"?saved=1", http.StatusSeeOther)
}
