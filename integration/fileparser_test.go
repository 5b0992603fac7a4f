package integration

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/pdftext/pdftest"
)

// pdfChat is a chat request for model whose user message asks about a
// file part of fileData, with the plugins ("" for none) and extra members.
func pdfChat(model, fileData, plugins, extra string) string {
	fd, _ := json.Marshal(fileData)
	b := `{"model":"` + model + `","messages":[{"role":"user","content":[{"type":"text","text":"Summarize:"},` +
		`{"type":"file","file":{"filename":"q3.pdf","file_data":` + string(fd) + `}}]}]`
	if plugins != "" {
		b += `,"plugins":` + plugins
	}
	return b + extra + `}`
}

func pdfDataURL(pdf []byte) string {
	return "data:application/pdf;base64," + base64.StdEncoding.EncodeToString(pdf)
}

// The file-parser plugin through Caddy against the strict mock, which
// refuses file parts for its text-only model: a PDF part reaches the
// provider as the PDF's text (plain and streamed), never as the PDF; the
// charge is the answer's usage, parsing being free; engine native passes
// the file to a model that reads files; a PDF by URL is fetched under the
// customer egress policy; scanned and malformed PDFs, and URLs that fail or
// that the policy refuses (at any redirect), are 400s naming the part, and
// the provider is never called for them.
func TestFileParser(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, chain(tap.through,
		withModels(t, apiModel("files/native", [4]string{"mockfiles", "http://" + tap.addr + "/v1", "tollgate-mock-files", "chat"}))))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"files"}`)
	pdf := pdftest.Build("Revenue grew 12% in Q3.", "", "Costs fell by a third.")
	b64 := base64.StdEncoding.EncodeToString(pdf)
	// The customer's file server.
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/q3.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(pdf)
		case "/elsewhere":
			http.Redirect(w, r, "http://127.0.0.2"+portOnly(r.Host)+"/q3.pdf", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(files.Close)
	const text = "File q3.pdf (3 pages, text extracted by the gateway):\n\nRevenue grew 12% in Q3.\n\nCosts fell by a third."

	// checkUpstream checks that the provider received the text, not the PDF.
	checkUpstream := func(t *testing.T) {
		t.Helper()
		got := tap.last(t)
		part := got.Get("messages.0.content.1")
		if part.Get("type").Str != "text" || part.Get("text").Str != text || strings.Contains(got.Raw, b64[:40]) || strings.Contains(got.Raw, "file_data") {
			t.Fatalf("upstream body: %s", got.Raw)
		}
	}

	t.Run("plain", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, pdfChat("tollgate-mock", pdfDataURL(pdf), "", ""), nil).expect(t, 200)
		checkUpstream(t)
		answer := r.JSON.Get("choices.0.message.content").Str
		if !strings.Contains(answer, "Revenue grew 12% in Q3.") || !strings.Contains(answer, "Costs fell by a third.") {
			t.Fatalf("answer %q", answer)
		}
		// Charged from usage alone: the mock counts the text's words.
		u := r.JSON.Get("usage")
		in, _ := money.ParseAmount("0.000001")
		out, _ := money.ParseAmount("0.000002")
		p, _ := money.MulAmount(in, u.Get("prompt_tokens").Int())
		q, _ := money.MulAmount(out, u.Get("completion_tokens").Int())
		want, _ := money.AddAmounts(p, q)
		if got, _ := money.ParseAmount(u.Get("cost").Raw); got != want || u.Get("prompt_tokens").Int() < int64(len(strings.Fields(text))) {
			t.Fatalf("usage %s: cost %v, want %v", u.Raw, got, want)
		}
		// The plugin asking for pdf-text does the same.
		c.mustPost("/chat/completions", key, pdfChat("tollgate-mock", pdfDataURL(pdf), `[{"id":"file-parser","pdf":{"engine":"pdf-text"}}]`, ""), nil).expect(t, 200)
		checkUpstream(t)
	})

	t.Run("streamed", func(t *testing.T) {
		tap.take()
		s := parseStream(t, c.streamOf(t, "/chat/completions", key, pdfChat("tollgate-mock", pdfDataURL(pdf), `[{"id":"file-parser"}]`, `,"stream":true`)))
		checkUpstream(t)
		if !s.done || !strings.Contains(s.text, "Costs fell by a third.") || s.usage.Get("prompt_tokens").Int() < int64(len(strings.Fields(text))) {
			t.Fatalf("stream: %+v", s)
		}
	})

	t.Run("by URL", func(t *testing.T) {
		tap.take()
		c.mustPost("/chat/completions", key, pdfChat("tollgate-mock", files.URL+"/q3.pdf", "", `,"stream":true`), nil).expect(t, 200)
		checkUpstream(t)
	})

	t.Run("engine native", func(t *testing.T) {
		tap.take()
		c.mustPost("/chat/completions", key, pdfChat("files/native", pdfDataURL(pdf), `[{"id":"file-parser","pdf":{"engine":"native"}}]`, ""), nil).expect(t, 200)
		got := tap.last(t)
		if got.Get("messages.0.content.1.file.file_data").Str != pdfDataURL(pdf) {
			t.Fatalf("upstream body: %.300s", got.Raw)
		}
		// The text-only model refuses the file, as its provider would.
		r := c.mustPost("/chat/completions", key, pdfChat("tollgate-mock", pdfDataURL(pdf), `[{"id":"file-parser","pdf":{"engine":"native"}}]`, ""), nil)
		if r.Status != 400 || !strings.Contains(r.JSON.Get("error.message").Str, "file is only supported") {
			t.Fatalf("native to a text-only model: %d %s", r.Status, r.Body)
		}
		tap.take()
	})

	t.Run("responses and messages", func(t *testing.T) {
		tap.take()
		// Responses' input_file part, to a provider speaking Responses.
		body := `{"model":"tollgate-mock","input":[{"role":"user","content":[{"type":"input_text","text":"Summarize:"},` +
			`{"type":"input_file","filename":"q3.pdf","file_data":"` + pdfDataURL(pdf) + `"}]}]}`
		r := c.mustPost("/responses", key, body, nil).expect(t, 200)
		got := tap.last(t)
		if part := got.Get("input.0.content.1"); part.Get("type").Str != "input_text" || part.Get("text").Str != text || strings.Contains(got.Raw, b64[:40]) {
			t.Fatalf("upstream body: %.400s", got.Raw)
		}
		if !strings.Contains(r.JSON.Get("output.0.content.0.text").Str, "Costs fell by a third.") {
			t.Fatalf("answer: %s", r.Body)
		}
		// The Messages API's document block by URL, translated to chat.
		body = `{"model":"tollgate-mock","max_tokens":200,"messages":[{"role":"user","content":[{"type":"text","text":"Summarize:"},` +
			`{"type":"document","title":"q3.pdf","source":{"type":"url","url":"` + files.URL + `/q3.pdf"}}]}]}`
		r = c.mustPost("/messages", key, body, nil).expect(t, 200)
		got = tap.last(t)
		if !strings.Contains(got.Raw, jsonText(text)) || strings.Contains(got.Raw, `"document"`) {
			t.Fatalf("upstream body: %.400s", got.Raw)
		}
		if !strings.Contains(r.JSON.Get("content.0.text").Str, "Costs fell by a third.") {
			t.Fatalf("answer: %s", r.Body)
		}
		// A refusal names the block's member.
		body = `{"model":"tollgate-mock","max_tokens":200,"messages":[{"role":"user","content":[` +
			`{"type":"document","source":{"type":"url","url":"` + files.URL + `/elsewhere"}}]}]}`
		c.mustPost("/messages", key, body, nil).expectError(t, 400, "messages[0].content[0].source.url: refused by the gateway's customer_egress policy")
		if b := tap.take(); len(b) != 0 {
			t.Fatalf("the provider was called %d times", len(b))
		}
	})

	t.Run("refusals name the part", func(t *testing.T) {
		tap.take()
		for name, tc := range map[string]struct{ body, msg string }{
			"scanned":       {pdfChat("tollgate-mock", pdfDataURL(pdftest.Build("", "")), "", ""), "messages[0].content[1].file: the PDF has no text layer"},
			"malformed":     {pdfChat("tollgate-mock", pdfDataURL(pdf[:len(pdf)/3]), "", `,"stream":true`), "messages[0].content[1].file: the PDF cannot be read"},
			"URL not found": {pdfChat("tollgate-mock", files.URL+"/missing.pdf", "", ""), "messages[0].content[1].file.file_data: the file could not be fetched: the URL answered 404 Not Found"},
			// Allowed at the first hop (the harness allows 127.0.0.1), not
			// at the redirect's.
			"URL redirected": {pdfChat("tollgate-mock", files.URL+"/elsewhere", "", ""), "messages[0].content[1].file.file_data: refused by the gateway's customer_egress policy"},
			"OCR":            {pdfChat("tollgate-mock", pdfDataURL(pdf), `[{"id":"file-parser","pdf":{"engine":"mistral-ocr"}}]`, ""), `plugins[0].pdf.engine: this gateway does not offer OCR`},
			"field":          {pdfChat("tollgate-mock", pdfDataURL(pdf), `[{"id":"file-parser","pages":3}]`, ""), `plugins[0].pages: unknown field of the file-parser plugin`},
			"route":          {`{"model":"tollgate-mock","input":[{"role":"user","content":[{"type":"input_file","filename":"s.pdf","file_data":"` + pdfDataURL(pdftest.Build("", "")) + `"}]}]}`, "input[0].content[0]: the PDF has no text layer"},
		} {
			path := "/chat/completions"
			if name == "route" {
				path = "/responses"
			}
			t.Run(name, func(t *testing.T) {
				c.mustPost(path, key, tc.body, nil).expectError(t, 400, tc.msg)
			})
		}
		if b := tap.take(); len(b) != 0 {
			t.Fatalf("the provider was called %d times", len(b))
		}
	})
}

// A PDF's text passes the content filters as the rest of the prompt does:
// a blocked pattern in it is a 403, and the provider receives its
// redactions.
func TestFileParserContentFilters(t *testing.T) {
	e := startContentFilters(t)
	r, seen := e.send(t, "/chat/completions", pdfChat("ws/plain", pdfDataURL(pdftest.Build("Status of PROJ-1234?")), "", ""))
	r.expectError(t, 403, `Request blocked by content filter "project code" of guardrail "Key rules"`)
	if seen != "" {
		t.Fatalf("the provider received %s", seen)
	}
	r, seen = e.send(t, "/chat/completions", pdfChat("ws/plain", pdfDataURL(pdftest.Build("Mail bob@example.com the key sk-abcd1234.")), "", ""))
	r.expect(t, 200)
	if !strings.Contains(seen, "Mail [EMAIL] the key [API_KEY].") || strings.Contains(seen, "sk-abcd1234") || strings.Contains(seen, "file_data") {
		t.Fatalf("the provider received %s", seen)
	}
}

// Admission counts the PDF's text, which the provider receives, with the
// model's tokenizer: a PDF whose text overflows the context window is
// refused before any provider call, one whose text fits is served (a file
// part left as it came would be bounded by the window alone).
func TestFileParserAdmission(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, chain(withTokenizedModels(t), tap.through))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"files"}`)
	long := strings.Repeat("The quarterly figures show steady growth across every region.\n", 40) // about 400 tokens
	c.mustPost("/chat/completions", key, pdfChat("openai/small", pdfDataURL(pdftest.Build(long)), "", ""), nil).
		expectError(t, 400, "messages: the prompt has")
	if b := tap.take(); len(b) != 0 {
		t.Fatalf("the provider was called: %d", len(b))
	}
	r := c.mustPost("/chat/completions", key, pdfChat("openai/small", pdfDataURL(pdftest.Build("Revenue grew.")), "", ""), nil).expect(t, 200)
	if got := tap.last(t); !strings.Contains(got.Raw, "Revenue grew.") || r.JSON.Get("usage.prompt_tokens").Int() >= 300 {
		t.Fatalf("served: %s / %s", got.Raw, r.Body)
	}
}

// jsonText is text as a JSON string's contents (without the quotes).
func jsonText(text string) string {
	b, _ := json.Marshal(text)
	return string(b[1 : len(b)-1])
}
