package audiolen

import (
	"time"
)

// mp3Bitrates are the bitrates in kbit/s by bitrate index: MPEG-1 layers
// I, II and III, then MPEG-2 and 2.5 layer I, then their layers II and III.
var mp3Bitrates = [5][15]uint32{
	{0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448},
	{0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384},
	{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320},
	{0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256},
	{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160},
}

// mp3Rates are the sample rates by version (MPEG-2.5, reserved, MPEG-2,
// MPEG-1) and rate index.
var mp3Rates = [4][3]uint32{{11025, 12000, 8000}, {}, {22050, 24000, 16000}, {44100, 48000, 32000}}

// mp3Frame reads the MPEG audio frame header h: the frame's length in
// bytes, its samples and its sample rate; ok is false when h is none.
func mp3Frame(h []byte) (length, samples, rate uint32, ok bool) {
	if h[0] != 0xFF || h[1]&0xE0 != 0xE0 {
		return 0, 0, 0, false
	}
	version, layer := (h[1]>>3)&3, (h[1]>>1)&3
	bi, ri, pad := h[2]>>4, (h[2]>>2)&3, uint32(h[2]>>1)&1
	if version == 1 || layer == 0 || bi == 0 || bi == 15 || ri == 3 {
		return 0, 0, 0, false
	}
	rate = mp3Rates[version][ri]
	var table int
	switch {
	case version == 3:
		table = int(3 - layer) // layer I is 3
	case layer == 3:
		table = 3
	default:
		table = 4
	}
	bitrate := mp3Bitrates[table][bi] * 1000
	switch {
	case layer == 3: // layer I
		return (12*bitrate/rate + pad) * 4, 384, rate, true
	case layer == 1 && version != 3: // MPEG-2 and 2.5 layer III
		return 72*bitrate/rate + pad, 576, rate, true
	}
	return 144*bitrate/rate + pad, 1152, rate, true
}

// mp3Length adds up the samples of every MPEG audio frame of b, after an
// ID3v2 tag; bytes that are no frame are stepped over one by one.
func mp3Length(b []byte) (time.Duration, error) {
	i := 0
	if len(b) >= 10 && string(b[0:3]) == "ID3" {
		size := int(b[6]&0x7F)<<21 | int(b[7]&0x7F)<<14 | int(b[8]&0x7F)<<7 | int(b[9]&0x7F)
		i = 10 + size
		if b[5]&0x10 != 0 {
			i += 10 // a footer
		}
	}
	// The samples at each rate (a file may change it: each is counted at
	// its own; there are nine).
	var samples [9]uint64
	var rates [9]uint32
	frames := 0
	paired := false // a frame was followed by another
	for i+4 <= len(b) {
		// Most bytes start no frame: stepped over without a call.
		if b[i] != 0xFF {
			if i = nextSync(b, i); i < 0 {
				break
			}
			continue
		}
		if b[i+1]&0xE0 != 0xE0 || b[i+2] >= 0xF0 || b[i+2] < 0x10 {
			i++
			continue
		}
		length, n, rate, ok := mp3Frame(b[i : i+4])
		if !ok || length < 4 {
			i++
			continue
		}
		follows, next := mp3Follows(b, i+int(length))
		if !follows {
			i++
			continue
		}
		paired = paired || next
		for k := range rates {
			if rates[k] == rate || rates[k] == 0 {
				rates[k] = rate
				samples[k] += uint64(n)
				break
			}
		}
		frames++
		i += int(length)
	}
	if frames == 0 || !paired {
		return 0, ErrUnknown
	}
	var d time.Duration
	for k, rate := range rates {
		if rate != 0 {
			d += seconds(samples[k], uint64(rate))
		}
	}
	return d, nil
}

// mp3Follows reports whether the frame ending at end is followed by
// another frame or by the file's end (a last frame, or one cut short), so
// that two bytes of other data are not taken for a frame.
func mp3Follows(b []byte, end int) (follows, byFrame bool) {
	if end+4 > len(b) {
		return true, false
	}
	_, _, _, ok := mp3Frame(b[end : end+4])
	return ok, ok
}
