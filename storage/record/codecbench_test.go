package record

import (
	"math/rand/v2"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// BenchmarkCodecs runs each generated codec on a plain random record (go
// test -bench Codecs ./storage/record).
func BenchmarkCodecs(b *testing.B) {
	f := &filler{r: rand.New(rand.NewPCG(9, 9)), plain: true}
	benchBinary(b, "Account", randomRecord[Account](f), EncodeAccount, DecodeAccount)
	benchBinary(b, "Purchase", randomRecord[Purchase](f), EncodePurchase, DecodePurchase)
	benchBinary(b, "MgmtKey", randomRecord[ManagementKey](f), EncodeMgmtKey, DecodeMgmtKey)
	benchBinary(b, "Workspace", randomRecord[Workspace](f), EncodeWorkspace, DecodeWorkspace)

	a, k := randomRecord[Account](f), randomRecord[APIKey](f)
	k.Connect, k.RateLimits = nil, nil // left to the slower path
	a.RateLimits = nil
	g := &Generation{ID: NewGenerationID(f.time()), AccountID: "org_808cc4c0d04ecdb75b674815", KeyHash: "abababababababababababababababababababababababababababababababab",
		WorkspaceID: "7a790f82-32e0-4eb6-a591-3d10728c44e2", Model: "tollgate-mock", Provider: "mock", UpstreamID: "chatcmpl-123",
		PromptTokens: 12, CompletionTokens: 34, Cost: 56789, Status: "completed", FinishReason: "stop", LatencyMS: 3,
		CreatedAt: f.time().UTC(), Attempts: []ProviderAttempt{{Provider: "mock", Model: "tollgate-mock", Status: 200, LatencyMS: 3}}}
	benchJSON(b, "AccountJSON", AccountJSON(*a).AppendJSON)
	benchJSON(b, "APIKeyJSON", APIKeyJSON(*k).AppendJSON)
	benchJSON(b, "GenerationJSON", g.AppendJSON)

	aj, _ := AccountJSON(*a).MarshalJSON()
	benchRead(b, "FastAccount", aj, parserRead(FastAccount))
	kj, _ := APIKeyJSON(*k).MarshalJSON()
	benchRead(b, "FastAPIKey", kj, DecodeAPIKeyFast)
	w := randomRecord[Workspace](f)
	w.Budgets, w.Members, w.RateLimits = nil, nil, nil
	wj, _ := marshal(w)
	benchRead(b, "FastWorkspace", wj, parserRead(FastWorkspace))
	gj, _ := g.MarshalJSON()
	benchRead(b, "FastGenerationSums", gj, fastGenerationSums)
}

func benchBinary[T any](b *testing.B, name string, v *T, enc func([]byte, any) ([]byte, error), dec func([]byte, *T, *codec.StrArena) error) {
	buf, err := enc(nil, v)
	if err != nil {
		b.Fatal(err)
	}
	b.Run(name+"/Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = enc(buf[:0], v)
		}
	})
	b.Run(name+"/Decode", func(b *testing.B) {
		b.ReportAllocs()
		var strs codec.StrArena
		for b.Loop() {
			var out T
			if err := dec(buf, &out, &strs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchJSON(b *testing.B, name string, enc func([]byte) ([]byte, error)) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 4096)
		for b.Loop() {
			var err error
			if buf, err = enc(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchRead[T any](b *testing.B, name string, rec []byte, read func([]byte, *T) bool) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out T
			if !read(rec, &out) {
				b.Fatalf("%s not taken", rec)
			}
		}
	})
}
