package record

import (
	"math/rand/v2"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// BenchmarkCodecs runs each codec beside today's hand-written one on the
// same plain record (go test -bench Codecs ./storage/record).
func BenchmarkCodecs(b *testing.B) {
	f := &filler{r: rand.New(rand.NewPCG(9, 9)), plain: true}
	benchBinary(b, "Account", randomRecord[Account](f), EncodeAccount, oldEncodeAccount, DecodeAccount, oldDecodeAccount)
	benchBinary(b, "Purchase", randomRecord[Purchase](f), EncodePurchase, oldEncodePurchase, DecodePurchase, oldDecodePurchase)
	benchBinary(b, "MgmtKey", randomRecord[ManagementKey](f), EncodeMgmtKey, oldEncodeMgmtKey, DecodeMgmtKey, oldDecodeMgmtKey)
	benchBinary(b, "Workspace", randomRecord[Workspace](f), EncodeWorkspace, oldEncodeWorkspace, DecodeWorkspace, oldDecodeWorkspace)

	a, k := randomRecord[Account](f), randomRecord[APIKey](f)
	k.Connect = nil // left to the slower path
	g := &Generation{ID: NewGenerationID(f.time()), AccountID: "org_808cc4c0d04ecdb75b674815", KeyHash: "abababababababababababababababababababababababababababababababab",
		WorkspaceID: "7a790f82-32e0-4eb6-a591-3d10728c44e2", Model: "tollgate-mock", Provider: "mock", UpstreamID: "chatcmpl-123",
		PromptTokens: 12, CompletionTokens: 34, Cost: 56789, Status: "completed", FinishReason: "stop", LatencyMS: 3,
		CreatedAt: f.time().UTC(), Attempts: []ProviderAttempt{{Provider: "mock", Model: "tollgate-mock", Status: 200, LatencyMS: 3}}}
	benchJSON(b, "AccountJSON", func(buf []byte) ([]byte, error) { return AccountJSON(*a).AppendJSON(buf) },
		func(buf []byte) ([]byte, error) { return oldAccountJSON(AccountJSON(*a), buf) })
	benchJSON(b, "APIKeyJSON", func(buf []byte) ([]byte, error) { return APIKeyJSON(*k).AppendJSON(buf) },
		func(buf []byte) ([]byte, error) { return oldAPIKeyJSON(APIKeyJSON(*k), buf) })
	benchJSON(b, "GenerationJSON", g.AppendJSON, func(buf []byte) ([]byte, error) { return oldGenerationJSON(*g, buf) })

	aj, _ := AccountJSON(*a).MarshalJSON()
	benchRead(b, "FastAccount", aj, parserRead(FastAccount), parserRead(oldFastAccount))
	kj, _ := APIKeyJSON(*k).MarshalJSON()
	benchRead(b, "FastAPIKey", kj, DecodeAPIKeyFast, oldDecodeAPIKeyFast)
	w := randomRecord[Workspace](f)
	w.Budgets, w.Members = nil, nil
	wj, _ := marshal(w)
	benchRead(b, "FastWorkspace", wj, parserRead(FastWorkspace), parserRead(oldFastWorkspace))
	gj, _ := g.MarshalJSON()
	benchRead(b, "FastGenerationSums", gj, fastGenerationSums, oldFastGenerationSums)
}

func benchBinary[T any](b *testing.B, name string, v *T, enc, oldEnc func([]byte, any) ([]byte, error),
	dec, oldDec func([]byte, *T, *codec.StrArena) error) {
	for _, c := range []struct {
		name string
		enc  func([]byte, any) ([]byte, error)
		dec  func([]byte, *T, *codec.StrArena) error
	}{{"old", oldEnc, oldDec}, {"new", enc, dec}} {
		buf, err := c.enc(nil, v)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/Encode/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = c.enc(buf[:0], v)
			}
		})
		b.Run(name+"/Decode/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			var strs codec.StrArena
			for b.Loop() {
				var out T
				if err := c.dec(buf, &out, &strs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchJSON(b *testing.B, name string, enc, oldEnc func([]byte) ([]byte, error)) {
	for _, c := range []struct {
		name string
		enc  func([]byte) ([]byte, error)
	}{{"old", oldEnc}, {"new", enc}} {
		b.Run(name+"/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 4096)
			for b.Loop() {
				var err error
				if buf, err = c.enc(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchRead[T any](b *testing.B, name string, rec []byte, read, oldRead func([]byte, *T) bool) {
	for _, c := range []struct {
		name string
		read func([]byte, *T) bool
	}{{"old", oldRead}, {"new", read}} {
		b.Run(name+"/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var out T
				if !c.read(rec, &out) {
					b.Fatalf("%s not taken", rec)
				}
			}
		})
	}
}
