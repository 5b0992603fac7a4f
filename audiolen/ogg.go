package audiolen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"
)

// oggLength reads an Ogg file's pages: the first stream's codec (Vorbis
// or Opus), and its length, the last granule position of its pages; for
// Opus, the longer of that and the frames its packets' TOC bytes count,
// so that a granule that understates the audio does not shorten it.
func oggLength(b []byte) (time.Duration, error) {
	var serial uint32
	var rate, preSkip, granule, opusSamples uint64
	opus := false
	packets := 0       // the first stream's packets begun so far
	continued := false // the page's first segment continues a packet
	for i := 0; i+27 <= len(b); {
		if string(b[i:i+4]) != "OggS" || b[i+4] != 0 {
			return 0, errors.New("an Ogg page expected")
		}
		flags := b[i+5]
		g := binary.LittleEndian.Uint64(b[i+6 : i+14])
		s := binary.LittleEndian.Uint32(b[i+14 : i+18])
		nseg := int(b[i+26])
		if i+27+nseg > len(b) {
			break
		}
		segs := b[i+27 : i+27+nseg]
		body := i + 27 + nseg
		if i == 0 {
			serial = s
			p := b[body:]
			switch {
			case bytes.HasPrefix(p, []byte("\x01vorbis")) && len(p) >= 16:
				rate = uint64(binary.LittleEndian.Uint32(p[12:16]))
			case bytes.HasPrefix(p, []byte("OpusHead")) && len(p) >= 12:
				rate, preSkip, opus = 48000, uint64(binary.LittleEndian.Uint16(p[10:12])), true
			default:
				return 0, errors.New("an Ogg stream that is not Vorbis or Opus")
			}
		}
		if s == serial {
			if g != ^uint64(0) && g > granule {
				granule = g
			}
			continued = continued && flags&1 != 0
			at := body
			for _, n := range segs {
				if !continued {
					// A packet begins: after the Opus header and tags,
					// its TOC byte says how long it plays.
					if packets >= 2 && opus && at < len(b) {
						opusSamples += opusPacket(b[at:min(at+2, len(b))])
					}
					packets++
				}
				continued = n == 255
				at += int(n)
			}
		}
		next := body
		for _, n := range segs {
			next += int(n)
		}
		i = next
	}
	if rate == 0 {
		return 0, errors.New("an Ogg stream without its sample rate")
	}
	if opus {
		granule = max(granule, opusSamples) - min(preSkip, max(granule, opusSamples))
	}
	return seconds(granule, rate), nil
}

// opusFrame is the samples at 48 kHz of one frame by TOC configuration.
var opusFrame = [32]uint64{
	480, 960, 1920, 2880, 480, 960, 1920, 2880, 480, 960, 1920, 2880, // SILK
	480, 960, 480, 960, // hybrid
	120, 240, 480, 960, 120, 240, 480, 960, 120, 240, 480, 960, 120, 240, 480, 960, // CELT
}

// opusPacket is the samples of the Opus packet starting p (its TOC byte
// and, for code 3, its frame count).
func opusPacket(p []byte) uint64 {
	if len(p) == 0 {
		return 0
	}
	frame := opusFrame[p[0]>>3]
	switch p[0] & 3 {
	case 0:
		return frame
	case 1, 2:
		return 2 * frame
	}
	if len(p) < 2 {
		return 0
	}
	return uint64(p[1]&0x3F) * frame
}
