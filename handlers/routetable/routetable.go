// Package routetable compiles a table of HTTP routes, each written once as
// an http.ServeMux pattern, into a lookup that finds a request's route and
// its path values without serving it: the caller answers, in its own error
// shape. The public API (handlers/admin) and the operator API
// (caddymodule) both compile their tables here, so that both treat
// trailing slashes, unknown methods (405 with the methods the path takes)
// and unknown paths (404) the same way.
package routetable

import (
	"net/http"
	"path"
	"slices"
	"strings"
)

// Table is a compiled table of routes of type R.
type Table[R any] struct {
	prefix string
	mux    *http.ServeMux
	groups []group[R] // longest path first
}

// group is a group route: its path and every path below it.
type group[R any] struct {
	path  string // below the table's prefix
	row   *R
	below *Match[R] // the match of the paths below it that no route names
}

// Match is what the table says about one request.
type Match[R any] struct {
	// Endpoint is the route whose method and path matched: nil when the
	// path is no endpoint's or takes other methods only. A pattern with
	// GET also matches HEAD: compare Method with the request's.
	Endpoint *R
	Method   string // the Endpoint's method
	// Group is the group the path lies in; nil outside every group.
	Group *R
	// Allow is the methods the path takes, sorted and comma-separated,
	// when it is an endpoint's path; "" otherwise.
	Allow string
}

// Compile registers the rows on a ServeMux, each below prefix. pattern
// gives a row's ServeMux pattern: "METHOD /path" is an endpoint, "/path"
// alone a group (the path and every path below it, for any method).
// Every path is also registered with a trailing slash ({$}); every
// endpoint path also without its method, for Allow. It panics on a row
// without a path or a pattern the ServeMux refuses: a table is code.
func Compile[R any](prefix string, rows []R, pattern func(*R) string) *Table[R] {
	t := &Table[R]{mux: http.NewServeMux()}
	type endpoint struct {
		method, path string
		row          *R
	}
	var endpoints []endpoint
	for i := range rows {
		method, path, ok := strings.Cut(pattern(&rows[i]), " ")
		switch {
		case !ok:
			t.groups = append(t.groups, group[R]{path: method, row: &rows[i]})
		case path == "":
			panic("route " + pattern(&rows[i]) + ": no path")
		default:
			endpoints = append(endpoints, endpoint{method, path, &rows[i]})
		}
	}
	slices.SortStableFunc(t.groups, func(a, b group[R]) int { return len(b.path) - len(a.path) })

	handle := func(method, path string, m Match[R]) {
		e := &entry[R]{m}
		t.mux.Handle(strings.TrimSpace(method+" "+prefix+path), e)
		if !strings.HasSuffix(path, "/") {
			t.mux.Handle(strings.TrimSpace(method+" "+prefix+path+"/{$}"), e)
		}
	}
	methods := map[string][]string{} // each endpoint path's methods
	for _, e := range endpoints {
		methods[e.path] = append(methods[e.path], e.method)
	}
	allow := map[string]string{}
	for path, ms := range methods {
		slices.Sort(ms)
		allow[path] = strings.Join(ms, ", ")
	}
	for _, e := range endpoints {
		g := t.Group(e.path)
		handle(e.method, e.path, Match[R]{Endpoint: e.row, Method: e.method, Group: g, Allow: allow[e.path]})
		if methods[e.path][0] == e.method { // once per path: its other methods
			handle("", e.path, Match[R]{Group: g, Allow: allow[e.path]})
		}
	}
	// A group's own path is registered; the paths below it are not (the
	// ServeMux would refuse a subtree that crosses a wildcard route, such
	// as /models/user/ and /models/{author}/{slug}/endpoints): Lookup
	// finds them by Group.
	for i, g := range t.groups {
		t.groups[i].below = &Match[R]{Group: g.row}
		if methods[g.path] == nil {
			handle("", g.path, Match[R]{Group: g.row})
		}
	}
	t.prefix = prefix
	return t
}

// Lookup finds r's route (shared: not to be changed); nil for a path the
// table does not know, and for a path that is not clean ("//", "/../"),
// which no route is written as. It sets r's path values (r.PathValue) as
// the ServeMux does.
func (t *Table[R]) Lookup(r *http.Request) *Match[R] {
	var c capture[R]
	t.mux.ServeHTTP(&c, r)
	if c.entry != nil {
		return &c.entry.Match
	}
	if isClean(r.URL.Path) { // else the mux redirected it to the clean path
		if sub, ok := strings.CutPrefix(r.URL.Path, t.prefix); ok {
			for _, g := range t.groups {
				if inGroup(sub, g.path) {
					return g.below
				}
			}
		}
	}
	return nil
}

// Group is the innermost group that holds path (below the prefix): the
// group's own path or one below it; nil when none does. It compares
// strings only, so that a request's path can ask it at no cost.
func (t *Table[R]) Group(path string) *R {
	for _, g := range t.groups {
		if inGroup(path, g.path) {
			return g.row
		}
	}
	return nil
}

// inGroup reports whether path is the group's path or one below it.
func inGroup(path, group string) bool {
	return strings.HasPrefix(path, group) && (len(path) == len(group) || path[len(group)] == '/')
}

// entry is the handler the mux holds for one registered pattern; the mux
// only finds it (and sets the path values).
type entry[R any] struct{ Match[R] }

// ServeHTTP reports the entry the mux matched to the capture.
func (e *entry[R]) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if c, ok := w.(*capture[R]); ok {
		c.entry = e
	}
}

// isClean reports whether the ServeMux takes p as it is, without
// redirecting it to its clean form (path.Clean, keeping a trailing slash).
func isClean(p string) bool {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// capture is the writer of a match: it learns the entry and swallows what
// the mux itself would answer (404, a redirect).
type capture[R any] struct{ entry *entry[R] }

func (*capture[R]) Header() http.Header         { return http.Header{} }
func (*capture[R]) Write(b []byte) (int, error) { return len(b), nil }
func (*capture[R]) WriteHeader(int)             {}
