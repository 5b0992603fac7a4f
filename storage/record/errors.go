package record

import "errors"

// ErrInvalid is returned for a record or a query the stores refuse.
var ErrInvalid = errors.New("invalid")
