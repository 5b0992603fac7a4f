// Package textlimit holds the bounds of the string fields of request
// bodies and the check of one decoded value against them. The API's body
// checks, SCIM and the dashboard's settings share it, so a field has the
// same bound wherever it is written.
package textlimit

import (
	"errors"
	"fmt"

	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
)

// Bounds of string fields, in characters (Unicode code points), as the
// docs' limits list them.
const (
	// MaxNameLen bounds names, ids, slugs, labels, e-mail addresses,
	// model ids, end-user ids: every string field not listed below.
	MaxNameLen = 256
	// MaxDescriptionLen bounds descriptions and notes, which may span
	// lines.
	MaxDescriptionLen = 1024
	// MaxCommentLen bounds a generation feedback comment.
	MaxCommentLen = 1000
	// MaxURLLen bounds URLs (a private endpoint's base_url).
	MaxURLLen = 2048
	// MaxSecretLen bounds provider keys (BYOK key, a private endpoint's
	// api_key).
	MaxSecretLen = 8192
)

// Limit is the longest value of the string field name and whether it may
// hold line breaks and tabs.
func Limit(name string) (max int, multiline bool) {
	switch name {
	case "description", "note":
		return MaxDescriptionLen, true
	case "comment":
		return MaxCommentLen, true
	case "base_url":
		return MaxURLLen, false
	case "key", "api_key":
		// Pasted keys end in a line break; their own checks trim it and
		// refuse any inside.
		return MaxSecretLen, true
	}
	return MaxNameLen, false
}

// Check checks a decoded string value of the field name against the
// field's bounds: its length and, unless the field may span lines, no
// control characters. The error's text starts with the field's name.
func Check(name, s string) error {
	max, multiline := Limit(name)
	n := 0
	for _, r := range s {
		if jsoncheck.IsControl(r) || !multiline && (r == '\n' || r == '\r' || r == '\t') {
			return errors.New(name + ": control characters are not allowed")
		}
		n++
	}
	if n > max {
		return fmt.Errorf("%s: expected at most %d characters", name, max)
	}
	return nil
}
