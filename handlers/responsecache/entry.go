package responsecache

import (
	"encoding/binary"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/respcache"
)

// entry is a stored answer: the provider's, as it came, with the
// generation that paid for it.
type entry struct {
	genID       string
	created     time.Time
	contentType string
	body        []byte
}

// entryVersion starts an entry's plain form; sealed and plain are how
// it is stored.
const (
	entryVersion byte = 1
	formSealed   byte = 's'
	formPlain    byte = 'p'
)

var errEntry = errors.New("response cache: malformed entry")

// encode is e's plain form: version, creation (unix ns), the generation
// id and content type (each with a 2-byte length), then the body.
func (e *entry) encode() []byte {
	b := make([]byte, 0, 1+8+2+len(e.genID)+2+len(e.contentType)+len(e.body))
	b = append(b, entryVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(e.created.UnixNano()))
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.genID)))
	b = append(b, e.genID...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.contentType)))
	b = append(b, e.contentType...)
	return append(b, e.body...)
}

func decode(b []byte) (*entry, error) {
	if len(b) < 1+8+2 || b[0] != entryVersion {
		return nil, errEntry
	}
	e := &entry{created: time.Unix(0, int64(binary.BigEndian.Uint64(b[1:9])))}
	b = b[9:]
	var ok bool
	if e.genID, b, ok = str(b); !ok {
		return nil, errEntry
	}
	if e.contentType, b, ok = str(b); !ok {
		return nil, errEntry
	}
	e.body = b
	return e, nil
}

func str(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// additional is what a sealed entry is bound to: its key, so that an
// entry copied under another tenant's or request's key does not open.
func additional(k respcache.Key) []byte {
	ad := make([]byte, 0, len(k.Scope)+len(k.Model)+2+len(k.Hash))
	ad = append(ad, k.Scope...)
	ad = append(ad, 0)
	ad = append(ad, k.Model...)
	ad = append(ad, 0)
	return append(ad, k.Hash[:]...)
}

// seal is e as stored under k: sealed when the cache has a sealer.
func (c *Cache) seal(k respcache.Key, e *entry) []byte {
	plain := e.encode()
	if c.sealer == nil {
		return append([]byte{formPlain}, plain...)
	}
	return append([]byte{formSealed}, c.sealer.Seal(plain, additional(k))...)
}

// open is the entry stored under k; false when it does not open: sealed
// under another key or for another entry, tampered, malformed, or plain
// where the cache seals.
func (c *Cache) open(k respcache.Key, raw []byte) (*entry, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	var plain []byte
	switch {
	case raw[0] == formSealed && c.sealer != nil:
		var err error
		if plain, err = c.sealer.Open(raw[1:], additional(k)); err != nil {
			return nil, false
		}
	case raw[0] == formPlain && c.sealer == nil:
		plain = raw[1:]
	default:
		return nil, false
	}
	e, err := decode(plain)
	return e, err == nil && e.genID != ""
}

// replay writes the stored answer as the provider wrote it.
func (e *entry) replay(w http.ResponseWriter) error {
	h := w.Header()
	if e.contentType != "" {
		h.Set("Content-Type", e.contentType)
	}
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(e.body)
	if err == nil && strings.HasPrefix(e.contentType, "text/event-stream") {
		err = http.NewResponseController(w).Flush()
	}
	return err
}

// recorder passes the provider's answer on and keeps a copy of it, up to
// max bytes.
type recorder struct {
	http.ResponseWriter
	buf    []byte
	status int
	max    int64
	over   bool
	// contentType is the answer's, as the provider sent it; encoded: it
	// came with a Content-Encoding.
	contentType string
	encoded     bool
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
		h := r.Header()
		r.contentType, r.encoded = h.Get("Content-Type"), h.Get("Content-Encoding") != ""
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if !r.over {
		if int64(len(r.buf)+len(p)) > r.max {
			r.over, r.buf = true, nil
		} else {
			r.buf = append(r.buf, p...)
		}
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the writer below (Flush).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// storable reports whether the recorded answer may be kept: a 200 whose
// body was kept whole, not encoded.
func (r *recorder) storable() bool {
	return r.ResponseWriter != nil && r.status == http.StatusOK && !r.over && len(r.buf) > 0 && !r.encoded
}
