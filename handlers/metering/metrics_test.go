package metering

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/sse"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

func TestSeriesOfPrivateEndpoint(t *testing.T) {
	public := &upstream.Route{Kind: "chat", Model: &catalog.Model{ID: "m"}, Provider: &catalog.Provider{Name: "up"}}
	private := &upstream.Route{Kind: "chat", Model: &catalog.Model{ID: "customer/model-1"}, Provider: &catalog.Provider{Name: policy.PrivateProviderPrefix + "ep-123"}}
	if SeriesOf(public) != telemetry.For("chat", "m", "up") {
		t.Error("a catalog route is not counted under its model and provider")
	}
	if SeriesOf(private) != telemetry.For("chat", telemetry.Private, telemetry.Private) {
		t.Error("a private endpoint's names became labels")
	}
}

// BenchmarkPipelineMetrics is every metrics call one served, streamed
// request makes through the pipeline (hold, attempt, charge, answer: the
// handler counts the answer in the route's series).
func BenchmarkPipelineMetrics(b *testing.B) {
	route := &upstream.Route{Kind: "chat", Model: &catalog.Model{ID: "m"}, Provider: &catalog.Provider{Name: "up"}}
	st := &pipeline.State{Route: route, Inference: true, Start: time.Now()}
	mw := &answer.Writer{FirstText: time.Now()}
	mw.Mode, mw.Status = sse.Stream, 200
	gen := &storage.Generation{AccountID: "acct", KeyHash: "hash", PromptTokens: 1200, CompletionTokens: 300, Cost: 1_800_000}
	b.ReportAllocs()
	for b.Loop() {
		telemetry.HoldOpened(2_000_000)
		observeAttempt(st, mw, st.Start, false, false)
		observeCharge(st, gen)
		telemetry.HoldClosed(2_000_000)
		SeriesOf(st.Route).Request(200)
	}
}
