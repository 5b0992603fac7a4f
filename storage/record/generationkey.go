package record

import (
	"fmt"
	"strings"
)

// GenerationPrefix keys the generation records: append-only, read from
// disk on demand, never loaded into memory.
const GenerationPrefix = "g/"

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
