package sharedledger

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
)

// The shared ledger's money fields, encoded by hand: every script encodes
// the fields it writes, and encoding/json's reflection made a third of a
// request's allocations on the shared ledger. They write exactly what
// json.Marshal writes (TestSharedFieldEncodersMatchJSON), so that replicas
// of another version read them alike.
// codec.AppendCounters and codec.AppendWindowed are the records'; strings are quoted
// by jsonstr.Append.

// appendAcct appends an "a" field.
func appendAcct(b []byte, am *acctMoney) []byte {
	b = append(b, `{"u":`...)
	b = am.Usage.Append(b)
	b = append(b, `,"b":`...)
	b = am.BYOKUsage.Append(b)
	b = append(b, `,"fd":`...)
	b = codec.AppendWindowed(b, am.FreeDay)
	b = append(b, `,"fm":`...)
	b = codec.AppendWindowed(b, am.FreeMinute)
	b = append(b, `,"h":`...)
	b = am.Held.Append(b)
	b = append(b, `,"r":`...)
	b = am.Running.Append(b)
	if len(am.Settling) > 0 {
		b = append(b, `,"s":[`...)
		for i, e := range am.Settling {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"t":`...)
			b = strconv.AppendInt(b, e.Until, 10)
			b = append(b, `,"a":`...)
			b = e.Amount.Append(b)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if am.Rate != (levels.Rate{}) {
		b = appendRate(append(b, `,"rl":`...), &am.Rate)
	}
	return append(b, '}')
}

// appendScope appends a key's, workspace's or member's field.
func appendScope(b []byte, sm *scopeMoney) []byte {
	b = append(b, `{"u":`...)
	b = codec.AppendCounters(b, sm.Usage)
	b = append(b, `,"b":`...)
	b = codec.AppendCounters(b, sm.BYOKUsage)
	b = append(b, `,"h":`...)
	b = sm.Held.Append(b)
	if sm.Rate != (levels.Rate{}) {
		b = appendRate(append(b, `,"rl":`...), &sm.Rate)
	}
	return append(b, '}')
}

// appendRate appends a scope's rate limit use ("rl" member): its zero
// members left out, as omitzero does.
func appendRate(b []byte, r *levels.Rate) []byte {
	b = append(b, '{')
	n := len(b)
	for i, w := range [...]money.Windowed{r.Minute, r.Day, r.Prompt, r.Completion} {
		if w == (money.Windowed{}) {
			continue
		}
		if len(b) > n {
			b = append(b, ',')
		}
		b = append(b, '"', "mdpc"[i], '"', ':')
		b = codec.AppendWindowed(b, w)
	}
	if r.Running != 0 {
		if len(b) > n {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `"r":`...), r.Running, 10)
	}
	return append(b, '}')
}

// appendHold appends a hold record ("h:" field).
func appendHold(b []byte, h *holdRecord) []byte {
	b = append(b, '{')
	if h.Key != "" {
		b = append(b, `"k":`...)
		b = jsonstr.Append(b, h.Key)
		b = append(b, ',')
	}
	if h.Workspace != "" {
		b = append(b, `"w":`...)
		b = jsonstr.Append(b, h.Workspace)
		b = append(b, ',')
	}
	if h.Member != "" {
		b = append(b, `"m":`...)
		b = jsonstr.Append(b, h.Member)
		b = append(b, ',')
	}
	b = append(b, `"h":`...)
	b = h.Hold.Append(b)
	if h.InFlight != 0 {
		b = append(b, `,"i":`...)
		b = h.InFlight.Append(b)
	}
	if h.Credits != 0 {
		b = append(b, `,"c":`...)
		b = h.Credits.Append(b)
	}
	if h.KeyOnly {
		b = append(b, `,"o":true`...)
	}
	if h.WSHold != 0 {
		b = append(b, `,"wh":`...)
		b = h.WSHold.Append(b)
	}
	if r := h.Rate; r != (levels.RatePlaced{}) {
		b = strconv.AppendUint(append(b, `,"rl":{"o":`...), uint64(r.On), 10)
		b = strconv.AppendInt(append(b, `,"t":`...), r.Minute, 10)
		if r.Prompt != 0 {
			b = strconv.AppendInt(append(b, `,"p":`...), r.Prompt, 10)
		}
		if r.Completion != 0 {
			b = strconv.AppendInt(append(b, `,"c":`...), r.Completion, 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}
