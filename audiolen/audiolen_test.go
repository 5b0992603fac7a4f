package audiolen

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// testWAV is a 16-bit mono WAV of ms milliseconds at 8 kHz.
func testWAV(ms int) []byte {
	data := 16 * ms
	b := make([]byte, 44+data)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+data))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], 8000)
	binary.LittleEndian.PutUint32(b[28:], 16000)
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(data))
	return b
}

// testMP3 is an ID3 tag and n MPEG-1 layer III frames (128 kbit/s,
// 44.1 kHz: 417 bytes and 1152 samples each).
func testMP3(n int) []byte {
	b := []byte("ID3\x04\x00\x00\x00\x00\x00\x05hello")
	for range n {
		f := make([]byte, 417)
		copy(f, []byte{0xFF, 0xFB, 0x90, 0x00})
		b = append(b, f...)
	}
	return b
}

// testFLAC is a FLAC file whose STREAMINFO states total samples at
// 16 kHz, with n frames of 4096 samples.
func testFLAC(total uint64, n int) []byte {
	b := []byte("fLaC\x80\x00\x00\x22")
	si := make([]byte, 34)
	rate := uint64(16000)
	si[10], si[11], si[12] = byte(rate>>12), byte(rate>>4), byte(rate<<4)
	si[13] = byte(total>>32) & 0x0F
	binary.BigEndian.PutUint32(si[14:18], uint32(total))
	b = append(b, si...)
	for k := range n {
		// Fixed blocking, 4096 samples (code 12), rate from STREAMINFO,
		// mono, 16 bits; the frame number; CRC-8; then a constant
		// subframe.
		h := []byte{0xFF, 0xF8, 0xC0, 0x08, byte(k & 0x7F)}
		h = append(h, crc8(h))
		b = append(b, h...)
		b = append(b, 0x00, 0x00, 0x00, 0x12, 0x34)
	}
	return b
}

// oggPage is one Ogg page of the packets (each under 255 bytes).
func oggPage(granule uint64, packets ...[]byte) []byte {
	b := []byte("OggS\x00\x00")
	b = binary.LittleEndian.AppendUint64(b, granule)
	b = append(b, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(len(packets)))
	for _, p := range packets {
		b = append(b, byte(len(p)))
	}
	for _, p := range packets {
		b = append(b, p...)
	}
	return b
}

// testOpus is an Ogg Opus file of n 20 ms packets whose last granule
// position is granule (with a pre-skip of 312).
func testOpus(n int, granule uint64) []byte {
	head := []byte("OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00")
	b := oggPage(0, head)
	b = append(b, oggPage(0, []byte("OpusTags\x00\x00\x00\x00\x00\x00\x00\x00"))...)
	var packets [][]byte
	for range n {
		packets = append(packets, []byte{0x78, 0x01, 0x02}) // CELT 20 ms, one frame
	}
	return append(b, oggPage(granule, packets...)...)
}

func TestMeasure(t *testing.T) {
	for name, c := range map[string]struct {
		b    []byte
		f    Format
		want time.Duration
	}{
		"wav":                       {testWAV(2500), WAV, 2500 * time.Millisecond},
		"mp3":                       {testMP3(100), MP3, 100 * 1152 * time.Second / 44100},
		"flac":                      {testFLAC(16000*3, 10), FLAC, 3 * time.Second},
		"flac understating":         {testFLAC(4096, 20), FLAC, 20 * 4096 * time.Second / 16000},
		"opus":                      {testOpus(50, 50*960+312), Ogg, time.Second},
		"opus granule understating": {testOpus(100, 960+312), Ogg, (100*960 - 312) * time.Second / 48000},
	} {
		f, d, err := Measure(c.b)
		if err != nil || f != c.f || d != c.want {
			t.Errorf("%s: %s %v, %v; want %s %v", name, f, d, err, c.f, c.want)
		}
	}
}

// Files that are not audio the gateway can measure are refused.
func TestMeasureRefuses(t *testing.T) {
	wav := testWAV(100)
	binary.LittleEndian.PutUint32(wav[28:], 1) // a byte rate that disagrees
	adpcm := testWAV(100)
	binary.LittleEndian.PutUint16(adpcm[20:], 0x11)
	for name, b := range map[string][]byte{
		"text":          []byte("this is not audio at all, just a text file\n"),
		"png":           []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"),
		"empty":         nil,
		"wav byte rate": wav,
		"wav adpcm":     adpcm,
		"lone sync":     append(bytes.Repeat([]byte{'x'}, 100), 0xFF, 0xFB, 0x90, 0x00),
		"ogg speex":     oggPage(0, []byte("Speex   ")),
	} {
		if f, d, err := Measure(b); err == nil {
			t.Errorf("%s: measured as %s of %v", name, f, d)
		}
	}
}

// A crafted file costs one pass: 16 MiB of patterns that look like
// frames to each parser is measured in a tenth of a second
// (BenchmarkMeasureCrafted); the bound here leaves room for the race
// detector on a loaded machine.
func TestMeasureBounded(t *testing.T) {
	const size = 16 << 20
	for name, pattern := range map[string][]byte{
		"mp3 syncs":   {0xFF, 0xFB, 0x90},
		"flac syncs":  {0xFF, 0xF8, 0xC0, 0x08},
		"mp3 garbage": {0xFF, 0xFF, 0xFF, 0xFF},
	} {
		b := bytes.Repeat(pattern, size/len(pattern))
		if name == "flac syncs" {
			b = append(testFLAC(0, 0), b...)
		}
		start := time.Now()
		_, _, _ = Measure(b)
		if d := time.Since(start); d > 8*time.Second {
			t.Errorf("%s: %v", name, d)
		}
	}
}

func BenchmarkMeasureCrafted(b *testing.B) {
	for name, f := range map[string][]byte{
		"flac": append(testFLAC(0, 0), bytes.Repeat([]byte{0xFF, 0xF8, 0xC0, 0x08}, 4<<20)...),
		"mp3":  bytes.Repeat([]byte{0xFF}, 16<<20),
		"wav":  testWAV(1000 * 1000),
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(f)))
			for b.Loop() {
				_, _, _ = Measure(f)
			}
		})
	}
}
