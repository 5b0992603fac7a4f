package export

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Flags are a destination's broadcast_generation_* options: which optional
// groups of fields an exported record carries.
type Flags struct {
	Cost, Identity, RequestContext bool
}

// usageJSON is a record's token counts.
type usageJSON struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// recordJSON is one generation in a webhook body.
type recordJSON struct {
	ID           string    `json:"id"`
	CreatedAt    string    `json:"created_at"`
	Model        string    `json:"model"`
	Provider     string    `json:"provider"`
	Status       string    `json:"status"`
	FinishReason *string   `json:"finish_reason"`
	Streamed     bool      `json:"streamed"`
	LatencyMS    int64     `json:"latency_ms"`
	Usage        usageJSON `json:"usage"`
	// broadcast_generation_cost
	Cost           *money.Amount `json:"cost,omitempty"`
	BYOK           *bool         `json:"byok,omitempty"`
	UsageEstimated *bool         `json:"usage_estimated,omitempty"`
	// broadcast_generation_identity
	APIKeyHash  string `json:"api_key_hash,omitempty"`
	APIKeyName  string `json:"api_key_name,omitempty"`
	WorkspaceID string `json:"workspace_id,omitempty"`
	User        string `json:"user,omitempty"`
	// broadcast_generation_request_context
	UpstreamModel string `json:"upstream_model,omitempty"`
	SearchResults *int64 `json:"search_results,omitempty"`
	// The flagging content filters that matched (always sent: a flag is
	// what an organization watches for).
	ContentFlags []storage.ContentFlag `json:"content_flags,omitempty"`
	// SessionID groups a conversation's generations (always sent: the
	// grouping is what the client asked for).
	SessionID string `json:"session_id,omitempty"`
}

func newRecordJSON(r Record, f Flags) recordJSON {
	g := r.Generation
	out := recordJSON{
		ID: g.ID, CreatedAt: g.CreatedAt.UTC().Format(time.RFC3339Nano), Model: g.Model, Provider: g.Provider,
		Status: g.Status, Streamed: g.Streamed, LatencyMS: g.LatencyMS,
		Usage:        usageJSON{g.PromptTokens, g.CompletionTokens, g.PromptTokens + g.CompletionTokens},
		ContentFlags: g.ContentFlags, SessionID: g.SessionID,
	}
	if g.FinishReason != "" {
		fr := g.FinishReason
		out.FinishReason = &fr
	}
	if f.Cost {
		cost, byok, est := g.Cost, g.BYOK, g.UsageEstimated
		out.Cost, out.BYOK, out.UsageEstimated = &cost, &byok, &est
	}
	if f.Identity {
		out.APIKeyHash, out.APIKeyName, out.WorkspaceID, out.User = g.KeyHash, r.KeyName, g.WorkspaceID, g.User
	}
	if f.RequestContext {
		sr := g.SearchResults
		out.UpstreamModel, out.SearchResults = g.UpstreamModel, &sr
	}
	return out
}

// WebhookBody is the JSON a webhook receives: {"type":"generations","data":[...]}.
func WebhookBody(recs []Record, f Flags) []byte {
	data := make([]recordJSON, len(recs))
	for i, r := range recs {
		data[i] = newRecordJSON(r, f)
	}
	b, _ := json.Marshal(map[string]any{"type": "generations", "data": data})
	return b
}

// Sign returns the signature header value of body under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// permanentError is a failure that retrying cannot fix (the receiver
// refused the request itself).
type permanentError struct{ error }

// sendWebhook delivers one batch.
func sendWebhook(ctx context.Context, hc *http.Client, c Config, delivery string, body []byte) error {
	method, _ := c["method"].(string)
	if method == "" {
		method = http.MethodPost
	}
	u, _ := c["url"].(string)
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(string(body)))
	if err != nil {
		return permanentError{err}
	}
	if h, ok := c["headers"].(map[string]any); ok {
		for k, v := range h {
			s, _ := v.(string)
			req.Header.Set(k, s)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tollgate-export/1")
	req.Header.Set(DeliveryHeader, delivery)
	secret, _ := c["secret"].(string)
	req.Header.Set(SignatureHeader, Sign(secret, body))
	res, err := hc.Do(req)
	if err != nil {
		// Not the *url.Error itself: a webhook URL may hold a token, and
		// errors are logged.
		var ue *url.Error
		if errors.As(err, &ue) {
			return fmt.Errorf("webhook %s failed: %w", ue.Op, ue.Err)
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10)) // drained so the connection is reused; the status decides
	res.Body.Close()
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return nil
	case res.StatusCode == http.StatusRequestTimeout || res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500:
		return fmt.Errorf("webhook answered %d", res.StatusCode)
	}
	return permanentError{fmt.Errorf("webhook refused the delivery with %d", res.StatusCode)}
}

// otlpExporter is the OpenTelemetry SDK's OTLP/HTTP trace exporter for
// one version of a destination.
type otlpExporter struct {
	version uint64
	hc      *http.Client // the client it sends with
	exp     *otlptrace.Exporter
}

func newOTLPExporter(typ string, c Config, version uint64, hc *http.Client) (*otlpExporter, error) {
	endpoint, headers := otlpTarget(typ, c)
	client := otlptracehttp.NewClient(
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithHeaders(headers),
		// The exporter's client: its timeout, and its dialer's egress check.
		otlptracehttp.WithHTTPClient(hc),
		// The worker retries with its own backoff, so that a batch is
		// retried until the destination is back, not for a fixed time.
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	)
	exp, err := otlptrace.New(context.Background(), client)
	if err != nil {
		return nil, err
	}
	return &otlpExporter{version: version, hc: hc, exp: exp}, nil
}

func (o *otlpExporter) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = o.exp.Shutdown(ctx) // on reload: spans not sent in 2 s are dropped, as a stopped exporter must
}

var otelResource = resource.NewSchemaless(attribute.String("service.name", "tollgate"))

// Spans turns generation records into OTLP spans with the OpenTelemetry
// GenAI semantic-convention attributes. Trace and span ids derive from the
// generation id, so that a repeated delivery carries the same ids.
func Spans(recs []Record, f Flags) []sdktrace.ReadOnlySpan {
	stubs := make(tracetest.SpanStubs, len(recs))
	for i, r := range recs {
		g := r.Generation
		sum := sha256.Sum256([]byte(g.ID))
		var tid trace.TraceID
		var sid trace.SpanID
		copy(tid[:], sum[:16])
		copy(sid[:], sum[16:24])
		end := g.CreatedAt
		start := end.Add(-time.Duration(g.LatencyMS) * time.Millisecond)
		respModel := g.UpstreamModel
		if respModel == "" {
			respModel = g.Model
		}
		attrs := []attribute.KeyValue{
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", g.Provider),
			attribute.String("gen_ai.system", g.Provider),
			attribute.String("gen_ai.request.model", g.Model),
			attribute.String("gen_ai.response.model", respModel),
			attribute.String("gen_ai.response.id", g.ID),
			attribute.Int64("gen_ai.usage.input_tokens", g.PromptTokens),
			attribute.Int64("gen_ai.usage.output_tokens", g.CompletionTokens),
			attribute.String("tollgate.generation.status", g.Status),
			attribute.Bool("tollgate.streamed", g.Streamed),
		}
		if g.FinishReason != "" {
			attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{g.FinishReason}))
		}
		if g.SessionID != "" {
			attrs = append(attrs, attribute.String("session.id", g.SessionID))
		}
		if f.Cost {
			attrs = append(attrs, attribute.String("tollgate.cost", g.Cost.String()),
				attribute.Float64("gen_ai.usage.cost", g.Cost.Float64()), attribute.Bool("tollgate.byok", g.BYOK))
		}
		if f.Identity {
			attrs = append(attrs, attribute.String("tollgate.api_key.hash", g.KeyHash))
			if r.KeyName != "" {
				attrs = append(attrs, attribute.String("tollgate.api_key.name", r.KeyName))
			}
			if g.User != "" {
				attrs = append(attrs, attribute.String("user.id", g.User))
			}
		}
		if f.RequestContext && g.SearchResults > 0 {
			attrs = append(attrs, attribute.Int64("tollgate.search_results", g.SearchResults))
		}
		if len(g.ContentFlags) > 0 {
			labels := make([]string, len(g.ContentFlags))
			for i, cf := range g.ContentFlags {
				labels[i] = cf.Label
			}
			attrs = append(attrs, attribute.StringSlice("tollgate.content_flags", labels))
		}
		st := sdktrace.Status{Code: codes.Ok}
		if g.Status == "error" {
			st = sdktrace.Status{Code: codes.Error, Description: "generation failed"}
		}
		stubs[i] = tracetest.SpanStub{
			Name:                 "chat " + g.Model,
			SpanContext:          trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
			SpanKind:             trace.SpanKindClient,
			StartTime:            start,
			EndTime:              end,
			Attributes:           attrs,
			Status:               st,
			Resource:             otelResource,
			InstrumentationScope: instrumentation.Scope{Name: "github.com/tollgate-dev/caddy-tollgate/export"},
		}
	}
	return stubs.Snapshots()
}
