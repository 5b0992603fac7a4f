// Package fileparser is the file-parser plugin, the Caddy module
// tollgate.plugins.file_parser: on /chat/completions, a `file` content
// part (on /responses an `input_file` part, on /messages a `document`
// block) holding a PDF (a base64 data URL, or an http(s) URL the gateway
// fetches under the customer_egress policy) becomes a text part with the
// PDF's text (engine pdf-text, package pdftext) when a model of the route
// does not read files itself: its catalog entry's
// architecture.input_modalities lacks "file" (as the gateway's default
// text-to-text entry does), or the plugin asks for pdf-text (or
// cloudflare-ai, served by pdf-text). Engine native passes every part as
// it came. The provider receives the text, never the PDF, and the
// prompt's admission bound counts the text. Parsing is free. A request
// that names no file part and no plugin pays one byte search.
package fileparser

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

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/pdftext"
)

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
	// maxPDFRead bounds what the parser reads of a request's PDFs, in
	// all (it reads an object at each use: a file whose links loop, or
	// many small files, would have it read and lex without end): about a
	// second of CPU at worst, and twice the largest file and more.
	maxPDFRead = 32 << 20
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

func init() {
	caddy.RegisterModule(new(FileParser))
}

// name is the plugin's id in a request's plugins array.
const name = "file-parser"

// FileParser is the file-parser plugin. It takes no configuration; its
// fetches follow the gateway's customer_egress policy.
type FileParser struct {
	// egress is the gateway's policy of the addresses a fetch may
	// reach; nil: public addresses only.
	egress func() *egress.Policy
	// client fetches file URLs; nil (a plugin not provisioned, in unit
	// tests): one made per fetch.
	client *http.Client
}

// CaddyModule returns the Caddy module information.
func (*FileParser) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tollgate.plugins.file_parser",
		New: func() caddy.Module { return new(FileParser) },
	}
}

// Provision finds the gateway's egress policy.
func (fp *FileParser) Provision(ctx caddy.Context) error {
	gw, err := gateway.Load(ctx)
	if err != nil {
		return err
	}
	fp.egress = gw.EgressPolicy
	fp.client = fp.newClient()
	return nil
}

// UnmarshalCaddyfile reads the plugin's directive, which takes nothing:
//
//	file_parser
func (*FileParser) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugin.NoOptions(d, "file_parser", "")
}

// Name implements plugin.Plugin.
func (*FileParser) Name() string { return name }

// Plan implements plugin.Plugin: the parsing is done by RewriteBody,
// before the prompt is counted; the answer is the provider's.
func (*FileParser) Plan(*plugin.Request) (plugin.Run, *apierror.Error) { return nil, nil }

// RewriteBody implements plugin.BodyRewriter: every request's PDF parts
// become text parts when the plugin or a model of the route asks for it.
func (fp *FileParser) RewriteBody(ctx context.Context, req *plugin.Request) ([]byte, bool, *apierror.Error) {
	return parseFiles(ctx, req.Kind, req.Body, req.Plugins, req.Models, fp.fetchIn(ctx))
}

// newClient is the client of the plugin's file URL fetches: every
// connection, at every redirect, reaches only the addresses the customer
// egress policy allows (public ones by default), over http or https.
func (fp *FileParser) newClient() *http.Client {
	return &http.Client{
		Transport: egress.Transport(func() *egress.Policy {
			if fp.egress == nil {
				return nil // public addresses only
			}
			return fp.egress()
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

// fetch fetches a file URL with the plugin's client.
func (fp *FileParser) fetch(rawURL string) ([]byte, error) {
	return fp.fetchIn(context.Background())(rawURL)
}

// fetchIn is fetch for a request: the fetch stops when ctx ends.
func (fp *FileParser) fetchIn(ctx context.Context) fileFetcher {
	return func(rawURL string) ([]byte, error) { return fp.fetchCtx(ctx, rawURL) }
}

func (fp *FileParser) fetchCtx(parent context.Context, rawURL string) ([]byte, error) {
	client := fp.client
	if client == nil { // a plugin not provisioned (unit tests)
		client = fp.newClient()
	}
	ctx, cancel := context.WithTimeout(parent, fileFetchTimeout)
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

// CheckEntry implements plugin.Plugin: id, enabled and pdf.engine are an
// entry's members.
func (*FileParser) CheckEntry(path string, p gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, name, p, func(member string, v gjson.Result) (bool, *apierror.Error) {
		if member != "pdf" {
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

// parseFiles is the body (of a route of kind, tried on models, with the
// request's plugins array) with its PDF parts turned into text parts, and
// true, when the file-parser plugin or a model of the route asks for it;
// the body itself and false otherwise. The parts, per dialect: chat's
// `file` parts, Responses' `input_file` parts and the Messages API's
// `document` blocks. The parsing stops when ctx ends (the client left).
func parseFiles(ctx context.Context, kind dialect.Kind, body []byte, plugins gjson.Result, models plugin.Models, fetch fileFetcher) ([]byte, bool, *apierror.Error) {
	entry, at := plugin.Entry(plugins, name)
	engine := entry.Get("pdf.engine").Str
	fd, served := fileDialects[kind]
	if at >= 0 && !served {
		return nil, false, apierror.BadRequest("plugins[" + strconv.Itoa(at) + "].id: the file-parser plugin applies to /chat/completions, /responses and /messages")
	}
	if !served || engine == "native" || !bytes.Contains(body, fd.word) {
		return body, false, nil
	}
	if engine == "" {
		native := true
		for i := range models.Len() {
			native = native && readsFiles(models.At(i))
		}
		if native {
			return body, false, nil
		}
	}
	type replacement struct {
		path string
		part []byte
	}
	var out []replacement
	var apiErr *apierror.Error
	budget := pdftext.Limits{Pages: maxPDFPages, Content: maxPDFContent, Text: maxPDFText, Read: maxPDFRead}
	urls := 0
	limited := func(u string) ([]byte, error) {
		if urls++; urls > maxFileURLs {
			return nil, errTooManyURLs
		}
		return fetch(u)
	}
	items := gjson.GetBytes(body, fd.items)
	if !items.IsArray() {
		return body, false, nil
	}
	items.ForEach(func(i, msg gjson.Result) bool {
		content := msg.Get("content")
		if !content.IsArray() {
			return true
		}
		content.ForEach(func(j, part gjson.Result) bool {
			if part.Get("type").Str != fd.partType {
				return true
			}
			mi, pj := strconv.Itoa(int(i.Int())), strconv.Itoa(int(j.Int()))
			src, ok := fd.source(fd.items+"["+mi+"].content["+pj+"]", part)
			if !ok {
				return true // by file id, or not a PDF: for the provider
			}
			var text string
			text, ok, apiErr = pdfText(ctx, src, limited, &budget)
			if apiErr != nil || !ok {
				return apiErr == nil
			}
			p, _ := json.Marshal(text)
			np := append([]byte(`{"type":"`+fd.textType+`","text":`), p...)
			if cc := part.Get("cache_control"); cc.Exists() {
				np = append(append(np, `,"cache_control":`...), cc.Raw...)
			}
			out = append(out, replacement{fd.items + "." + mi + ".content." + pj, append(np, '}')})
			return true
		})
		return apiErr == nil
	})
	if apiErr != nil || len(out) == 0 {
		return body, false, apiErr
	}
	for _, r := range out {
		nb, err := sjson.SetRawBytes(body, r.path, r.part)
		if err != nil {
			return nil, false, apierror.BadRequest("Request body is not valid JSON")
		}
		body = nb
	}
	return body, true, nil
}

// fileDialect is where a route kind's requests hold PDF parts, and what
// their text becomes.
type fileDialect struct {
	word     []byte // in every body with such a part
	items    string // the messages' member
	partType string // the part's type
	textType string // the text part's type
	// source reads a part (at path): its PDF's data, or false when the
	// part is not one the parser reads.
	source func(path string, part gjson.Result) (pdfSource, bool)
}

var fileDialects = map[dialect.Kind]fileDialect{
	dialect.Chat: {word: fileWord, items: "messages", partType: "file", textType: "text",
		source: func(path string, part gjson.Result) (pdfSource, bool) {
			file := part.Get("file")
			data := file.Get("file_data")
			return pdfSource{path: path + ".file", field: path + ".file.file_data", name: file.Get("filename").Str, data: data.Str}, data.Type == gjson.String
		}},
	dialect.Responses: {word: []byte(`"input_file"`), items: "input", partType: "input_file", textType: "input_text",
		source: func(path string, part gjson.Result) (pdfSource, bool) {
			src := pdfSource{path: path, field: path + ".file_data", name: part.Get("filename").Str}
			if d := part.Get("file_data"); d.Type == gjson.String {
				src.data = d.Str
				if !strings.HasPrefix(d.Str, "data:") && !strings.HasPrefix(d.Str, "http://") && !strings.HasPrefix(d.Str, "https://") {
					// Bare base64: a PDF when its file name says so.
					if !strings.HasSuffix(strings.ToLower(src.name), ".pdf") {
						return src, false
					}
					src.data = "data:application/pdf;base64," + d.Str
				}
				return src, true
			}
			if u := part.Get("file_url"); u.Type == gjson.String {
				src.field, src.data = path+".file_url", u.Str
				return src, true
			}
			return src, false
		}},
	dialect.Messages: {word: []byte(`"document"`), items: "messages", partType: "document", textType: "text",
		source: func(path string, part gjson.Result) (pdfSource, bool) {
			s := part.Get("source")
			src := pdfSource{path: path, name: part.Get("title").Str}
			switch s.Get("type").Str {
			case "base64":
				if !strings.EqualFold(s.Get("media_type").Str, "application/pdf") {
					return src, false
				}
				src.field, src.data = path+".source.data", "data:application/pdf;base64,"+s.Get("data").Str
				return src, true
			case "url":
				src.field, src.data = path+".source.url", s.Get("url").Str
				return src, true
			}
			return src, false // text, content or file sources: the provider's
		}},
}

// pdfSource is a PDF part's data: a data URL or an http(s) URL (data),
// the part's path and its data member's (field) for messages, and its
// file name.
type pdfSource struct {
	path, field, name, data string
}

// pdfText is the text part's text for a PDF part; false for a data URL
// of another media type, which the parser leaves to the provider. A URL
// is fetched with fetch. The text and content it reads are taken from
// the request's budget.
func pdfText(ctx context.Context, src pdfSource, fetch fileFetcher, budget *pdftext.Limits) (string, bool, *apierror.Error) {
	path := src.path
	tooLarge := apierror.BadRequest(fmt.Sprintf("%s: the PDF is larger than the %d MiB the gateway parses", path, maxPDFBytes>>20))
	var pdf []byte
	switch u := src.data; {
	case strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://"):
		b, err := fetch(u)
		switch {
		case errors.Is(err, errFileTooLarge):
			return "", false, tooLarge
		case errors.Is(err, errTooManyURLs):
			return "", false, apierror.BadRequest(src.field + ": " + err.Error())
		case errors.Is(err, egress.ErrRefused):
			return "", false, apierror.BadRequest(src.field + ": " + egress.ErrRefused.Error() + " (the URL must reach a public address)")
		case err != nil:
			return "", false, apierror.BadRequest(src.field + ": the file could not be fetched: " + fetchReason(err))
		}
		pdf = b
	case strings.HasPrefix(u, "data:"):
		meta, payload, found := strings.Cut(u[len("data:"):], ",")
		mediaType, params, _ := strings.Cut(meta, ";")
		if !found || !strings.HasSuffix(params, "base64") {
			return "", false, apierror.BadRequest(src.field + ": expected a base64 data URL (data:<media type>;base64,...)")
		}
		if !strings.EqualFold(mediaType, "application/pdf") {
			return "", false, nil // not a PDF: for the provider to read or refuse
		}
		if base64.StdEncoding.DecodedLen(len(payload)) > maxPDFBytes+2 {
			return "", false, tooLarge
		}
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return "", false, apierror.BadRequest(src.field + ": invalid base64")
		}
		if len(b) > maxPDFBytes {
			return "", false, tooLarge
		}
		pdf = b
	default:
		return "", false, apierror.BadRequest(src.field + ": expected a base64 data URL or an http(s) URL")
	}
	doc, err := pdftext.ExtractContext(ctx, pdf, *budget)
	budget.Read -= doc.Read
	switch {
	case err == nil:
		budget.Text -= int64(len(doc.Text))
		budget.Content -= doc.Content
	case ctx.Err() != nil:
		return "", false, apierror.New(499, "Client closed the request")
	case errors.Is(err, pdftext.ErrTooLarge):
		return "", false, apierror.BadRequest(fmt.Sprintf("%s: the PDF's text or content is larger than the gateway extracts (%d MiB of text, %d MiB of page content, for all of a request's PDFs)", path, maxPDFText>>20, maxPDFContent>>20))
	case errors.Is(err, pdftext.ErrTooManyPages):
		return "", false, apierror.BadRequest(fmt.Sprintf("%s: the PDF has more than the %d pages the gateway parses", path, maxPDFPages))
	case errors.Is(err, pdftext.ErrNoText):
		return "", false, apierror.BadRequest(path + ": the PDF has no text layer (a scanned document?); the pdf-text engine reads text, not images: send its pages as image parts, or use a model that reads PDFs")
	default:
		return "", false, apierror.BadRequest(path + ": the PDF cannot be read (malformed, damaged or encrypted)")
	}
	name := src.name
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

// Interface guards
var (
	_ plugin.Plugin         = (*FileParser)(nil)
	_ plugin.BodyRewriter   = (*FileParser)(nil)
	_ caddy.Provisioner     = (*FileParser)(nil)
	_ caddyfile.Unmarshaler = (*FileParser)(nil)
)
