// Package audiolen measures how long an audio file plays from its own
// headers and frames (WAV, MP3, FLAC, Ogg Vorbis and Opus), in one pass
// over the file whatever its bytes, so that a transcription is held and
// charged for the audio it sends, never for a length a client states.
package audiolen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"
)

// Format is an audio file's format, as its bytes say.
type Format string

const (
	WAV  Format = "wav"
	MP3  Format = "mp3"
	FLAC Format = "flac"
	Ogg  Format = "ogg"
)

// ErrUnknown is a file none of the formats' parsers reads.
var ErrUnknown = errors.New("not WAV, MP3, FLAC or Ogg audio")

// Measure returns the format of audio b and how long it plays. The work
// is linear in len(b), with a small constant per byte.
func Measure(b []byte) (Format, time.Duration, error) {
	var f Format
	var d time.Duration
	var err error
	switch {
	case len(b) >= 12 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		f = WAV
		d, err = wavLength(b)
	case bytes.HasPrefix(b, []byte("fLaC")):
		f = FLAC
		d, err = flacLength(b)
	case bytes.HasPrefix(b, []byte("OggS")):
		f = Ogg
		d, err = oggLength(b)
	default:
		f = MP3
		d, err = mp3Length(b)
	}
	if err != nil {
		return "", 0, err
	}
	return f, d, nil
}

// seconds is n samples at rate as a duration, without overflow for any
// count a file of a few hundred megabytes may hold.
func seconds(n uint64, rate uint64) time.Duration {
	whole := n / rate
	frac := n % rate
	return time.Duration(whole)*time.Second + time.Duration(frac*uint64(time.Second)/rate)
}

// wavLength reads a WAV file's fmt and data chunks: the data's bytes at
// the PCM format's byte rate (uncompressed PCM or float, whose byte rate
// must agree with its sample rate and frame size).
func wavLength(b []byte) (time.Duration, error) {
	var rate, blockAlign uint32
	var fmtOK bool
	for i := 12; i+8 <= len(b); {
		id, size := string(b[i:i+4]), uint64(binary.LittleEndian.Uint32(b[i+4:i+8]))
		body := b[i+8:]
		switch id {
		case "fmt ":
			if size < 16 || len(body) < 16 {
				return 0, errors.New("WAV fmt chunk too short")
			}
			format := binary.LittleEndian.Uint16(body[0:2])
			channels := uint32(binary.LittleEndian.Uint16(body[2:4]))
			sampleRate := binary.LittleEndian.Uint32(body[4:8])
			byteRate := binary.LittleEndian.Uint32(body[8:12])
			blockAlign = uint32(binary.LittleEndian.Uint16(body[12:14]))
			bits := uint32(binary.LittleEndian.Uint16(body[14:16]))
			if format != 1 && format != 3 && format != 0xFFFE {
				return 0, errors.New("WAV audio that is not PCM")
			}
			if channels == 0 || sampleRate == 0 || bits == 0 || blockAlign != channels*((bits+7)/8) || byteRate != sampleRate*blockAlign {
				return 0, errors.New("WAV fmt chunk inconsistent")
			}
			rate, fmtOK = byteRate, true
		case "data":
			if !fmtOK {
				return 0, errors.New("WAV data before its fmt chunk")
			}
			n := min(size, uint64(len(body)))
			n -= n % uint64(blockAlign)
			return seconds(n, uint64(rate)), nil
		}
		next := uint64(i) + 8 + size + size&1
		if next > uint64(len(b)) {
			break
		}
		i = int(next)
	}
	return 0, errors.New("WAV file without data")
}

// nextSync is the index of the next 0xFF byte after b[i], where an MP3
// or FLAC frame may start, or -1: the bytes between start no frame and
// are stepped over at once.
func nextSync(b []byte, i int) int {
	j := bytes.IndexByte(b[i+1:], 0xFF)
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
