package storage

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
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
