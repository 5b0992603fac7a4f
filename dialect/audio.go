package dialect

// Speaker is a Dialect whose provider has a text to speech API (OpenAI's
// audio API): the gateway's POST /audio/speech reaches it in that API,
// and the audio it answers passes to the client as it comes.
type Speaker interface {
	// SpeechURI is the speech request's URI below the provider's base
	// path.
	SpeechURI() string
	// SpeechBody is the provider's request for req; a value the model
	// does not offer is a *FieldError naming the request's field.
	SpeechBody(req SpeechRequest) ([]byte, error)
}

// SpeechRequest is a text to speech request as the gateway checked it.
type SpeechRequest struct {
	Model string // the provider's model id
	Input string
	// Voice and ResponseFormat are the public values ("" : none set);
	// Speed is 0 when the client set none.
	Voice, ResponseFormat string
	Speed                 float64
}

// Transcriber is a Dialect whose provider has a speech to text API
// (OpenAI's audio API), which takes the audio as a multipart upload.
type Transcriber interface {
	// TranscriptionsURI is the transcription request's URI below the
	// provider's base path.
	TranscriptionsURI() string
	// TranscriptionsBody is the provider's request for req and its
	// content type.
	TranscriptionsBody(req TranscriptionRequest) (body []byte, contentType string, err error)
	// TranscriptionsAnswer reads the provider's answer (a 2xx JSON body).
	TranscriptionsAnswer(body []byte) (TranscriptionAnswer, error)
}

// TranscriptionRequest is a speech to text request as the gateway
// checked it.
type TranscriptionRequest struct {
	Model string // the provider's model id
	// Audio is the file, Format its format ("wav", "mp3", "flac", "ogg").
	Audio  []byte
	Format string
	// Language, ResponseFormat and TimestampGranularities are the public
	// values ("" or nil: none set); Temperature is -1 when none is set.
	Language, ResponseFormat string
	TimestampGranularities   []string
	Temperature              float64
}

// TranscriptionAnswer is a provider's transcription answer.
type TranscriptionAnswer struct {
	// Verbose is the answer's members beyond text and usage
	// (verbose_json: task, language, duration, segments, words), as a
	// JSON object's members without braces; "" when none.
	Verbose string
	Text    string
	// Seconds is the audio's duration the provider reported; -1 when it
	// did not.
	Seconds float64
}
