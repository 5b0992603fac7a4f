package audio

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// maxFormValue bounds each text part of an upload.
const maxFormValue = 4096

// formParts are the parts an upload may have besides file: their JSON
// form's member and whether it is a number.
var formParts = map[string]struct {
	member string
	number bool
}{
	"model":                     {"model", false},
	"language":                  {"language", false},
	"response_format":           {"response_format", false},
	"temperature":               {"temperature", true},
	"timestamp_granularities[]": {"timestamp_granularities", false},
	"timestamp_granularities":   {"timestamp_granularities", false},
	"user":                      {"user", false},
	"session_id":                {"session_id", false},
}

// IsForm reports whether contentType is a multipart upload.
func IsForm(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "multipart/form-data"
}

// FormBody reads a transcription's multipart upload (body, of
// contentType) into the JSON form NewTranscription checks: the file
// (bounded by MaxAudioBytes, 413; audio the gateway measures, else a 400
// naming file) as input_audio, the other parts as members.
func FormBody(body []byte, contentType string) ([]byte, *apierror.Error) {
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil || params["boundary"] == "" {
		return nil, apierror.BadRequest("Content-Type: a multipart/form-data upload needs its boundary")
	}
	r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var audio []byte
	fileSeen := false
	var members []byte
	var grains []string
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, apierror.BadRequest("the multipart upload cannot be read: " + err.Error())
		}
		name := p.FormName()
		if name == "file" {
			if fileSeen {
				return nil, apierror.BadRequest("file: one audio file per request")
			}
			fileSeen = true
			if audio, err = io.ReadAll(io.LimitReader(p, MaxAudioBytes+1)); err != nil {
				return nil, apierror.BadRequest("file: the upload cannot be read: " + err.Error())
			}
			if len(audio) > MaxAudioBytes {
				return nil, tooLarge("file")
			}
			continue
		}
		part, known := formParts[name]
		if !known {
			return nil, apierror.BadRequest(name + ": not a field of a transcription upload")
		}
		v, err := io.ReadAll(io.LimitReader(p, maxFormValue+1))
		if err != nil || len(v) > maxFormValue {
			return nil, apierror.BadRequest(name + ": at most " + strconv.Itoa(maxFormValue) + " bytes")
		}
		if part.member == "timestamp_granularities" {
			grains = append(grains, string(v))
			continue
		}
		members = append(members, ',')
		members = append(members, jsonstr.Quote(part.member)...)
		members = append(members, ':')
		if part.number {
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				return nil, apierror.BadRequest(name + ": a number")
			}
			members = strconv.AppendFloat(members, f, 'g', -1, 64)
		} else {
			members = append(members, jsonstr.Quote(string(v))...)
		}
	}
	if !fileSeen {
		return nil, apierror.BadRequest("file: required audio file")
	}
	format, _, apiErr := measure(audio, "file")
	if apiErr != nil {
		return nil, apiErr
	}
	out := make([]byte, 0, base64.StdEncoding.EncodedLen(len(audio))+len(members)+64)
	out = append(out, `{"input_audio":{"format":"`...)
	out = append(out, format...)
	out = append(out, `","data":"`...)
	out = base64.StdEncoding.AppendEncode(out, audio)
	out = append(out, `"}`...)
	out = append(out, members...)
	if grains != nil {
		out = append(out, `,"timestamp_granularities":[`...)
		for i, g := range grains {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, jsonstr.Quote(g)...)
		}
		out = append(out, ']')
	}
	return append(out, '}'), nil
}
