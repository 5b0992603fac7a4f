package handlers

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/retry"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// A provider that fails twice with 503, then answers: the client gets
// the answer, charged once; the failures are not.
func TestMeterRetriesThenCharges(t *testing.T) {
	f := newMeterFixture(t, "10", storage.NewAPIKey{Name: "k"})
	f.meter.Retry = retry.Policy{Attempts: 2, Budget: time.Minute, Backoff: time.Millisecond}
	ok := answerJSON(http.StatusOK, chatAnswer("hello", "stop", 3, 4))
	fail := answerJSON(http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`)
	f.provider = func(w http.ResponseWriter, r *http.Request) error {
		if f.calls.Load() <= 2 {
			return fail(w, r)
		}
		return ok(w, r)
	}
	f.do(t, "/api/v1/chat/completions", chatBody).Must(t, http.StatusOK)
	if n := f.calls.Load(); n != 3 {
		t.Fatalf("provider called %d times, want 3", n)
	}
	f.wantCharged(t, testCost(billing.Usage{PromptTokens: 3, CompletionTokens: 4}))
	if n := f.generations(t); n != 1 {
		t.Fatalf("%d generation records, want 1", n)
	}
}

// The backoff's wait ends when the client leaves: the hold is released,
// nothing is charged, and the provider is not called again.
func TestMeterRetryWaitEndsWhenClientLeaves(t *testing.T) {
	f := newMeterFixture(t, "10", storage.NewAPIKey{Name: "k"})
	f.meter.Retry = retry.Policy{Attempts: 2, Budget: time.Hour, Backoff: 10 * time.Minute}
	f.provider = answerJSON(http.StatusServiceUnavailable, `{"error":{"message":"overloaded"}}`)
	r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", chatBody, "Authorization", "Bearer "+f.key)
	ctx, cancel := context.WithCancel(r.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	began := time.Now()
	testgw.Serve(t, f.h, r.WithContext(ctx), repl)
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the request waited %s after the client left", took)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("provider called %d times, want 1", n)
	}
	f.wantCharged(t, 0)
}
