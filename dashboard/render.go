package dashboard

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// templates are the pages' bodies and the layout, parsed once and never
// executed themselves: each page runs a clone with the request's csrf
// function (html/template cannot clone a set once it has run).
var templates = template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html"))

// layoutTemplates runs the layout, which needs no request function.
var layoutTemplates = template.Must(templates.Clone())

// Page is one page in the dashboard's look: Render wraps Body in the
// layout (header, navigation for the session, footer).
type Page struct {
	// Title is the page's heading and the window's title.
	Title string
	// Body is the page's content (ExecuteBody renders a template into it).
	Body template.HTML
	// Status is the HTTP status; 0: 200.
	Status int
	// Nav is the navigation entry to mark current ("overview", "keys",
	// ...); "" marks none.
	Nav string
}

// ExecuteBody renders the template name of t with data, for a Page's
// Body.
func ExecuteBody(t *template.Template, name string, data any) (template.HTML, error) {
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, name, data); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil //nolint:gosec // html/template output
}

// layoutData is what the layout template reads.
type layoutData struct {
	Page
	Prefix  string
	Session *Session
	Nav     []navItem
	CSRF    string
	// AccountName and Person are the names the header shows for the
	// session's account and member, where known ("" otherwise: the ids).
	AccountName, Person string
}

type navItem struct {
	Key, Label, Path string
	Current          bool
}

// Render writes p in the dashboard's layout. Call it on a request the
// dashboard serves.
func Render(w http.ResponseWriter, r *http.Request, p Page) {
	d := from(r)
	if d == nil {
		http.Error(w, errNoDashboard.Error(), http.StatusInternalServerError)
		return
	}
	d.render(w, r, p)
}

func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, p Page) {
	ld := layoutData{Page: p, Prefix: d.Prefix}
	if s, ok := SessionFrom(r); ok {
		ld.Session, ld.CSRF = &s, s.CSRF
		ld.Nav = navFor(s.Principal, d.Prefix, p.Nav)
		ld.AccountName, ld.Person = d.names(s.Principal)
	}
	var b bytes.Buffer
	if err := layoutTemplates.ExecuteTemplate(&b, "layout", ld); err != nil {
		d.logger.Error("dashboard page failed to render", zap.String("path", r.URL.Path), zap.Error(err))
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	setSecurityHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	status := p.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes()) // the page is whole in b; a failed write is a browser gone
}

// names are the account's name and the member's (their first and last
// name, else their email) of a principal, "" where not known.
func (d *Dashboard) names(p Principal) (account, person string) {
	st, err := d.gatewayStore()
	if err != nil || p.AccountID == "" {
		return "", ""
	}
	if a, ok := st.Account(p.AccountID); ok {
		account = a.Name
	}
	if p.MemberID != "" {
		if m, ok := st.Member(p.AccountID, p.MemberID); ok {
			var parts []string
			for _, n := range []*string{m.FirstName, m.LastName} {
				if n != nil && strings.TrimSpace(*n) != "" {
					parts = append(parts, strings.TrimSpace(*n))
				}
			}
			person = strings.Join(parts, " ")
			if person == "" {
				person = m.Email
			}
		}
	}
	return account, person
}

// page renders one of the package's templates as a page.
func (d *Dashboard) page(w http.ResponseWriter, r *http.Request, status int, title, nav, tmpl string, data any) {
	t, err := templates.Clone()
	if err == nil {
		token := CSRFToken(r)
		t.Funcs(template.FuncMap{"csrf": func() string { return token }})
	}
	var body template.HTML
	if err == nil {
		body, err = ExecuteBody(t, tmpl, data)
	}
	if err != nil {
		d.logger.Error("dashboard page failed to render", zap.String("template", tmpl), zap.Error(err))
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	d.render(w, r, Page{Title: title, Body: body, Status: status, Nav: nav})
}

// errorPage is the clear page of a refused request: what happened and
// what to do.
func (d *Dashboard) errorPage(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	d.page(w, r, status, title, "", "error", map[string]string{"Detail": detail, "Prefix": d.Prefix})
}

// navFor is the navigation a principal sees.
func navFor(p Principal, prefix, current string) []navItem {
	var items []navItem
	add := func(key, label, path string) {
		items = append(items, navItem{Key: key, Label: label, Path: prefix + path, Current: key == current})
	}
	if p.AccountID != "" {
		add("overview", "Overview", "/")
		add("keys", "API keys", "/keys")
		add("apps", "Connected apps", "/apps") // package consent
		add("activity", "Activity", "/activity")
		add("presets", "Presets", "/presets")
		add("settings", "Settings", "/settings")
	}
	if p.Operator {
		add("operator", "Operator", "/operator")
	}
	return items
}

// staticHandler serves the embedded CSS, script and icons.
func (d *Dashboard) staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix(d.Prefix+"/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Files only: a directory (the folder itself, any path ending in
		// /) is not found rather than listed.
		name := strings.TrimPrefix(r.URL.Path, d.Prefix+"/static/")
		if fi, err := fs.Stat(sub, name); name == "" || strings.HasSuffix(name, "/") || err != nil || fi.IsDir() {
			d.errorPage(w, r, http.StatusNotFound, "Page not found", "There is no page at "+r.URL.Path+".")
			return
		}
		// Pages carry no-store; the assets may be cached.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

var funcs = template.FuncMap{
	"csrf": func() string { return "" }, // the request's, set by page
	"list": func(v ...string) []string { return v },
	"sect": func(d settingsData, name string) map[string]any {
		return map[string]any{"S": name, "Section": d.Section, "Errors": d.Errors}
	},
	"arr": func(r gjson.Result) []string {
		var out []string
		for _, v := range r.Array() {
			out = append(out, v.String())
		}
		return out
	},
	"chart": func(title string, c chartSVG) map[string]any { return map[string]any{"Title": title, "Chart": c} },
	"money": formatMoney,
	"date":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"day":   func(t time.Time) string { return t.UTC().Format("2006-01-02") },
	"title": func(s string) string {
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
}
