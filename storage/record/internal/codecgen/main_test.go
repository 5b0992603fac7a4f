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
