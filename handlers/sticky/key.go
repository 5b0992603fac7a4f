package sticky

import (
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/storage/affinity"
)

// maxPrefixBytes bounds the bytes of a conversation's stable prefix that
// are hashed: conversations whose first this many bytes agree share a
// key, and with it the endpoint whose cache holds that much of them.
const maxPrefixBytes = 16 << 10

// KeyOf is the key of the conversation a request of route kind belongs
// to, for the account's model: its session id's, else one derived from
// the conversation's stable prefix, which every turn resends unchanged
// (the system prompt and the messages up to the first user message; a
// Responses request's instructions and input up to its first user item).
// False when the request has neither (a completions prompt without a
// session id). Nothing is allocated.
func KeyOf(account, model, session string, kind dialect.Kind, f *reqbody.Fields) (affinity.Key, bool) {
	var h hasher
	h.init()
	h.piece(account)
	h.piece(model)
	if session != "" {
		h.piece("s")
		h.piece(session)
		return h.sum(), true
	}
	h.piece("p")
	var ok bool
	switch kind {
	case dialect.Chat:
		ok = h.messages(get(f, "messages"))
	case dialect.Messages:
		if sys := get(f, "system"); sys.Exists() {
			h.piece("system")
			h.piece(sys.Raw)
		}
		ok = h.messages(get(f, "messages"))
	case dialect.Responses:
		if in := get(f, "instructions"); in.Type == gjson.String {
			h.piece("system")
			h.piece(in.Raw)
		}
		in := get(f, "input")
		if in.Type == gjson.String {
			// The first turn's input alone, as its user message (the
			// later turns send it as their first item).
			h.piece("user")
			h.piece(in.Raw)
			ok = true
		} else {
			ok = h.messages(in)
		}
	}
	return h.sum(), ok
}

func get(f *reqbody.Fields, name string) gjson.Result {
	v, _ := f.Get(name)
	return v
}

// messages hashes msgs up to and including the first user message (each
// its role and content), within maxPrefixBytes; false when there is
// none.
func (h *hasher) messages(msgs gjson.Result) bool {
	if !msgs.IsArray() {
		return false
	}
	found := false
	msgs.ForEach(func(_, m gjson.Result) bool {
		role := m.Get("role")
		if role.Type != gjson.String {
			return h.n < maxPrefixBytes // an item that is no message (a tool call's output)
		}
		h.piece(role.Str)
		h.piece(m.Get("content").Raw)
		found = true
		return role.Str != "user" && h.n < maxPrefixBytes
	})
	return found
}

// hasher is two FNV-1a lanes of 64 bits over at most maxPrefixBytes
// bytes; each piece is ended by a zero byte, which no piece contains
// (JSON text and checked strings have no NUL), so that pieces cannot run
// into each other.
type hasher struct {
	a, b uint64
	n    int
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
	// lane b starts elsewhere, so the lanes are independent hashes.
	fnvOffsetB = 0x9e3779b97f4a7c15
)

func (h *hasher) init() { h.a, h.b = fnvOffset, fnvOffsetB }

func (h *hasher) piece(s string) {
	if room := maxPrefixBytes - h.n; len(s) > room {
		s = s[:max(room, 0)]
	}
	h.n += len(s)
	a, b := h.a, h.b
	for i := 0; i < len(s); i++ {
		a = (a ^ uint64(s[i])) * fnvPrime
		b = (b ^ uint64(s[i])) * fnvPrime
	}
	h.a, h.b = a*fnvPrime, b*fnvPrime // the zero byte that ends it
}

func (h *hasher) sum() affinity.Key {
	var k affinity.Key
	for i := range 8 {
		k[i] = byte(h.a >> (8 * i))
		k[8+i] = byte(h.b >> (8 * i))
	}
	return k
}
