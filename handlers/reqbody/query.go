package reqbody

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
)

// IntParam parses an integer query parameter within [lo, hi] (hi < 0: no
// upper bound); "" is the default.
func IntParam(s, name string, def, lo, hi int) (int, *apierror.Error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || hi >= 0 && n > hi {
		if hi < 0 {
			return 0, apierror.BadRequest(name + ": expected a non-negative integer")
		}
		return 0, apierror.BadRequest(name + ": expected an integer from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi))
	}
	return n, nil
}
