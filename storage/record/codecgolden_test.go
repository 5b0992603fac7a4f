package record

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/codecs.golden with the codecs' output")

// TestCodecsGolden: random records, every field set, encode to the bytes
// stored in testdata/codecs.golden (the binary forms in hex, the JSON as
// it is), and their binary forms read back to the same records. Stored
// snapshots and records are in these forms: a change to one (a field
// added) is a change of format, made on purpose with -update.
func TestCodecsGolden(t *testing.T) {
	var out bytes.Buffer
	f := &filler{r: rand.New(rand.NewPCG(11, 12))}
	line := func(name string, b []byte, err error) {
		if err != nil {
			fmt.Fprintf(&out, "%s error\n", name)
			return
		}
		fmt.Fprintf(&out, "%s %s\n", name, b)
	}
	for i := range 12 {
		f.plain = i%3 == 0
		goldenBinary(t, &out, "account", randomRecord[Account](f), EncodeAccount, DecodeAccount)
		goldenBinary(t, &out, "purchase", randomRecord[Purchase](f), EncodePurchase, DecodePurchase)
		goldenBinary(t, &out, "mgmtkey", randomRecord[ManagementKey](f), EncodeMgmtKey, DecodeMgmtKey)
		goldenBinary(t, &out, "workspace", randomRecord[Workspace](f), EncodeWorkspace, DecodeWorkspace)
		b, err := AccountJSON(*randomRecord[Account](f)).MarshalJSON()
		line("account-json", b, err)
		b, err = APIKeyJSON(*randomRecord[APIKey](f)).MarshalJSON()
		line("apikey-json", b, err)
		b, err = randomRecord[Generation](f).MarshalJSON()
		line("generation-json", b, err)
	}
	path := filepath.Join("testdata", "codecs.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, wantLines := bytes.Split(out.Bytes(), []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range max(len(got), len(wantLines)) {
		if i >= len(got) || i >= len(wantLines) || !bytes.Equal(got[i], wantLines[i]) {
			t.Fatalf("line %d differs from %s (a change of the records' format: go test -update, on purpose):\n got %.400q\nwant %.400q",
				i+1, path, at(got, i), at(wantLines, i))
		}
	}
}

func at(lines [][]byte, i int) []byte {
	if i < len(lines) {
		return lines[i]
	}
	return nil
}

func goldenBinary[T any](t *testing.T, out *bytes.Buffer, name string, v *T, enc func([]byte, any) ([]byte, error),
	dec func([]byte, *T, *codec.StrArena) error) {
	t.Helper()
	b, err := enc(nil, v)
	if err != nil {
		fmt.Fprintf(out, "%s error\n", name)
		return
	}
	fmt.Fprintf(out, "%s %s\n", name, hex.EncodeToString(b))
	var back T
	if err := dec(b, &back, nil); err != nil || !sameJSON(&back, v) {
		t.Fatalf("%s read back %+v, %v\nwant %+v", name, back, err, v)
	}
	again, err := enc(nil, &back)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("%s written again: %x, %v\nwant %x", name, again, err, b)
	}
}
