package record

// The records' codecs are generated from their struct declarations: a
// field is added to a record, with its json tag, in its struct alone, and
// go generate writes it into every codec the record's //codec: directive
// names (a test fails when the generated code is stale):
//
//   - binary: EncodeX and DecodeX, the record's form in the records'
//     snapshot: each field in declaration order, strings
//     length-prefixed, integers as varints, times as time.Time's binary
//     form, a pointer as a presence byte and its value, a slice as a
//     presence byte (nil and empty stay apart, as in its JSON), a count
//     and its elements, a map as a count and its entries.
//   - json=T: T's AppendJSON, which writes what encoding/json writes
//     for the record's tags, without reflection: the group commit writes
//     the account, key and generation records of every charge.
//   - fast: FastX, which reads that exact form in one pass (opening a
//     database reads every record) and leaves any other to
//     encoding/json (codec.Decode).
//   - gjson: the reader of one member of any JSON form (from gjson's
//     view of the record), as encoding/json reads it: the slower path,
//     for what the fast reader declines.
//   - sums=...: the fast reader of the fields a rollup keeps.

//go:generate go run ./internal/codecgen -o codecs_gen.go

// AccountJSON is an Account as the group commit encodes it.
type AccountJSON Account

// MarshalJSON implements json.Marshaler.
func (a AccountJSON) MarshalJSON() ([]byte, error) { return a.AppendJSON(make([]byte, 0, 512)) }

// APIKeyJSON is an APIKey as the group commit encodes it.
type APIKeyJSON APIKey

// MarshalJSON implements json.Marshaler.
func (k APIKeyJSON) MarshalJSON() ([]byte, error) { return k.AppendJSON(make([]byte, 0, 768)) }
