package codec

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// AppendMarshaled appends encoding/json's encoding of v.
func AppendMarshaled(b []byte, v any) ([]byte, error) {
	enc, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, enc...), nil
}

func AppendWindowed(b []byte, w money.Windowed) []byte {
	b = append(b, `{"p":`...)
	b = strconv.AppendInt(b, w.Period, 10)
	b = append(b, `,"v":`...)
	b = w.Value.Append(b)
	return append(b, '}')
}

func AppendNullableString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return jsonstr.Append(b, *s)
}

// AppendTime is time.Time's MarshalJSON for a time EncodableTime accepts.
func AppendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// EncodableTime reports whether time.Time's MarshalJSON encodes t as
// AppendTime does (it refuses years outside [0,9999] and zone offsets
// with seconds, or beyond ±24h).
func EncodableTime(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off%60 == 0 && off > -24*3600 && off < 24*3600
}

func AppendCounters(b []byte, c money.UsageCounters) []byte {
	b = append(b, `{"total":`...)
	b = c.Total.Append(b)
	for _, w := range []struct {
		name string
		w    money.Windowed
	}{{"daily", c.Daily}, {"weekly", c.Weekly}, {"monthly", c.Monthly}} {
		b = append(b, `,"`...)
		b = append(b, w.name...)
		b = append(b, `":{"p":`...)
		b = strconv.AppendInt(b, w.w.Period, 10)
		b = append(b, `,"v":`...)
		b = w.w.Value.Append(b)
		b = append(b, '}')
	}
	return append(b, '}')
}
