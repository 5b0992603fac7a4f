package fileparser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
	"github.com/tollgate-dev/caddy-tollgate/pdftext/pdftest"
)

// pdfURL is a base64 data URL of the PDF data.
func pdfURL(data []byte) string {
	return "data:application/pdf;base64," + base64.StdEncoding.EncodeToString(data)
}

// fileChat is a chat body whose user message holds a text part and a file
// part of fileData (and the plugins, "" for none).
func fileChat(fileData, plugins string) string {
	fd, _ := json.Marshal(fileData)
	b := `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[` +
		`{"type":"text","text":"Summarize:"},{"type":"file","file":{"filename":"q3.pdf","file_data":` + string(fd) + `}}]}]`
	if plugins != "" {
		b += `,"plugins":` + plugins
	}
	return b + `}`
}

var (
	textOnlyModel = &catalog.Model{ID: "t", Public: json.RawMessage(`{"architecture":{"input_modalities":["text"]}}`)}
	pdfModel      = &catalog.Model{ID: "p", Public: json.RawMessage(`{"architecture":{"input_modalities":["text","image","file"]}}`)}
)

// fakeFetch serves the URLs of fetched, and fails the others.
func fakeFetch(u string) ([]byte, error) {
	switch u {
	case "https://example.com/q3.pdf":
		return pdftest.Build("Revenue grew 12% in Q3.", "Costs fell."), nil
	case "https://example.com/big.pdf":
		return nil, errFileTooLarge
	case "http://169.254.169.254/latest":
		return nil, fmt.Errorf("dial: %w: 169.254.169.254 is not a public address", egress.ErrRefused)
	}
	return nil, errors.New("the URL answered 404 Not Found")
}

func parseFilesOf(t *testing.T, kind, body string, models ...*catalog.Model) (string, bool, *apierror.Error) {
	t.Helper()
	if !gjson.Valid(body) {
		t.Fatalf("not JSON: %s", body)
	}
	out, parsed, apiErr := parseFiles(context.Background(), dialect.Kind(kind), []byte(body), gjson.Get(body, "plugins"), plugintest.Models(models), fakeFetch)
	if apiErr != nil {
		return "", false, apiErr
	}
	return string(out), parsed, nil
}

func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Case{Plugin: new(FileParser), Kind: dialect.Chat})
}

func TestParseFiles(t *testing.T) {
	doc := pdftest.Build("Revenue grew 12% in Q3.", "Costs fell.")
	body := fileChat(pdfURL(doc), "")
	want := "File q3.pdf (2 pages, text extracted by the gateway):\n\nRevenue grew 12% in Q3.\n\nCosts fell."

	t.Run("text-only model", func(t *testing.T) {
		out, parsed, err := parseFilesOf(t, "chat", body, textOnlyModel)
		if err != nil {
			t.Fatal(err)
		}
		part := gjson.Get(out, "messages.1.content.1")
		if part.Raw != `{"type":"text","text":`+jsonString(want)+`}` || strings.Contains(out, "base64") {
			t.Fatalf("part %s in %s", part.Raw, out)
		}
		if gjson.Get(out, "messages.1.content.0.text").Str != "Summarize:" || !parsed {
			t.Fatalf("body %s, rewritten %v", out, parsed)
		}
	})

	t.Run("by URL", func(t *testing.T) {
		out, _, err := parseFilesOf(t, "chat", fileChat("https://example.com/q3.pdf", ""), textOnlyModel)
		if err != nil || gjson.Get(out, "messages.1.content.1.text").Str != want {
			t.Fatalf("%s %v", out, err)
		}
		// At most maxFileURLs fetches.
		parts := strings.Repeat(`{"type":"file","file":{"file_data":"https://example.com/q3.pdf"}},`, maxFileURLs+1)
		many := `{"model":"m","messages":[{"role":"user","content":[` + strings.TrimSuffix(parts, ",") + `]}]}`
		if _, _, err := parseFilesOf(t, "chat", many, textOnlyModel); err == nil ||
			err.Message != "messages[0].content[10].file.file_data: the gateway fetches at most 10 file URLs per request" {
			t.Fatalf("many URLs: %v", err)
		}
		// A model that reads files gets the URL.
		in := fileChat("https://example.com/none.pdf", "")
		if out, _, err := parseFilesOf(t, "chat", in, pdfModel); err != nil || out != in {
			t.Fatalf("%s %v", out, err)
		}
	})

	t.Run("a model that reads PDFs gets the file", func(t *testing.T) {
		out, parsed, err := parseFilesOf(t, "chat", body, pdfModel)
		if err != nil || out != body || parsed {
			t.Fatalf("%s %v", out, err)
		}
		// Unless the plugin asks for pdf-text (or its alias cloudflare-ai).
		for _, engine := range []string{"pdf-text", "cloudflare-ai"} {
			out, _, err = parseFilesOf(t, "chat", fileChat(pdfURL(doc), `[{"id":"file-parser","pdf":{"engine":"`+engine+`"}}]`), pdfModel)
			if err != nil || gjson.Get(out, "messages.1.content.1.text").Str != want {
				t.Fatalf("%s: %s %v", engine, out, err)
			}
		}
		// A fallback that does not read PDFs: every attempt gets the text.
		out, _, err = parseFilesOf(t, "chat", body, pdfModel, textOnlyModel)
		if err != nil || gjson.Get(out, "messages.1.content.1.text").Str != want {
			t.Fatalf("fallback: %s %v", out, err)
		}
	})

	t.Run("engine native passes the file", func(t *testing.T) {
		in := fileChat(pdfURL(doc), `[{"id":"file-parser","pdf":{"engine":"native"}}]`)
		if out, _, err := parseFilesOf(t, "chat", in, textOnlyModel); err != nil || out != in {
			t.Fatalf("%s %v", out, err)
		}
		// A disabled plugin asks for nothing: the models decide.
		in = fileChat(pdfURL(doc), `[{"id":"file-parser","enabled":false,"pdf":{"engine":"native"}}]`)
		if out, _, err := parseFilesOf(t, "chat", in, textOnlyModel); err != nil || gjson.Get(out, "messages.1.content.1.type").Str != "text" {
			t.Fatalf("disabled: %s %v", out, err)
		}
	})

	t.Run("left to the provider", func(t *testing.T) {
		for _, in := range []string{
			`{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`,
			fileChat("data:text/plain;base64,aGVsbG8=", ""),
			`{"model":"m","messages":[{"role":"user","content":"no files here"}]}`,
		} {
			if out, parsed, err := parseFilesOf(t, "chat", in, textOnlyModel); err != nil || out != in || parsed {
				t.Fatalf("%s: %s %v", in, out, err)
			}
		}
	})

	t.Run("refusals name the part", func(t *testing.T) {
		var many []string
		for range maxPDFPages + 1 {
			many = append(many, "p")
		}
		big := make([]byte, maxPDFBytes+1)
		copy(big, "%PDF-1.4\n")
		for name, tc := range map[string]struct{ body, msg string }{
			"scanned":        {fileChat(pdfURL(pdftest.Build("", "")), ""), "messages[1].content[1].file: the PDF has no text layer"},
			"malformed":      {fileChat(pdfURL([]byte("%PDF-1.4\nnot really")), ""), "messages[1].content[1].file: the PDF cannot be read"},
			"not a PDF":      {fileChat(pdfURL([]byte("hello")), ""), "messages[1].content[1].file: the PDF cannot be read"},
			"too many pages": {fileChat(pdfURL(pdftest.Build(many...)), ""), "messages[1].content[1].file: the PDF has more than the 100 pages"},
			"oversized":      {fileChat(pdfURL(big), ""), "messages[1].content[1].file: the PDF is larger than the 10 MiB"},
			"bad base64":     {fileChat("data:application/pdf;base64,%%%", ""), "messages[1].content[1].file.file_data: invalid base64"},
			"not base64":     {fileChat("data:application/pdf,abc", ""), "messages[1].content[1].file.file_data: expected a base64 data URL"},
			"URL refused":    {fileChat("http://169.254.169.254/latest", ""), "messages[1].content[1].file.file_data: refused by the gateway's customer_egress policy (the URL must reach a public address)"},
			"URL not found":  {fileChat("https://example.com/none.pdf", ""), "messages[1].content[1].file.file_data: the file could not be fetched: the URL answered 404 Not Found"},
			"URL too large":  {fileChat("https://example.com/big.pdf", ""), "messages[1].content[1].file: the PDF is larger than the 10 MiB"},
			"not a URL":      {fileChat("ftp://example.com/q3.pdf", ""), "messages[1].content[1].file.file_data: expected a base64 data URL or an http(s) URL"},
			"other route":    {`{"model":"m","input":"x","plugins":[{"id":"file-parser"}]}`, "plugins[0].id: the file-parser plugin applies to /chat/completions, /responses and /messages"},
		} {
			kind := "chat"
			if name == "other route" {
				kind = "other"
			}
			_, _, err := parseFilesOf(t, kind, tc.body, textOnlyModel)
			if err == nil || !strings.HasPrefix(err.Message, tc.msg) {
				t.Errorf("%s: %v, want %q", name, err, tc.msg)
			}
		}
	})
}

func TestCheckEntry(t *testing.T) {
	for body, want := range map[string]string{
		`[{"id":"file-parser"}]`: "",
		`[{"id":"file-parser","enabled":true,"pdf":{"engine":"pdf-text"}}]`: "",
		`[{"id":"file-parser","pdf":{"engine":"native"}}]`:                  "",
		`[{"id":"file-parser","pdf":{}}]`:                                   "",
		`[{"id":"file-parser","enabled":"yes"}]`:                            "plugins[0].enabled: expected a boolean",
		`[{"id":"file-parser","pdf":"pdf-text"}]`:                           "plugins[0].pdf: expected an object",
		`[{"id":"file-parser","pdf":{"engine":"mistral-ocr"}}]`:             `plugins[0].pdf.engine: this gateway does not offer OCR ("mistral-ocr"); it offers "pdf-text" (also as "cloudflare-ai") and "native"`,
		`[{"id":"file-parser","pdf":{"engine":"tesseract"}}]`:               `plugins[0].pdf.engine: expected one of "pdf-text", "cloudflare-ai", "native", "mistral-ocr"`,
		`[{"id":"file-parser","pdf":{"engine":1}}]`:                         "plugins[0].pdf.engine: expected a string",
		`[{"id":"file-parser","pdf":{"mode":"x"}}]`:                         "plugins[0].pdf.mode: unknown field of the PDF options",
		`[{"id":"moderation"},{"id":"file-parser","max_pages":3}]`:          "plugins[1].max_pages: unknown field of the file-parser plugin",
	} {
		arr := gjson.Parse(body).Array()
		apiErr := new(FileParser).CheckEntry("plugins["+strconv.Itoa(len(arr)-1)+"]", arr[len(arr)-1])
		if (apiErr == nil) != (want == "") || (apiErr != nil && apiErr.Message != want) {
			t.Errorf("CheckEntry(%s) = %v, want %q", body, apiErr, want)
		}
	}
}

// A chat body without a file part: one byte search, no copy.
func BenchmarkParseFilesNone(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello there, profile this"}],"max_tokens":100}`)
	models := plugintest.Models{textOnlyModel}
	b.ReportAllocs()
	for b.Loop() {
		if _, parsed, _ := parseFiles(context.Background(), "chat", body, gjson.Result{}, models, nil); parsed {
			b.Fatal("parsed")
		}
	}
}

// The plugin's fetch dials under the egress policy: with none configured,
// a loopback server is refused.
func TestFetchFileEgress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(pdftest.Build("secret"))
	}))
	defer srv.Close()
	fp := new(FileParser)
	if _, err := fp.fetch(srv.URL + "/a.pdf"); !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("loopback: %v", err)
	}
	_, _, apiErr := fp.RewriteBody(context.Background(), plugintest.Request(dialect.Chat, fileChat(srv.URL+"/a.pdf", "")))
	if apiErr == nil || !strings.HasPrefix(apiErr.Message, "messages[1].content[1].file.file_data: refused by the gateway's customer_egress policy") {
		t.Fatalf("%v", apiErr)
	}
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Responses' input_file parts and the Messages API's document blocks
// holding PDFs become text parts of their dialect, with the same limits
// and the part named in refusals.
func TestParseFilesOtherDialects(t *testing.T) {
	doc := pdftest.Build("Revenue grew 12% in Q3.")
	b64 := base64.StdEncoding.EncodeToString(doc)
	want := "File q3.pdf (1 page, text extracted by the gateway):\n\nRevenue grew 12% in Q3."
	for name, tc := range map[string]struct{ kind, body, path, part string }{
		"responses data URL": {"responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"Sum"},{"type":"input_file","filename":"q3.pdf","file_data":"` + pdfURL(doc) + `"}]}]}`,
			"input.0.content.1", `{"type":"input_text","text":` + jsonString(want) + `}`},
		"responses bare base64": {"responses", `{"model":"m","input":[{"type":"message","role":"user","content":[{"type":"input_file","filename":"q3.pdf","file_data":"` + b64 + `"}]}]}`,
			"input.0.content.0", `{"type":"input_text","text":` + jsonString(want) + `}`},
		"responses URL": {"responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","filename":"q3.pdf","file_url":"https://example.com/q3.pdf"}]}]}`,
			"input.0.content.0", ""},
		"messages base64": {"messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","title":"q3.pdf","source":{"type":"base64","media_type":"application/pdf","data":"` + b64 + `"},"cache_control":{"type":"ephemeral"}}]}]}`,
			"messages.0.content.0", `{"type":"text","text":` + jsonString(want) + `,"cache_control":{"type":"ephemeral"}}`},
		"messages URL": {"messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","title":"q3.pdf","source":{"type":"url","url":"https://example.com/q3.pdf"}}]}]}`,
			"messages.0.content.0", ""},
	} {
		out, parsed, err := parseFilesOf(t, tc.kind, tc.body, textOnlyModel)
		if err != nil || !parsed {
			t.Fatalf("%s: %v", name, err)
		}
		part := gjson.Get(out, tc.path)
		if tc.part != "" && part.Raw != tc.part {
			t.Errorf("%s: part %s", name, part.Raw)
		}
		if !strings.HasPrefix(part.Get("text").Str, "File q3.pdf (") {
			t.Errorf("%s: %s", name, out)
		}
	}
	// A model that reads files gets them as they came; a text document
	// block is the provider's.
	for _, body := range []string{
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_data":"` + pdfURL(doc) + `"}]}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"hi"}}]}]}`,
	} {
		kind := "responses"
		if strings.Contains(body, "max_tokens") {
			kind = "messages"
		}
		models := []*catalog.Model{pdfModel}
		if kind == "messages" {
			models = []*catalog.Model{textOnlyModel}
		}
		if out, parsed, err := parseFilesOf(t, kind, body, models...); err != nil || parsed || out != body {
			t.Errorf("%s: changed: %s %v", kind, out, err)
		}
	}
	for name, tc := range map[string]struct{ kind, body, msg string }{
		"responses scanned": {"responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_data":"` + pdfURL(pdftest.Build("")) + `"}]}]}`, "input[0].content[0]: the PDF has no text layer"},
		"responses refused": {"responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_url":"http://169.254.169.254/latest"}]}]}`, "input[0].content[0].file_url: refused by the gateway's customer_egress policy"},
		"messages base64":   {"messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"%%%"}}]}]}`, "messages[0].content[0].source.data: invalid base64"},
		"messages missing":  {"messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"url","url":"https://example.com/none.pdf"}}]}]}`, "messages[0].content[0].source.url: the file could not be fetched: the URL answered 404 Not Found"},
	} {
		if _, _, err := parseFilesOf(t, tc.kind, tc.body, textOnlyModel); err == nil || !strings.HasPrefix(err.Message, tc.msg) {
			t.Errorf("%s: %v, want %q", name, err, tc.msg)
		}
	}
}
