package handlers

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/messages"
	"github.com/tollgate-dev/caddy-tollgate/handlers/policy"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
)

// countTokensPath is Anthropic's token counting route, below /messages.
const countTokensPath = "/messages/count_tokens"

// countTokens answers POST /messages/count_tokens as Anthropic does,
// {"input_tokens": n}, for a model of the catalog, without calling a
// provider or charging anything: n is the prompt as admission counts it
// (promptcount.go) on the Messages body translated for an OpenAI-style
// provider, so it equals the prompt_tokens such a provider then reports;
// for a model without a tokenizer, the byte bound.
func (rt *Router) countTokens(w http.ResponseWriter, r *http.Request, st *requestState) error {
	body, apiErr := reqbody.Read(w, r, rt.MaxBodyBytes)
	if apiErr == nil {
		var n int64
		if n, apiErr = rt.countMessagesTokens(st, body); apiErr == nil {
			out := []byte(`{"input_tokens":` + strconv.FormatInt(n, 10) + "}\n")
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", strconv.Itoa(len(out)))
			w.WriteHeader(http.StatusOK)
			_, err := w.Write(out)
			return err
		}
	}
	return apierror.Fail(r, apiErr)
}

// countMessagesTokens checks a count_tokens body and counts its prompt.
func (rt *Router) countMessagesTokens(st *requestState, body []byte) (int64, *apierror.Error) {
	f, apiErr := reqbody.ParseObject(body)
	if apiErr != nil {
		return 0, apiErr
	}
	model, ok := f.String("model")
	if f.Err == nil && (!ok || model == "") {
		return 0, apierror.BadRequest("model: required string")
	}
	if v, ok := f.Get("messages"); f.Err == nil && (!ok || !v.IsArray()) {
		f.Fail("messages", "an array of messages")
	}
	if f.Err != nil {
		return 0, f.Err
	}
	m, ok := rt.catalog().Lookup(model)
	if !ok {
		return 0, apierror.BadRequest(fmt.Sprintf("model: unknown model %q", model))
	}
	if denied := policy.CheckModel(rt.rulesFor(st.id), model); denied != nil {
		return 0, refusalError(denied)
	}
	chat, err := messages.MessagesToChat(body)
	if err != nil {
		return 0, apierror.BadRequest(err.Error())
	}
	if m.Tokenizer == nil {
		b := boundPrompt(f, len(chat), rt.MediaPartTokens)
		return b.tokensFor(m), nil
	}
	n, _ := countChatBody(m.Tokenizer, chat, rt.MediaPartTokens)
	return n, nil
}

// isMessagesPath reports the paths of the Messages API: its errors take
// Anthropic's shape, and its key may come as X-Api-Key.
func isMessagesPath(sub string) bool { return sub == "/messages" || sub == countTokensPath }
