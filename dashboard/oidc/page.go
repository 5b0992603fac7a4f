package oidc

import (
	"html/template"
	"net/http"
)

// errorPage is the plain page of a refused sign-in, for a caller without
// pages of its own: no script, no external resource.
var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title></head>
<body><main><h1>{{.Title}}</h1><p>{{.Message}}</p><p><a href="{{.Back}}">Back to sign-in</a></p></main></body></html>
`))

// WriteErrorPage writes e as a small HTML page with its status; back is
// the sign-in page's path.
func WriteErrorPage(w http.ResponseWriter, e *Error, back string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(e.Status)
	// The template is fixed and its data plain strings: it fails only
	// when the browser is gone, after the status was sent.
	_ = errorPage.Execute(w, struct{ Title, Message, Back string }{e.Title, e.Message, back})
}
