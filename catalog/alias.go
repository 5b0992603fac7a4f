package catalog

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// An alias names the newest model of a family: "~anthropic/claude-sonnet-latest"
// is the newest of anthropic's models whose slug, without its version
// parts, is claude-sonnet (claude-sonnet-4.5, claude-3.5-sonnet, ...).
const (
	aliasPrefix = "~"
	aliasSuffix = "-latest"
)

// IsAlias reports whether id names a model by a family alias
// (~author/family-latest, perhaps with variant suffixes), known to the
// catalog or not: no model id of the public API starts with '~'.
func IsAlias(id string) bool { return strings.HasPrefix(id, aliasPrefix) }

// AliasOf is the alias of the family model id belongs to: its author and
// the words of its slug that are not versions (a word that starts with a
// digit, or a "v" followed by one). A variant (":free"), an id without an
// author or a slug of versions only has none.
func AliasOf(id string) (string, bool) {
	author, slug, ok := strings.Cut(id, "/")
	if !ok || author == "" || strings.ContainsAny(id, ":~") {
		return "", false
	}
	var family []string
	for word := range strings.SplitSeq(slug, "-") {
		if word != "" && !isVersionWord(word) {
			family = append(family, word)
		}
	}
	if len(family) == 0 {
		return "", false
	}
	return aliasPrefix + author + "/" + strings.Join(family, "-") + aliasSuffix, true
}

// isVersionWord reports whether a slug's word is a version or a date
// (4, 4o, 3.5, 20241022, v2) rather than part of the family's name.
func isVersionWord(w string) bool {
	if w[0] >= '0' && w[0] <= '9' {
		return true
	}
	return len(w) > 1 && (w[0] == 'v' || w[0] == 'V') && w[1] >= '0' && w[1] <= '9'
}

// version is the numbers of id's version words, in order: claude-3-5-sonnet
// is [3 5], gpt-4.1 [4 1], claude-sonnet-4.5 [4 5].
func version(id string) []int64 {
	_, slug, _ := strings.Cut(id, "/")
	var out []int64
	for word := range strings.SplitSeq(slug, "-") {
		if word == "" || !isVersionWord(word) {
			continue
		}
		for num := range strings.FieldsFuncSeq(word, func(r rune) bool { return r < '0' || r > '9' }) {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				n = 1<<63 - 1 // too many digits: larger than any other
			}
			out = append(out, n)
		}
	}
	return out
}

// newer reports whether model a is newer than b: its creation date is
// later, or, created at the same time (the catalog's default date), its
// version is higher.
func newer(a, b *Model) bool {
	ca, cb := gjson.GetBytes(a.Public, "created").Int(), gjson.GetBytes(b.Public, "created").Int()
	if ca != cb {
		return ca > cb
	}
	va, vb := version(a.ID), version(b.ID)
	for i := range min(len(va), len(vb)) {
		if va[i] != vb[i] {
			return va[i] > vb[i]
		}
	}
	return len(va) > len(vb)
}

// aliases maps each family alias of models to its newest model; of equals,
// the first in catalog order.
func aliases(models []*Model) map[string]*Model {
	out := map[string]*Model{}
	for _, m := range models {
		alias, ok := AliasOf(m.ID)
		if !ok {
			continue
		}
		if cur, ok := out[alias]; !ok || newer(m, cur) {
			out[alias] = m
		}
	}
	return out
}
