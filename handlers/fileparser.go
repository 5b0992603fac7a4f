package handlers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pdftext"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
)

// The file-parser plugin: on /chat/completions, a `file` content part
// holding a PDF (a base64 data URL, or an http(s) URL the gateway fetches
// under the customer_egress policy) becomes a text part with the PDF's
// text (engine pdf-text, package pdftext) when a model of the route does
// not read files itself: its catalog entry's architecture.input_modalities
// lacks "file" (as the gateway's default text-to-text entry does), or the
// plugin asks for pdf-text (or cloudflare-ai, served by pdf-text).
// Engine native passes every part as it came. The provider receives the
// text, never the PDF, and the prompt's admission bound counts the text.
// Parsing is free. A request that names no file part and no plugin pays
// one byte search.

const (
	// maxPDFPages bounds a parsed PDF's pages.
	maxPDFPages = 100
	// maxPDFBytes bounds a parsed PDF's decoded (or fetched) size.
	maxPDFBytes = 10 << 20
	// maxPDFText bounds the text extracted from a request's PDFs, and
	// maxPDFContent what their pages' content decompresses to (a
	// compression bomb), in all.
	maxPDFText    = 4 << 20
	maxPDFContent = 64 << 20
	// maxFileRedirects bounds the redirects a file URL's fetch follows,
	// each hop's address checked by the egress policy when dialed.
	maxFileRedirects = 5
	// maxFileURLs bounds the file URLs a request has the gateway fetch.
	maxFileURLs = 10
)

// fileFetchTimeout bounds the fetch of a file URL, headers and body.
var fileFetchTimeout = 15 * time.Second

// errFileTooLarge: a fetched file above maxPDFBytes.
var errFileTooLarge = errors.New("too large")

// errTooManyURLs: a request's file URL beyond maxFileURLs.
var errTooManyURLs = fmt.Errorf("the gateway fetches at most %d file URLs per request", maxFileURLs)

// fileFetcher fetches a file URL's body, at most maxPDFBytes (more is
// errFileTooLarge).
type fileFetcher func(rawURL string) ([]byte, error)

// newFileClient is the client of rt's file URL fetches: every
// connection, at every redirect, reaches only the addresses the customer
// egress policy allows (public ones by default), over http or https.
func newFileClient(rt *Router) *http.Client {
	return &http.Client{
		Transport: egress.Transport(func() *egress.Policy {
			if rt.gw == nil {
				return nil // public addresses only
			}
			return rt.gw.EgressPolicy()
		}),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxFileRedirects {
				return fmt.Errorf("more than %d redirects", maxFileRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("a redirect to a %s URL", req.URL.Scheme)
			}
			return nil
		},
	}
}

// fetchFile fetches a file URL with the router's file client.
func (rt *Router) fetchFile(rawURL string) ([]byte, error) {
	client := rt.fileClient
	if client == nil { // a router not provisioned (unit tests)
		client = newFileClient(rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fileFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/pdf")
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the URL answered %s", res.Status)
	}
	if res.ContentLength > maxPDFBytes {
		return nil, errFileTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxPDFBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPDFBytes {
		return nil, errFileTooLarge
	}
	return b, nil
}

// fileWord is in every body with a file part (its "file" member and
// type).
var fileWord = []byte(`"file"`)

// pdfEngines are the pdf.engine values the gateway serves: pdf-text reads
// the text layer; cloudflare-ai (the public API's default, which
// converts a PDF to text as well) is served by it.
var pdfEngines = map[string]bool{"pdf-text": true, "cloudflare-ai": true, "native": true}

// checkFileParserPlugin checks a file-parser plugin entry (at path) that
// is not disabled: id, enabled and pdf.engine are its members.
func checkFileParserPlugin(path string, p gjson.Result) *apierror.Error {
	return checkPluginMembers(path, "file-parser", p, func(name string, v gjson.Result) (bool, *apierror.Error) {
		if name != "pdf" {
			return false, nil
		}
		return true, checkPDFOptions(path+".pdf", v)
	})
}

func checkPDFOptions(path string, v gjson.Result) *apierror.Error {
	if !v.IsObject() {
		return apierror.BadRequest(path + ": expected an object")
	}
	var apiErr *apierror.Error
	v.ForEach(func(k, e gjson.Result) bool {
		switch {
		case k.Str != "engine":
			apiErr = apierror.BadRequest(fmt.Sprintf("%s.%s: unknown field of the PDF options", path, k.Str))
		case e.Type != gjson.String:
			apiErr = apierror.BadRequest(path + ".engine: expected a string")
		case e.Str == "mistral-ocr":
			apiErr = apierror.BadRequest(path + `.engine: this gateway does not offer OCR ("mistral-ocr"); it offers "pdf-text" (also as "cloudflare-ai") and "native"`)
		case !pdfEngines[e.Str]:
			apiErr = apierror.BadRequest(path + `.engine: expected one of "pdf-text", "cloudflare-ai", "native", "mistral-ocr"`)
		}
		return apiErr == nil
	})
	return apiErr
}

// fileParserEngine is the engine the request's file-parser plugin asks
// for ("" when it names none, or has no such plugin) and the plugin's
// index (-1: none). The entries were checked by checkPlugins.
func fileParserEngine(plugins gjson.Result) (string, int) {
	for i, p := range plugins.Array() {
		if p.Get("id").Str == "file-parser" && p.Get("enabled").Type != gjson.False {
			return p.Get("pdf.engine").Str, i
		}
	}
	return "", -1
}

// readsFiles reports whether model m takes file parts itself: its public
// entry lists "file" among its input modalities.
func readsFiles(m *catalog.Model) bool {
	if m == nil {
		return false
	}
	for _, v := range gjson.GetBytes(m.Public, "architecture.input_modalities").Array() {
		if v.Str == "file" {
			return true
		}
	}
	return false
}

// parseFiles is the chat body (of a route of kind, tried on attempts)
// with its PDF file parts turned into text parts, and its fields, when
// the file-parser plugin or a model of the route asks for it; the body
// itself and nil fields otherwise.
func parseFiles(kind dialect.Kind, body []byte, f *reqbody.Fields, attempts []Attempt, fetch fileFetcher) ([]byte, *reqbody.Fields, *apierror.Error) {
	engine, at := "", -1
	if plugins, ok := f.Get("plugins"); ok { // the body no longer has them
		engine, at = fileParserEngine(plugins)
	}
	if at >= 0 && kind != dialect.Chat {
		return nil, nil, apierror.BadRequest("plugins[" + strconv.Itoa(at) + "].id: the file-parser plugin applies to /chat/completions")
	}
	if kind != dialect.Chat || engine == "native" || !bytes.Contains(body, fileWord) {
		return body, nil, nil
	}
	if engine == "" {
		native := true
		for _, a := range attempts {
			native = native && readsFiles(a.Model)
		}
		if native {
			return body, nil, nil
		}
	}
	type replacement struct {
		path string
		part []byte
	}
	var out []replacement
	var apiErr *apierror.Error
	budget := pdftext.Limits{Pages: maxPDFPages, Content: maxPDFContent, Text: maxPDFText}
	urls := 0
	limited := func(u string) ([]byte, error) {
		if urls++; urls > maxFileURLs {
			return nil, errTooManyURLs
		}
		return fetch(u)
	}
	gjson.GetBytes(body, "messages").ForEach(func(i, msg gjson.Result) bool {
		content := msg.Get("content")
		if !content.IsArray() {
			return true
		}
		content.ForEach(func(j, part gjson.Result) bool {
			if part.Get("type").Str != "file" {
				return true
			}
			mi, pj := strconv.Itoa(int(i.Int())), strconv.Itoa(int(j.Int()))
			path := "messages[" + mi + "].content[" + pj + "].file"
			var text string
			var ok bool
			text, ok, apiErr = pdfPartText(path, part.Get("file"), limited, &budget)
			if apiErr != nil || !ok {
				return apiErr == nil
			}
			p, _ := json.Marshal(text)
			np := append([]byte(`{"type":"text","text":`), p...)
			if cc := part.Get("cache_control"); cc.Exists() {
				np = append(append(np, `,"cache_control":`...), cc.Raw...)
			}
			out = append(out, replacement{"messages." + mi + ".content." + pj, append(np, '}')})
			return true
		})
		return apiErr == nil
	})
	if apiErr != nil || len(out) == 0 {
		return body, nil, apiErr
	}
	for _, r := range out {
		nb, err := sjson.SetRawBytes(body, r.path, r.part)
		if err != nil {
			return nil, nil, apierror.BadRequest("Request body is not valid JSON")
		}
		body = nb
	}
	parsed, apiErr := reqbody.ParseObject(body)
	return body, parsed, apiErr
}

// pdfPartText is the text part's text for a file part's file object (at
// path) holding a PDF; false for a file the parser leaves to the
// provider (by file_id, or a data URL of another media type). A URL is
// fetched with fetch. The text and content it reads are taken from the
// request's budget.
func pdfPartText(path string, file gjson.Result, fetch fileFetcher, budget *pdftext.Limits) (string, bool, *apierror.Error) {
	data := file.Get("file_data")
	if data.Type != gjson.String {
		return "", false, nil // by file_id: the provider's own file
	}
	tooLarge := apierror.BadRequest(fmt.Sprintf("%s: the PDF is larger than the %d MiB the gateway parses", path, maxPDFBytes>>20))
	var pdf []byte
	switch u := data.Str; {
	case strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://"):
		b, err := fetch(u)
		switch {
		case errors.Is(err, errFileTooLarge):
			return "", false, tooLarge
		case errors.Is(err, errTooManyURLs):
			return "", false, apierror.BadRequest(path + ".file_data: " + err.Error())
		case errors.Is(err, egress.ErrRefused):
			return "", false, apierror.BadRequest(path + ".file_data: " + egress.ErrRefused.Error() + " (the URL must reach a public address)")
		case err != nil:
			return "", false, apierror.BadRequest(path + ".file_data: the file could not be fetched: " + fetchReason(err))
		}
		pdf = b
	case strings.HasPrefix(u, "data:"):
		meta, payload, found := strings.Cut(u[len("data:"):], ",")
		mediaType, params, _ := strings.Cut(meta, ";")
		if !found || !strings.HasSuffix(params, "base64") {
			return "", false, apierror.BadRequest(path + ".file_data: expected a base64 data URL (data:<media type>;base64,...)")
		}
		if !strings.EqualFold(mediaType, "application/pdf") {
			return "", false, nil // not a PDF: for the provider to read or refuse
		}
		if base64.StdEncoding.DecodedLen(len(payload)) > maxPDFBytes+2 {
			return "", false, tooLarge
		}
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return "", false, apierror.BadRequest(path + ".file_data: invalid base64")
		}
		if len(b) > maxPDFBytes {
			return "", false, tooLarge
		}
		pdf = b
	default:
		return "", false, apierror.BadRequest(path + ".file_data: expected a base64 data URL or an http(s) URL")
	}
	doc, err := pdftext.Extract(pdf, *budget)
	switch {
	case err == nil:
		budget.Text -= int64(len(doc.Text))
		budget.Content -= doc.Content
	case errors.Is(err, pdftext.ErrTooLarge):
		return "", false, apierror.BadRequest(fmt.Sprintf("%s: the PDF's text or content is larger than the gateway extracts (%d MiB of text, %d MiB of page content, for all of a request's PDFs)", path, maxPDFText>>20, maxPDFContent>>20))
	case errors.Is(err, pdftext.ErrTooManyPages):
		return "", false, apierror.BadRequest(fmt.Sprintf("%s: the PDF has more than the %d pages the gateway parses", path, maxPDFPages))
	case errors.Is(err, pdftext.ErrNoText):
		return "", false, apierror.BadRequest(path + ": the PDF has no text layer (a scanned document?); the pdf-text engine reads text, not images: send its pages as image parts, or use a model that reads PDFs")
	default:
		return "", false, apierror.BadRequest(path + ": the PDF cannot be read (malformed, damaged or encrypted)")
	}
	name := file.Get("filename").Str
	if name == "" {
		name = "document.pdf"
	}
	name = strings.Map(func(r rune) rune { // one line
		if r < ' ' {
			return ' '
		}
		return r
	}, name)
	pages := "1 page"
	if doc.Pages > 1 {
		pages = strconv.Itoa(doc.Pages) + " pages"
	}
	return fmt.Sprintf("File %s (%s, text extracted by the gateway):\n\n%s", name, pages, doc.Text), true, nil
}

// fetchReason is a fetch error without the URL, which the client sent.
func fetchReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", fileFetchTimeout)
	}
	return err.Error()
}
