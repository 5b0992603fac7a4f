package openai

import (
	"errors"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

func TestImagesBody(t *testing.T) {
	d := newDialect(dialect.Options{})
	got, err := d.ImagesBody(dialect.ImageRequest{Model: "gpt-image-1", Prompt: "a cat", N: 2, Size: "1024x1536", Quality: "high",
		OutputFormat: "webp", OutputCompression: 80})
	want := `{"model":"gpt-image-1","prompt":"a cat","n":2,"size":"1024x1536","quality":"high","output_format":"webp","output_compression":80}`
	if err != nil || string(got) != want {
		t.Fatalf("gpt-image-1: %s, %v", got, err)
	}
	got, err = d.ImagesBody(dialect.ImageRequest{Model: "dall-e-3", Prompt: "a cat", N: 1, Quality: "high", Background: "transparent", OutputCompression: -1})
	want = `{"model":"dall-e-3","prompt":"a cat","n":1,"quality":"hd","response_format":"b64_json"}`
	if err != nil || string(got) != want {
		t.Fatalf("dall-e-3: %s, %v", got, err)
	}
	for _, req := range []dialect.ImageRequest{{Model: "dall-e-3", N: 2}, {Model: "dall-e-2", N: 1, Size: "1536x1024"}, {Model: "gpt-image-1", N: 1, Size: "256x256"}} {
		_, err := d.ImagesBody(req)
		var fe *dialect.FieldError
		if !errors.As(err, &fe) || (req.N == 2) != (fe.Field == "n") {
			t.Errorf("%+v: %v", req, err)
		}
	}
}

func TestImagesAnswer(t *testing.T) {
	d := newDialect(dialect.Options{})
	a, err := d.ImagesAnswer([]byte(`{"created":7,"data":[{"b64_json":"QQ=="},{"url":"https://x"}],"output_format":"jpeg","usage":{"input_tokens":5,"output_tokens":272}}`))
	if err != nil || a.Created != 7 || len(a.Images) != 1 || a.Images[0] != (dialect.Image{B64: "QQ==", MediaType: "image/jpeg"}) ||
		a.PromptTokens != 5 || a.CompletionTokens != 272 {
		t.Fatalf("%+v, %v", a, err)
	}
	if a, err := d.ImagesAnswer([]byte(`{"created":7,"data":[{"b64_json":"QQ=="}]}`)); err != nil || a.PromptTokens != -1 || a.Images[0].MediaType != "image/png" {
		t.Fatalf("no usage: %+v, %v", a, err)
	}
	if _, err := d.ImagesAnswer([]byte(`{"error":"x"}`)); err == nil {
		t.Fatal("an answer without data is taken")
	}
}
