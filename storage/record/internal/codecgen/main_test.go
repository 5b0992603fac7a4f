package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedCodecsAreFresh fails when a record changed and its codecs
// were not generated again (go generate ./storage/record).
func TestGeneratedCodecsAreFresh(t *testing.T) {
	dir := filepath.Join("..", "..")
	want, err := generate(dir, "codecs_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "codecs_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("codecs_gen.go is stale: run go generate ./storage/record")
	}
}

// TestGenerateRefuses: a record the codecs cannot write whole is an
// error of the generator, not a codec that drops a field.
func TestGenerateRefuses(t *testing.T) {
	for name, src := range map[string]string{
		"an unknown type":         "//codec:binary\ntype R struct {\n\tA string\n\tB complex128\n}",
		"a float in JSON":         "//codec:json=RJSON\ntype R struct {\n\tA string\n\tB float64\n}\ntype RJSON R",
		"an optional first field": "//codec:json=RJSON\ntype R struct {\n\tA string `json:\"a,omitempty\"`\n}\ntype RJSON R",
		"a map in a fast reader":  "//codec:fast\ntype R struct {\n\tA string\n\tB map[string]*S\n}\ntype S struct{ C string }",
		"an unknown sums field":   "//codec:sums=Z\ntype R struct {\n\tA string\n}",
		"an unknown option":       "//codec:binary yaml\ntype R struct {\n\tA string\n}",
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "r.go"), []byte("package r\n\n"+src+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := generate(dir, "codecs_gen.go"); err == nil {
			t.Errorf("%s: generated", name)
		}
	}
}
