package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"golang.org/x/net/html"

	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/pdftext"
)

const (
	// MaxBytes bounds a fetched page or PDF.
	MaxBytes = 10 << 20
	// MaxRedirects bounds the redirects a fetch follows, each hop's
	// address checked by the egress policy when dialed and its host by
	// the domain lists.
	MaxRedirects = 5
	// maxURLBytes bounds a URL the gateway fetches.
	maxURLBytes = 2048
	// bytesPerToken turns max_content_tokens into a byte bound of the
	// content (an approximation: English text runs about 4 bytes a token).
	bytesPerToken = 4
)

// Timeout bounds one fetch, headers and body.
var Timeout = 15 * time.Second

// Page is one fetch's outcome, as the model sees it.
type Page struct {
	URL    string
	Title  string
	Status int    // the site's HTTP status; 0: no answer
	Text   string // the readable content, cut to max_content_tokens
	// Err is why there is no content ("" when there is), for the model.
	Err string
	// Fetched: the site answered (whatever its status); only such
	// fetches are charged.
	Fetched bool
	// Truncated: the content was cut to max_content_tokens.
	Truncated bool
}

// Fetcher fetches pages through Client, whose transport must check every
// connection against the customer egress policy (egress.Transport).
type Fetcher struct {
	Client *http.Client
}

// Fetch fetches rawURL under the options' domain lists and returns what
// the model is told; it never fails otherwise: every problem is the
// page's Err.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string, o *Options) Page {
	p := Page{URL: rawURL}
	u, err := url.Parse(rawURL)
	switch {
	case len(rawURL) > maxURLBytes:
		p.Err = fmt.Sprintf("the URL is longer than %d bytes", maxURLBytes)
		return p
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		p.Err = "not an http(s) URL"
		return p
	case u.User != nil:
		p.Err = "URLs with credentials are not fetched"
		return p
	}
	if ok, why := o.HostAllowed(u.Hostname()); !ok {
		p.Err = "not fetched: " + why
		return p
	}
	client := *f.Client
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > MaxRedirects {
			return fmt.Errorf("more than %d redirects", MaxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("a redirect to a %s URL", req.URL.Scheme)
		}
		if ok, why := o.HostAllowed(req.URL.Hostname()); !ok {
			return fmt.Errorf("a redirect to %s: %s", req.URL.Hostname(), why)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		p.Err = "not an http(s) URL"
		return p
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/pdf,text/plain;q=0.9,*/*;q=0.5")
	req.Header.Set("User-Agent", "Tollgate-WebFetch/1")
	res, err := client.Do(req)
	if err != nil {
		p.Err = "could not be fetched: " + reason(err)
		return p
	}
	defer res.Body.Close()
	p.Fetched, p.Status = true, res.StatusCode
	if res.StatusCode < 200 || res.StatusCode > 299 {
		p.Err = "the URL answered " + res.Status
		return p
	}
	if res.ContentLength > MaxBytes {
		p.Err = fmt.Sprintf("the page is larger than the %d MiB the gateway fetches", MaxBytes>>20)
		return p
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxBytes+1))
	switch {
	case err != nil:
		p.Err = "could not be fetched: " + reason(err)
		return p
	case len(body) > MaxBytes:
		p.Err = fmt.Sprintf("the page is larger than the %d MiB the gateway fetches", MaxBytes>>20)
		return p
	}
	p.Title, p.Text, p.Err = readable(res.Header.Get("Content-Type"), body, res.Request.URL)
	if p.Err == "" {
		p.Text, p.Truncated = cut(p.Text, o.MaxContentTokens*bytesPerToken)
		if strings.TrimSpace(p.Text) == "" {
			p.Err = "the page has no text"
		}
	}
	return p
}

// reason is a fetch error without the URL.
func reason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	switch {
	case errors.Is(err, egress.ErrRefused):
		if errors.As(err, &oe) {
			err = oe.Err // without the dial's own words
		}
		return err.Error() + " (the gateway fetches public addresses only)"
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("no answer within %s", Timeout)
	}
	return err.Error()
}

// readable is a fetched body as text: HTML as markdown, a PDF's text
// layer, plain text (and JSON, XML) as it came.
func readable(contentType string, body []byte, page *url.URL) (title, text, errText string) {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/pdf" || bytes.HasPrefix(body, []byte("%PDF-")):
		doc, err := pdftext.Extract(body, pdftext.Limits{Pages: 100, Content: 64 << 20, Text: 4 << 20})
		switch {
		case errors.Is(err, pdftext.ErrNoText):
			return "", "", "the PDF has no text layer (a scanned document?)"
		case errors.Is(err, pdftext.ErrTooManyPages), errors.Is(err, pdftext.ErrTooLarge):
			return "", "", "the PDF is larger than the gateway reads (100 pages, 4 MiB of text)"
		case err != nil:
			return "", "", "the PDF cannot be read (malformed, damaged or encrypted)"
		}
		return "", doc.Text, ""
	case mt == "text/html" || mt == "application/xhtml+xml" || (mt == "" && looksHTML(body)):
		title, md, err := markdown(body, page)
		if err != nil {
			return "", "", "the page cannot be read as HTML"
		}
		return title, md, ""
	case strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") || mt == "application/xml" || mt == "":
		if !utf8.Valid(body) {
			return "", strings.ToValidUTF8(string(body), "\uFFFD"), ""
		}
		return "", string(body), ""
	}
	return "", "", "the page's content type " + mt + " is not text, HTML or PDF"
}

func looksHTML(b []byte) bool {
	head := bytes.ToLower(bytes.TrimSpace(b[:min(len(b), 512)]))
	return bytes.HasPrefix(head, []byte("<!doctype html")) || bytes.HasPrefix(head, []byte("<html"))
}

// boilerplate are the elements left out of a page's text: navigation,
// page chrome and forms, which carry no content of the page.
var boilerplate = []string{"nav", "header", "footer", "aside", "form", "noscript", "svg", "button", "template"}

// markdown converts an HTML page to markdown, its links made absolute
// against page, without the page's chrome (boilerplate).
func markdown(body []byte, page *url.URL) (string, string, error) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return "", "", err
	}
	title := ""
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if title == "" && n.Type == html.ElementNode && n.Data == "title" && n.FirstChild != nil {
			title = strings.Join(strings.Fields(n.FirstChild.Data), " ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	conv := converter.NewConverter(converter.WithPlugins(base.NewBasePlugin(), commonmark.NewCommonmarkPlugin()))
	for _, tag := range boilerplate {
		conv.Register.TagType(tag, converter.TagTypeRemove, converter.PriorityStandard)
	}
	md, err := conv.ConvertNode(doc, converter.WithDomain(page.Scheme+"://"+page.Host))
	if err != nil {
		return "", "", err
	}
	return title, string(md), nil
}

// cut bounds text to n bytes at a rune boundary, and says whether it cut.
func cut(text string, n int) (string, bool) {
	if len(text) <= n {
		return text, false
	}
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n], true
}

// parallel bounds the fetches of one request made at once, and so the
// bodies held at once (MaxBytes each).
const parallel = 4

// FetchAll fetches urls, at most parallel at a time, the pages in their
// order.
func (f *Fetcher) FetchAll(ctx context.Context, urls []string, o *Options) []Page {
	pages := make([]Page, len(urls))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pages[i] = f.Fetch(ctx, u, o)
		}()
	}
	wg.Wait()
	return pages
}
