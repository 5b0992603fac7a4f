package routing

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/translate"
	"github.com/tollgate-dev/caddy-tollgate/messages"
	"github.com/tollgate-dev/caddy-tollgate/policy"
)

// ServeInputTokens answers POST /responses/input_tokens as OpenAI does,
// {"object":"response.input_tokens","input_tokens":n}, for a Responses
// body and a model of the catalog: the prompt as admission counts it on
// the body the model's first provider receives (translated for a
// chat-only one); for a model without a tokenizer, the byte bound.
// Content the gateway cannot count (a previous response, a stored
// prompt, a file) is a 400 naming the field.
func (rt *Router) ServeInputTokens(w http.ResponseWriter, r *http.Request, st *pipeline.State) error {
	body, apiErr := reqbody.Read(w, r, rt.MaxBodyBytes)
	if apiErr == nil {
		var n int64
		if n, apiErr = rt.countResponsesTokens(st, body); apiErr == nil {
			return writeCount(w, `{"object":"response.input_tokens","input_tokens":`, n)
		}
	}
	return apierror.Fail(r, apiErr)
}

func (rt *Router) countResponsesTokens(st *pipeline.State, body []byte) (int64, *apierror.Error) {
	f, apiErr := ValidateInference(dialect.Responses, body)
	if apiErr != nil {
		return 0, apiErr
	}
	model, _ := f.String("model")
	m, apiErr := rt.CountedModel(st, model)
	if apiErr != nil {
		return 0, apiErr
	}
	for _, name := range []string{"previous_response_id", "conversation", "prompt"} {
		if v, ok := f.Get(name); ok && v.Type != gjson.Null {
			return 0, apierror.BadRequest(name + ": the gateway cannot count what it refers to")
		}
	}
	if m.Tokenizer == nil {
		b := prompt.NewBound(f, len(body), rt.MediaPartTokens)
		if b.Unbounded {
			return 0, apierror.BadRequest("input: holds content the gateway cannot count (a file or a stored item)")
		}
		return b.TokensFor(m), nil
	}
	c := prompt.Counter{Enc: m.Tokenizer, MediaPart: rt.MediaPartTokens, Tokens: prompt.ReplyPrimingTokens, Ctx: st.Context()}
	if len(m.Providers) > 0 && m.Providers[0].ChatOnly() {
		chat, err := translate.ResponsesToChat(body)
		if err != nil {
			return 0, apierror.BadRequest(err.Error())
		}
		c.ChatBody(chat)
	} else {
		c.ResponsesBody(body)
	}
	n, unbounded := c.Tokens, c.Unbounded
	if c.Ctx.Err() != nil {
		return 0, apierror.New(499, "Client closed the request")
	}
	if unbounded {
		return 0, apierror.BadRequest("input: holds content the gateway cannot count (a file or a stored item)")
	}
	return n, nil
}

// CountedModel is the catalog model a counting request names (an alias
// names its family's newest), if the caller may use it.
func (rt *Router) CountedModel(st *pipeline.State, model string) (*catalog.Model, *apierror.Error) {
	m, ok := rt.catalog().Lookup(model)
	if !ok {
		return nil, apierror.BadRequest(fmt.Sprintf("model: unknown model %q", model))
	}
	rules, apiErr := RulesFor(st)
	if apiErr != nil {
		return nil, apiErr
	}
	if denied := policy.CheckModel(rules, m.ID); denied != nil {
		return nil, RefusalError(denied)
	}
	return m, nil
}

// writeCount answers a count: prefix, then n and the object's end.
func writeCount(w http.ResponseWriter, prefix string, n int64) error {
	out := []byte(prefix + strconv.FormatInt(n, 10) + "}\n")
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(out)
	return err
}

// ServeCountTokens answers POST /messages/count_tokens as Anthropic does,
// {"input_tokens": n}, for a model of the catalog, without calling a
// provider or charging anything: n is the prompt as admission counts it
// (prompt.Counter) on the Messages body translated for an OpenAI-style
// provider, so it equals the prompt_tokens such a provider then reports;
// for a model without a tokenizer, the byte bound.
func (rt *Router) ServeCountTokens(w http.ResponseWriter, r *http.Request, st *pipeline.State) error {
	body, apiErr := reqbody.Read(w, r, rt.MaxBodyBytes)
	if apiErr == nil {
		var n int64
		if n, apiErr = rt.countMessagesTokens(st, body); apiErr == nil {
			return writeCount(w, `{"input_tokens":`, n)
		}
	}
	return apierror.Fail(r, apiErr)
}

// countMessagesTokens checks a count_tokens body and counts its prompt.
func (rt *Router) countMessagesTokens(st *pipeline.State, body []byte) (int64, *apierror.Error) {
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
	m, apiErr := rt.CountedModel(st, model)
	if apiErr != nil {
		return 0, apiErr
	}
	chat, err := messages.MessagesToChat(body)
	if err != nil {
		return 0, apierror.BadRequest(err.Error())
	}
	if m.Tokenizer == nil {
		b := prompt.NewBound(f, len(chat), rt.MediaPartTokens)
		return b.TokensFor(m), nil
	}
	c := prompt.Counter{Enc: m.Tokenizer, MediaPart: rt.MediaPartTokens, Tokens: prompt.ReplyPrimingTokens, Ctx: st.Context()}
	c.ChatBody(chat)
	if c.Ctx.Err() != nil {
		return 0, apierror.New(499, "Client closed the request")
	}
	return c.Tokens, nil
}
