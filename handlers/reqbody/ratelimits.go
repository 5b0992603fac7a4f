package reqbody

import (
	"math"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// RateLimits reads a rate_limits value v over cur: null clears every
// limit, an object sets the limits it names (each a positive integer, or
// null for none) and keeps the others. A negative, fractional or absurd
// limit, or an unknown name, is a 400 naming the field; cur is never
// changed.
func RateLimits(v gjson.Result, cur *record.RateLimits) (*record.RateLimits, *apierror.Error) {
	if v.Type == gjson.Null {
		return nil, nil
	}
	if !v.IsObject() {
		return cur, apierror.BadRequest("rate_limits: expected an object or null")
	}
	var next record.RateLimits
	if cur != nil {
		next = *cur
	}
	var e *apierror.Error
	v.ForEach(func(k, n gjson.Result) bool {
		name := "rate_limits." + k.Str
		var val int64
		switch {
		case n.Type == gjson.Null:
		case n.Type != gjson.Number || n.Num != math.Trunc(n.Num) || n.Num < 1 || n.Num > record.MaxRateLimit:
			e = apierror.BadRequest(name + ": expected an integer from 1 to " + strconv.FormatInt(record.MaxRateLimit, 10) + ", or null")
			return false
		default:
			val = int64(n.Num)
		}
		if !next.Set(k.Str, val) {
			e = apierror.BadRequest(name + ": unknown rate limit (requests_per_minute, requests_per_day, prompt_tokens_per_minute, completion_tokens_per_minute, concurrent_requests)")
			return false
		}
		return true
	})
	if e != nil {
		return cur, e
	}
	if !next.Any() {
		return nil, nil
	}
	return &next, nil
}
