package upstream

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// Forms of a request body that a provider receives, counted apart.
const (
	formChat      = iota // a chat body: the request's own
	formChatBody         // the request translated into a chat body
	formResponses        // a Responses body: the request's own
)

// CountPrompt counts the prompt with the tokenizer of each attempt's
// model, on the body as that attempt's provider receives it, and drops
// the attempts whose model's context window the prompt alone exceeds;
// none left is a 400 naming the count and the limit. Attempts whose
// model has no tokenizer keep the byte bound. The counting stops when ctx ends (the client left).
func (rt *Route) CountPrompt(ctx context.Context, mediaPart int64) *apierror.Error {
	type counted struct {
		enc  *tokenizer.Encoding
		form int
	}
	var done [4]counted
	seen := done[:0]
	var over *Attempt
	var overBy int64
	fits := func(a *Attempt) bool {
		c, ok := rt.Prompt.Of(a.Model)
		return !ok || c.Unbounded || a.Model.ContextLength <= 0 || c.Tokens <= a.Model.ContextLength
	}
	for i := range rt.Attempts {
		a := &rt.Attempts[i]
		enc := a.Model.Tokenizer
		form, body := rt.countedBody(a)
		if enc == nil || body == nil {
			continue
		}
		if key := (counted{enc, form}); !slices.Contains(seen, key) {
			seen = append(seen, key)
			c := prompt.Counter{Enc: enc, MediaPart: mediaPart, Tokens: prompt.ReplyPrimingTokens, Ctx: ctx,
				Limit: rt.windowOf(enc, form)}
			if form == formResponses {
				c.ResponsesBody(body)
			} else {
				c.ChatBody(body)
			}
			if ctx.Err() != nil {
				return apierror.New(499, "Client closed the request")
			}
			// A previous response, a stored prompt...: as the byte bound.
			unbounded := c.Unbounded || rt.Prompt.Unbounded
			rt.Prompt.Add(prompt.Count{Enc: enc, Tokens: c.Tokens, Unbounded: unbounded, Partial: c.Partial})
		}
		if over == nil && !fits(a) {
			c, _ := rt.Prompt.Of(a.Model)
			over, overBy = a, c.Tokens
		}
	}
	if over == nil {
		return nil // the common case: no attempt dropped, nothing copied
	}
	kept := slices.DeleteFunc(slices.Clone(rt.Attempts), func(a Attempt) bool { return !fits(&a) })
	if len(kept) == 0 {
		field := "messages"
		if rt.Kind == dialect.Responses {
			field = "input"
		}
		has := strconv.FormatInt(overBy, 10)
		if c, _ := rt.Prompt.Of(over.Model); c.Partial {
			has = "over " + has // counted no further than needed
		}
		return apierror.BadRequest(fmt.Sprintf("%s: the prompt has %s tokens, more than the %d of model %s's context_length",
			field, has, over.Model.ContextLength, over.Model.ID))
	}
	rt.Attempts = kept
	return nil
}

// windowOf is where counting the prompt with enc on the body of form may
// stop: past the largest context window of the attempts counted so, the
// count drops them all, however large it is. 0 (no stop) when one of
// them states no window.
func (rt *Route) windowOf(enc *tokenizer.Encoding, form int) int64 {
	var most int64
	for i := range rt.Attempts {
		a := &rt.Attempts[i]
		if f, body := rt.countedBody(a); a.Model.Tokenizer != enc || f != form || body == nil {
			continue
		}
		if a.Model.ContextLength <= 0 {
			return 0
		}
		most = max(most, a.Model.ContextLength)
	}
	return most
}

// countedBody is the body a's provider receives, in the form counted;
// nil when the attempt is not counted (a Messages request at an
// Anthropic-style provider, a route without messages).
func (rt *Route) countedBody(a *Attempt) (int, []byte) {
	switch rt.Kind {
	case dialect.Chat:
		return formChat, rt.Body
	case dialect.Responses:
		if a.Provider.ChatOnly() && rt.ChatBody != nil {
			return formChatBody, rt.ChatBody
		}
		return formResponses, rt.Body
	case dialect.Messages:
		if !a.Provider.D().Native(dialect.Messages) && rt.ChatBody != nil {
			return formChatBody, rt.ChatBody
		}
	}
	return 0, nil
}

// PromptEstimate is the prompt's tokens charged without a report: one per
// three bytes of the body the provider received, no more than the context
// window, as the hold.
func (rt *Route) PromptEstimate() int64 {
	prompt := rt.InputTokens
	if c := rt.Model.ContextLength; c > 0 {
		prompt = min(prompt, c)
	}
	return prompt
}

// OutputBound is the most output tokens the current attempt's provider
// may produce: the output limit it was sent (admission's fitted limit,
// the client's own, or the one an Anthropic-style provider requires), else
// the model's context window; 0: no bound is known.
func (rt *Route) OutputBound() int64 {
	a := rt.Attempts[rt.current]
	switch {
	case a.OutputLimit > 0:
		return a.OutputLimit
	case rt.MaxTokens > 0:
		return rt.MaxTokens
	case a.Provider.D().RequiresOutputLimit():
		return a.requiredOutputLimit()
	}
	return a.Model.ContextLength
}

// NChoices is the request's n (chat completions' number of choices, each
// up to the output limit), at least 1.
func (rt *Route) NChoices() int64 { return max(rt.Choices, 1) }
