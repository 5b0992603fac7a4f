// Package suggest names the known word a mistyped one was likely meant to
// be, for configuration errors a person can act on.
package suggest

import "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

// UnknownOption is the error for an option the block does not know, at its
// line, suggesting the nearest known one when it looks like a typo of it:
// `unrecognized model option "context_lenght"; did you mean context_length?`.
func UnknownOption(d *caddyfile.Dispenser, block string, known []string) error {
	name := d.Val()
	if s := Nearest(name, known); s != "" {
		return d.Errf("unrecognized %s option %q; did you mean %s?", block, name, s)
	}
	return d.Errf("unrecognized %s option %q", block, name)
}

// Nearest is the known word closest to w by edit distance (a transposition
// counting as one edit), if it is close enough to be a typo: at most two
// edits, and fewer than a third of the word's letters.
func Nearest(w string, known []string) string {
	best, bestDist := "", 0
	for _, k := range known {
		d := editDistance(w, k)
		if d <= 2 && d*3 < max(len(w), len(k)) && (best == "" || d < bestDist) {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b
// (Levenshtein with adjacent transpositions), over bytes: option names are
// ASCII.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
