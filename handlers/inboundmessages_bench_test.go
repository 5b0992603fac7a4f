package handlers

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Benchmarks of the Messages route through the whole chain: the same
// request and fake chat upstream as BenchmarkChainJSON and
// BenchmarkChainSSE, with the request translated from Anthropic's
// Messages format and the answer translated back. Read them against those.
//
//	go test ./handlers -run '^$' -bench 'Chain(Messages)?(JSON|SSE)$' -benchmem

const benchMessagesBody = `{"model":"bench-model","max_tokens":256,"temperature":0.7,"system":"You are a helpful assistant.",` +
	`"messages":[{"role":"user","content":"Write one sentence about the sea."}]}`

const benchMessagesStreamBody = `{"model":"bench-model","stream":true,"max_tokens":256,"temperature":0.7,"system":"You are a helpful assistant.",` +
	`"messages":[{"role":"user","content":"Write one sentence about the sea."}]}`

func newBenchMessagesRequest(body, secret string) *http.Request {
	r := newBenchRequest(body, secret)
	r.URL.Path = "/api/v1/messages"
	return r
}

// runServeMessages serves one fresh Messages request per iteration,
// after checking one was served as a charged Messages answer.
func runServeMessages(b *testing.B, h caddyhttp.Handler, body, secret string) {
	w := newBenchWriter()
	w.keep = true
	if err := h.ServeHTTP(w, newBenchMessagesRequest(body, secret)); err != nil || w.status != http.StatusOK ||
		!bytes.Contains(w.body, []byte(`"cost":`)) || !bytes.Contains(w.body, []byte(`"end_turn"`)) {
		b.Fatalf("status %d, err %v: %s", w.status, err, w.body)
	}
	w.keep = false
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.reset()
		if err := h.ServeHTTP(w, newBenchMessagesRequest(body, secret)); err != nil || w.status != http.StatusOK {
			b.Fatalf("status %d, err %v", w.status, err)
		}
	}
}

// BenchmarkChainMessagesJSON is BenchmarkChainJSON on the Messages route.
func BenchmarkChainMessagesJSON(b *testing.B) {
	s := newBenchSetup(b)
	runServeMessages(b, s.chain(benchUpstreamJSON), benchMessagesBody, s.secret)
}

// BenchmarkChainMessagesSSE is BenchmarkChainSSE on the Messages route:
// each chat chunk becomes its Messages events.
func BenchmarkChainMessagesSSE(b *testing.B) {
	s := newBenchSetup(b)
	runServeMessages(b, s.chain(benchUpstreamSSE), benchMessagesStreamBody, s.secret)
}
