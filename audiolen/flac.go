package audiolen

import (
	"errors"
	"time"
)

// flacLength is the longer of the samples a FLAC file's STREAMINFO
// states and those of every frame whose header (checked by its CRC-8)
// the file holds after its metadata: a STREAMINFO that understates the
// audio does not shorten it.
func flacLength(b []byte) (time.Duration, error) {
	i := 4
	var rate, total uint64
	for last := false; !last; {
		if i+4 > len(b) {
			return 0, errors.New("FLAC file ends within its metadata")
		}
		last = b[i]&0x80 != 0
		typ, size := b[i]&0x7F, int(b[i+1])<<16|int(b[i+2])<<8|int(b[i+3])
		body := b[i+4:]
		if typ == 0 {
			if size < 34 || len(body) < 34 {
				return 0, errors.New("FLAC STREAMINFO too short")
			}
			rate = uint64(body[10])<<12 | uint64(body[11])<<4 | uint64(body[12])>>4
			total = uint64(body[13]&0x0F)<<32 | uint64(body[14])<<24 | uint64(body[15])<<16 | uint64(body[16])<<8 | uint64(body[17])
		}
		i += 4 + size
	}
	if rate == 0 {
		return 0, errors.New("FLAC file without its sample rate")
	}
	var framed uint64
	for i+6 <= len(b) {
		if b[i] != 0xFF {
			if i = nextSync(b, i); i < 0 {
				break
			}
			continue
		}
		i++
		// A frame header's fixed bits, before its CRC is computed.
		if b[i]&0xFE != 0xF8 || b[i+1] < 0x10 || b[i+1]&0x0F == 0x0F || b[i+2]&1 != 0 || b[i+3] == 0xFF {
			continue
		}
		if n, ok := flacFrame(b[i-1:]); ok {
			framed += n
		}
	}
	return seconds(max(total, framed), rate), nil
}

// flacFrame reads the frame header at the start of h: its block size in
// samples; ok is false when h starts no frame (its CRC-8 does not match).
func flacFrame(h []byte) (samples uint64, ok bool) {
	bs, sr := h[2]>>4, h[2]&0x0F
	ch, ss := h[3]>>4, (h[3]>>1)&7
	if bs == 0 || sr == 15 || ch > 10 || ss == 3 || ss == 7 || h[3]&1 != 0 {
		return 0, false
	}
	i := 4
	// The frame or sample number, UTF-8 coded (up to 7 bytes).
	n := 0
	for c := h[i]; c&0x80 != 0 && n < 8; c <<= 1 {
		n++
	}
	switch {
	case n == 1 || n > 7:
		return 0, false
	case n == 0:
		i++
	default:
		i += n
	}
	if i > len(h) {
		return 0, false
	}
	switch {
	case bs == 1:
		samples = 192
	case bs <= 5:
		samples = 576 << (bs - 2)
	case bs == 6:
		if i+1 > len(h) {
			return 0, false
		}
		samples = uint64(h[i]) + 1
		i++
	case bs == 7:
		if i+2 > len(h) {
			return 0, false
		}
		samples = uint64(h[i])<<8 | uint64(h[i+1]) + 1
		i += 2
	default:
		samples = 256 << (bs - 8)
	}
	switch sr {
	case 12:
		i++
	case 13, 14:
		i += 2
	}
	if i+1 > len(h) {
		return 0, false
	}
	return samples, crc8(h[:i]) == h[i]
}

// crc8Table is FLAC's CRC-8 (polynomial x^8 + x^2 + x + 1) by byte.
var crc8Table = func() (t [256]byte) {
	for i := range t {
		c := byte(i)
		for range 8 {
			if c&0x80 != 0 {
				c = c<<1 ^ 0x07
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// crc8 is FLAC's CRC-8 of b.
func crc8(b []byte) byte {
	var c byte
	for _, x := range b {
		c = crc8Table[c^x]
	}
	return c
}
