package reqbody

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
)

// Buffered is a request body held in memory: one an earlier handler
// already read, or the body an attempt sends its provider.
type Buffered struct {
	bytes.Reader
	b []byte
}

func (*Buffered) Close() error { return nil }

// NewBuffered is b as a request body, in one allocation.
func NewBuffered(b []byte) *Buffered { return InitBuffered(new(Buffered), b) }

// InitBuffered makes bb, which no request reads, b as a request body.
func InitBuffered(bb *Buffered, b []byte) *Buffered {
	bb.b = b
	bb.Reset(b)
	return bb
}

// Read reads a request body up to limit bytes: 413 past it. A body
// still unread in memory is taken as it is.
func Read(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apierror.Error) {
	if bb, ok := r.Body.(*Buffered); ok && bb.Len() == len(bb.b) {
		if int64(len(bb.b)) > limit {
			return nil, apierror.New(http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body is larger than %d bytes", limit))
		}
		bb.Reset(nil) // read: as if consumed
		return bb.b, nil
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	var b []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= limit {
		// Sized from Content-Length; the extra byte detects a longer body.
		b = make([]byte, 0, n+1)
		for err == nil && len(b) < cap(b) {
			var m int
			m, err = body.Read(b[len(b):cap(b)])
			b = b[:len(b)+m]
		}
		if errors.Is(err, io.EOF) {
			err = nil
		} else if err == nil {
			rest, rerr := io.ReadAll(body)
			b, err = append(b, rest...), rerr
		}
	} else {
		b, err = io.ReadAll(body)
	}
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			return nil, apierror.New(http.StatusRequestEntityTooLarge, fmt.Sprintf("Request body is larger than %d bytes", limit))
		}
		return nil, apierror.BadRequest("Could not read request body")
	}
	return b, nil
}
