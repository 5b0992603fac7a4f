package record

import (
	"fmt"
	"strconv"
	"strings"
)

// GenerationPrefix keys the generation records: append-only, read from
// disk on demand, never loaded into memory.
const GenerationPrefix = "g/"

// UpstreamIDPrefix keys the generation ids by "<account id>/<upstream
// id>": the provider's id of an answer the client saw unchanged (a
// Responses object passed through), so that it finds its generation.
const UpstreamIDPrefix = "gu/"

// GenerationMillis is the creation time (Unix milliseconds) a generation
// id starts with (NewGenerationID: "gen-" and 13 digits).
func GenerationMillis(id string) (int64, bool) {
	rest, ok := strings.CutPrefix(id, "gen-")
	if !ok || len(rest) < 13 {
		return 0, false
	}
	ms, err := strconv.ParseInt(rest[:13], 10, 64)
	return ms, err == nil
}

// GenerationSlot is the 10 ms of its creation a generation record falls in,
// from the time its id starts with (NewGenerationID): the on-disk store
// keeps the records of one slot together, so that a lookup reads one slot's
// and a scan returns them about in creation order.
func GenerationSlot(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, GenerationPrefix+"gen-")
	if !ok || len(id) < 13 {
		return "", false
	}
	for i := range 13 {
		if id[i] < '0' || id[i] > '9' {
			return "", false
		}
	}
	return id[:12], true
}

// GenerationSlotOfHour is the slot (GenerationSlot) of the first
// generation created in hour; "" for hour 0, the start of every slot.
func GenerationSlotOfHour(hour int32) string {
	if hour <= 0 {
		return ""
	}
	return fmt.Sprintf("%013d", int64(hour)*3600*1000)[:12]
}
