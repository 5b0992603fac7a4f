package sharedledger

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
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
	return append(b, '}')
}
