// Package codec reads and writes the JSON forms of the stored records
// fast, for the stores' own encoders and decoders: Parser reads the exact
// form the encoders write, member by member without reflection (false at
// the first byte it does not expect, and the caller decodes with gjson or
// encoding/json instead); the Decode functions read any form with gjson
// as encoding/json would; the Append functions write what
// encoding/json would.
package codec
