package record

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// generationFields mirrors Generation without its MarshalJSON, so that
// encoding/json's output can be compared with the hand-written one.
type generationFields Generation

func TestGenerationJSONMatchesEncodingJSON(t *testing.T) {
	for _, g := range []Generation{
		{ID: "gen-1", AccountID: "org_1", KeyHash: "abc", Model: "m", Provider: "p", Status: "completed",
			CreatedAt: time.Date(2026, 11, 21, 1, 2, 3, 4, time.UTC)},
		{ID: "gen-2", AccountID: "a", KeyHash: "k", WorkspaceID: "ws", Model: "vendor/m:free", Provider: "p",
			UpstreamModel: "up", UpstreamID: "resp_1", PromptTokens: 12, CompletionTokens: 34, CacheReadTokens: 7, CacheWriteTokens: 3, SearchResults: 5, Cost: 123456789, BYOK: true, Credits: 4000,
			Status: "aborted", Streamed: true, FinishReason: "length", UsageEstimated: true, LatencyMS: 250,
			User: "weird \"user\"\\ <&> \n\t\b\f\x01 \u2028 日本 \xff", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))},
		{ID: "gen-3", Cost: -5},
		{ID: "gen-4", Status: "completed", ContentFlags: []ContentFlag{{GuardrailID: "g1", Label: "[EMAIL]", Builtin: "email"}, {GuardrailID: "g2", Label: "code \"x\""}}},
		{ID: "gen-5", Model: "m", Provider: "b", Routing: "sort by price",
			Attempts: []ProviderAttempt{{Provider: "a", Model: "m", Status: 503, LatencyMS: 12, BYOK: true}, {Provider: "b\"", Model: "m", Status: 200, LatencyMS: 40}}},
	} {
		got, err := json.Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(generationFields(g))
		if string(got) != string(want) {
			t.Errorf("hand-written:\n%s\nencoding/json:\n%s", got, want)
		}
		var back Generation
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		g2 := g
		g2.CreatedAt, back.CreatedAt = time.Time{}, time.Time{}
		if g.User != "" && back.User == "" {
			t.Error("user lost")
		}
		if g.User == g2.User && !reflect.DeepEqual(back.Cost, g2.Cost) {
			t.Errorf("cost %v != %v", back.Cost, g2.Cost)
		}
	}
}

func TestDecodeGenerationSumsMatchesJSON(t *testing.T) {
	g := Generation{ID: "gen-1", AccountID: "a", KeyHash: "k", WorkspaceID: "w", Model: "m\"x", Provider: "p",
		PromptTokens: 12, CompletionTokens: 34, Cost: 56789, BYOK: true, Status: "completed", LatencyMS: 78,
		User: "u\u00e9", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		ContentFlags: []ContentFlag{{GuardrailID: "g1", Label: "[EMAIL]", Builtin: "email"}, {GuardrailID: "g2", Label: "code"}}}
	b, _ := g.MarshalJSON()
	var got Generation
	if err := DecodeGenerationSums(b, &got); err != nil {
		t.Fatal(err)
	}
	got.ID = g.ID
	if !reflect.DeepEqual(got, g) {
		t.Fatalf("decoded %+v, want %+v", got, g)
	}
	if err := DecodeGenerationSums([]byte(`{"cost":"x"}`), &got); err == nil {
		t.Fatal("bad cost accepted")
	}
}

// TestFastGenerationSumsMatchesGJSON: over generations with every
// optional member present or not, and strings with and without escapes,
// the fast decoder either declines or decodes what the gjson path does;
// it declines none written without escapes or non-ASCII text.
func TestFastGenerationSumsMatchesGJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pick := func(plain, odd string) string {
		switch r.IntN(8) {
		case 0:
			return ""
		case 1:
			return odd
		}
		return plain
	}
	plainAll := 0
	for i := range 2000 {
		g := Generation{ID: NewGenerationID(time.Now()), AccountID: "org_" + strconv.Itoa(i), KeyHash: "h" + strconv.Itoa(i),
			WorkspaceID: pick("ws", "w\"s"), Model: pick("m", "m\u00e9"), Provider: pick("p", "p\\q"),
			UpstreamModel: pick("um", "u\nm"), UpstreamID: pick("chatcmpl-1", "c\"1"),
			PromptTokens: r.Int64N(1e6), CompletionTokens: r.Int64N(1e6), Cost: money.Amount(r.Int64N(1e12)),
			BYOK: r.IntN(2) == 0, Status: pick("completed", "err\u2028"), Streamed: r.IntN(2) == 0,
			FinishReason: pick("stop", "st\"op"), UsageEstimated: r.IntN(2) == 0, LatencyMS: r.Int64N(1e5),
			User: pick("bob", "b\u00f6b"), Routing: pick("price", "pr\\ice"),
			CreatedAt: time.Unix(r.Int64N(2e9), r.Int64N(1e9)).UTC()}
		if r.IntN(2) == 0 {
			g.CacheReadTokens, g.CacheWriteTokens, g.SearchResults = r.Int64N(100), r.Int64N(100), r.Int64N(10)
		}
		if r.IntN(2) == 0 {
			g.Credits = money.Amount(r.Int64N(1e9) - 5e8)
		}
		for range r.IntN(3) {
			g.ContentFlags = append(g.ContentFlags, ContentFlag{GuardrailID: "g", Label: pick("L", "[E\"]"), Builtin: pick("email", "e\u00e9")})
		}
		for range r.IntN(3) {
			g.Attempts = append(g.Attempts, ProviderAttempt{Provider: pick("p", "p\""), Model: "m", Status: 200, LatencyMS: 5, BYOK: r.IntN(2) == 0})
		}
		b, _ := g.MarshalJSON()
		var fast, want Generation
		ok := fastGenerationSums(b, &fast)
		if err := decodeGenerationSumsGJSON(b, &want); err != nil {
			t.Fatal(err)
		}
		if ok && !reflect.DeepEqual(fast, want) {
			t.Fatalf("%s\nfast %+v\nwant %+v", b, fast, want)
		}
		if !bytes.ContainsAny(b, "\\\u00e9\u00f6\u2028") {
			plainAll++
			if !ok {
				t.Fatalf("the fast decoder declined %s", b)
			}
		}
		for _, cut := range []int{1, len(b) / 2, len(b) - 1} {
			if fastGenerationSums(b[:cut], new(Generation)) {
				t.Fatalf("%s cut to %d bytes decoded", b, cut)
			}
		}
	}
	if plainAll < 20 {
		t.Fatalf("only %d records without escapes: the test did not try the fast path enough", plainAll)
	}
}

func BenchmarkDecodeGenerationSums(b *testing.B) {
	g := Generation{ID: NewGenerationID(time.Now()), AccountID: "org_808cc4c0d04ecdb75b674815", KeyHash: strings.Repeat("ab", 32),
		WorkspaceID: "7a790f82-32e0-4eb6-a591-3d10728c44e2", Model: "tollgate-mock", Provider: "mock", UpstreamID: "chatcmpl-123",
		PromptTokens: 12, CompletionTokens: 34, Cost: 56789, Status: "completed", FinishReason: "stop", LatencyMS: 3,
		CreatedAt: time.Now().UTC(), Attempts: []ProviderAttempt{{Provider: "mock", Model: "tollgate-mock", Status: 200, LatencyMS: 3}}}
	v, _ := g.MarshalJSON()
	for _, c := range []struct {
		name   string
		decode func([]byte, *Generation) error
	}{{"fast", DecodeGenerationSums}, {"gjson", decodeGenerationSumsGJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var out Generation
				if err := c.decode(v, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
