package sse

import (
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/outputlen"
)

// ChatAnswer is the shell of a writer that turns a provider's chat
// completions answer into another API's (the Messages route's and the
// Responses route's translators): error statuses pass, a stream is
// converted chunk by chunk, and any other answer is held and converted
// whole once complete (TranslateMode, FinishHeld). Its owner embeds it,
// sets it up with InitChat, and appends each chunk's events to Out.
type ChatAnswer struct {
	Writer
	// Out is the events the chunk being converted became.
	Out []byte
	// Err: an event could not be encoded; the stream goes no further.
	Err error
	// Produced is the model output of the provider's answer (outputlen),
	// what the meter charges for when no usage comes: the translation
	// may carry less of it to the client.
	Produced int

	conv ChatConverter
}

// ChatConverter is what a ChatAnswer's owner converts.
type ChatConverter interface {
	// Chunk converts one chunk's data (the final "[DONE]" too) into
	// events appended to Out.
	Chunk(data []byte)
	// Unfinished reports a stream that started and got its finish reason
	// but was neither closed nor given its [DONE].
	Unfinished() bool
	// ConvertJSON converts a held answer; false leaves it unchanged.
	ConvertJSON(body []byte) ([]byte, bool)
}

// InitChat sets the writer up over w, converting with conv.
func (ca *ChatAnswer) InitChat(w http.ResponseWriter, conv ChatConverter) {
	ca.conv = conv
	ca.Init(w, ca)
}

// Decide implements Hooks: streams are converted, JSON answers held,
// error statuses passed. The converted body has another length; the meter
// sets it.
func (ca *ChatAnswer) Decide(status int) Mode { return ca.TranslateMode(status) }

// Event implements Hooks: one chat chunk becomes its events.
func (ca *ChatAnswer) Event(ev []byte) ([]byte, error) {
	ca.Out = ca.Out[:0]
	data := Data(ev)
	ca.Produced += outputlen.Chat(data)
	ca.conv.Chunk(data)
	return ca.Out, ca.Err
}

// Finish runs once reverse_proxy returned. It converts a held answer; a
// body that is not a chat completion passes unchanged (the meter reports
// it as an invalid answer). A stream that ended cleanly after its
// finish_reason but without [DONE] is completed.
func (ca *ChatAnswer) Finish(proxyErr error) {
	if ca.Mode == Stream && proxyErr == nil && !ca.Failed() && ca.conv.Unfinished() {
		out, _ := ca.Event([]byte("data: [DONE]\n\n"))
		_ = ca.Send(out) // the status is sent: a failed write is a client gone
		return
	}
	ca.FinishHeld(ca.conv.ConvertJSON)
}

// Failed reports whether the stream can go on no further.
func (ca *ChatAnswer) Failed() bool { return ca.Err != nil || ca.SendErr != nil }
