package dialect

// ImageGenerator is a Dialect whose provider has an image generation API
// (OpenAI's images API): the gateway's POST /images reaches it in that
// API, and its answer comes back in the public form.
type ImageGenerator interface {
	// ImagesURI is the image generation request's URI below the
	// provider's base path.
	ImagesURI() string
	// ImagesBody is the provider's request for req; a value the model
	// does not offer is a *FieldError naming the request's field.
	ImagesBody(req ImageRequest) ([]byte, error)
	// ImagesAnswer reads the provider's answer (a 2xx JSON body).
	ImagesAnswer(body []byte) (ImagesAnswer, error)
}

// ImageRequest is an image generation request as the gateway checked it.
type ImageRequest struct {
	Model  string // the provider's model id
	Prompt string
	N      int64 // images asked for, at least 1
	// Size is pixels ("1024x1536") or "auto"; Quality, Background and
	// OutputFormat the public values; "" when the client set none.
	Size, Quality, Background, OutputFormat string
	// OutputCompression is 0 to 100; -1 when the client set none.
	OutputCompression int64
}

// ImagesAnswer is a provider's image generation answer.
type ImagesAnswer struct {
	Created int64
	// Images are the images returned, base64, with their media type ("" :
	// unknown).
	Images []Image
	// PromptTokens and CompletionTokens are the usage the provider
	// reported; -1 when it did not.
	PromptTokens, CompletionTokens int64
}

// Image is one image of an answer.
type Image struct{ B64, MediaType string }

// FieldError is a request's value the provider's model does not offer,
// named by the public request's field.
type FieldError struct{ Field, Message string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }
