package billing

import (
	"errors"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Pricing is what a model's endpoint charges.
type Pricing struct {
	Prompt     Price // per input token
	Completion Price // per output token
	Request    Price // per request
	WebSearch  Price // per search result

	// The prices per item of the routes that are not priced by the token
	// alone (rerank, images).
	SearchUnit  Price // per rerank search unit
	Document    Price // per document reranked
	ImageOutput Price // per image returned
	Character   Price // per character of text spoken (text to speech)
	AudioSecond Price // per second of audio transcribed

	// InputCacheRead and InputCacheWrite price the prompt tokens a
	// provider read from or wrote to its prompt cache; unset (the Set
	// flags false), those tokens cost the prompt price.
	InputCacheRead  Price
	InputCacheWrite Price
	CacheReadSet    bool
	CacheWriteSet   bool
	// InputCacheWrite1h prices the cache writes a provider keeps for an
	// hour (Anthropic's extended TTL); unset, they cost InputCacheWrite.
	InputCacheWrite1h Price
	CacheWrite1hSet   bool

	// Overrides are the conditional prices (a long prompt, hours of the
	// day); nil: none. Shared, never changed once loaded.
	Overrides *Overrides
}

// cacheRead is the price of a prompt token read from the cache.
func (p Pricing) cacheRead() Price {
	if p.CacheReadSet {
		return p.InputCacheRead
	}
	return p.Prompt
}

// cacheWrite is the price of a prompt token written to the cache.
func (p Pricing) cacheWrite() Price {
	if p.CacheWriteSet {
		return p.InputCacheWrite
	}
	return p.Prompt
}

// cacheWrite1h is the price of a prompt token written to the cache for
// an hour.
func (p Pricing) cacheWrite1h() Price {
	if p.CacheWrite1hSet {
		return p.InputCacheWrite1h
	}
	return p.cacheWrite()
}

// InputPrice is the highest price a prompt token may cost (a cache write
// costs more than a plain prompt token at Anthropic, an hour's write more
// still): estimates, which cannot know what the provider caches, price
// every prompt token at it.
func (p Pricing) InputPrice() Price {
	return max(p.Prompt, p.cacheRead(), p.cacheWrite(), p.cacheWrite1h())
}

// IsFree reports whether nothing about the endpoint costs money.
func (p Pricing) IsFree() bool {
	return p.InputPrice() == 0 && p.Completion == 0 && p.Request == 0 && p.WebSearch == 0 &&
		p.SearchUnit == 0 && p.Document == 0 && p.ImageOutput == 0 && p.Character == 0 && p.AudioSecond == 0
}

// HasTokenPrice reports whether the endpoint prices tokens; a request with
// no token price is not held by the in-flight budget.
func (p Pricing) HasTokenPrice() bool { return p.InputPrice() > 0 || p.Completion > 0 }

// Usage is what one request consumed.
type Usage struct {
	// PromptTokens are all the prompt's tokens, those read from and
	// written to the provider's prompt cache included (as OpenRouter
	// reports prompt_tokens).
	PromptTokens     int64
	CacheReadTokens  int64 // of PromptTokens, read from the prompt cache
	CacheWriteTokens int64 // of PromptTokens, written to the prompt cache
	// CacheWrite1hTokens are, of CacheWriteTokens, those written for an
	// hour (the rest for the provider's default, Anthropic's 5 minutes).
	CacheWrite1hTokens int64
	CompletionTokens   int64
	SearchResults      int64
	// SearchUnits, Documents and Images are the items a rerank or an
	// image request used, priced per item.
	SearchUnits int64
	Documents   int64
	Images      int64
	// Characters and AudioSeconds are an audio request's: the text it
	// had spoken, the seconds of audio it had transcribed.
	Characters   int64
	AudioSeconds int64
	// Extra is a charge computed elsewhere (X search items), added as is.
	Extra money.Amount
}

// ErrCostRange is returned for a cost beyond storage.MaxAmount: the token
// counts or prices are too large to price, and nothing is rounded down or
// wrapped to make them fit.
var ErrCostRange = errors.New("cost out of range")

// Cost prices a request exactly: tokens × prices + the per-request fee +
// search results and the items priced per item, rounded once to the
// nano-credit.
func Cost(p Pricing, u Usage) (money.Amount, error) {
	f := inputCost(p, u)
	f = f.add(p.Completion, u.CompletionTokens)
	f = f.add(p.Request, 1)
	f = f.add(p.WebSearch, u.SearchResults)
	f = f.addItems(p, u)
	a, ok := f.amount()
	if ok {
		a, ok = money.AddAmounts(a, u.Extra)
	}
	if !ok {
		return 0, ErrCostRange
	}
	return a, nil
}

// addItems adds the items priced per item (rerank, images, audio).
func (f femto) addItems(p Pricing, u Usage) femto {
	f = f.add(p.SearchUnit, u.SearchUnits)
	f = f.add(p.Document, u.Documents)
	f = f.add(p.ImageOutput, u.Images)
	f = f.add(p.Character, u.Characters)
	return f.add(p.AudioSecond, u.AudioSeconds)
}

// ItemsCost prices the items of u priced per item alone (rerank's
// search units and documents, images), rounded up as TokenCost.
func ItemsCost(p Pricing, u Usage) (money.Amount, error) {
	return ceilAmount((femto{}).addItems(p, u))
}

// inputCost prices the prompt: cache reads and writes at their prices,
// the rest at the prompt price. Cache counts beyond the prompt (a provider
// inconsistency) are taken as the whole prompt, never as negative tokens.
func inputCost(p Pricing, u Usage) femto {
	read := min(max(u.CacheReadTokens, 0), max(u.PromptTokens, 0))
	write := min(max(u.CacheWriteTokens, 0), max(u.PromptTokens, 0)-read)
	var f femto
	f = f.add(p.Prompt, u.PromptTokens-read-write)
	hour := min(max(u.CacheWrite1hTokens, 0), write)
	f = f.add(p.cacheRead(), read)
	f = f.add(p.cacheWrite(), write-hour)
	return f.add(p.cacheWrite1h(), hour)
}

// CacheDiscount is what the prompt cache saved on u: its reads and writes
// at the prompt price less at their own prices, negative when writes
// cost more than reads saved (as the public API reports it); ok is false
// when the provider read and wrote nothing.
func CacheDiscount(p Pricing, u Usage) (d money.Amount, ok bool, err error) {
	read := min(max(u.CacheReadTokens, 0), max(u.PromptTokens, 0))
	write := min(max(u.CacheWriteTokens, 0), max(u.PromptTokens, 0)-read)
	if read == 0 && write == 0 {
		return 0, false, nil
	}
	plain, err1 := Cost(Pricing{Prompt: p.Prompt}, Usage{PromptTokens: read + write})
	cached, err2 := Cost(Pricing{Prompt: p.Prompt, InputCacheRead: p.InputCacheRead, CacheReadSet: p.CacheReadSet,
		InputCacheWrite: p.InputCacheWrite, CacheWriteSet: p.CacheWriteSet, InputCacheWrite1h: p.InputCacheWrite1h,
		CacheWrite1hSet: p.CacheWrite1hSet}, Usage{PromptTokens: read + write, CacheReadTokens: read,
		CacheWriteTokens: write, CacheWrite1hTokens: u.CacheWrite1hTokens})
	if err := errors.Join(err1, err2); err != nil {
		return 0, false, err
	}
	return plain - cached, true, nil
}

// InputCost prices the prompt tokens of u (cache reads and writes at their
// prices), rounded up as TokenCost.
func InputCost(p Pricing, u Usage) (money.Amount, error) {
	return ceilAmount(inputCost(p, u))
}

// TokenCost prices input and output tokens only, rounded up so that an
// estimate is never below the exact cost.
func TokenCost(p Pricing, in, out int64) (money.Amount, error) {
	var f femto
	f = f.add(p.InputPrice(), in)
	f = f.add(p.Completion, out)
	return ceilAmount(f)
}

// ceilAmount is f in nano-credits, rounded up so that an estimate is never
// below the exact cost.
func ceilAmount(f femto) (money.Amount, error) {
	a, ok := f.amount()
	if !ok {
		return 0, ErrCostRange
	}
	// amount() rounds half up; make the estimate a ceiling.
	if back := (femto{}).add(Price(femtoPerNano), int64(a)); less(back, f) {
		if a == money.MaxAmount {
			return 0, ErrCostRange
		}
		a++
	}
	return a, nil
}

func less(a, b femto) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

// EstimateTokens estimates a request's input tokens from its body size:
// one token per three bytes, an upper bound for English and most code (the
// JSON around the text only adds to it).
func EstimateTokens(bodyBytes int) int64 { return int64(bodyBytes+2) / 3 }

// EstimateTextTokens estimates the tokens of delivered text when a stream
// ends without a usage report: one token per four bytes, rounded up.
func EstimateTextTokens(textBytes int) int64 { return int64(textBytes+3) / 4 }
