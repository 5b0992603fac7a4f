// Package tokenizer counts the tokens of a text as OpenAI's byte-level BPE
// encodings (o200k_base, cl100k_base) make them, with the vocabularies
// embedded in the binary: nothing is downloaded at run time.
//
// The split of a text into pieces follows each encoding's pattern, written
// out by hand rather than run through a backtracking regular expression
// engine (several times faster); each piece is then merged by rank as
// tiktoken does. Counts equal tiktoken's for valid UTF-8, except for
// pieces longer than exactPiece bytes, whose count is bounded from above.
package tokenizer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go-loader/assets"
)

// Encoding names.
const (
	O200kBase  = "o200k_base"
	Cl100kBase = "cl100k_base"
)

// Encoding is one BPE vocabulary and its splitting pattern. Its methods are
// safe for concurrent use.
type Encoding struct {
	name  string
	split func(s string, i int) int // the end of the piece that starts at i
	file  string                    // the embedded vocabulary

	once  sync.Once
	ranks map[string]int32
	err   error
}

var encodings = map[string]*Encoding{
	O200kBase:  {name: O200kBase, split: o200kPiece, file: "o200k_base.tiktoken"},
	Cl100kBase: {name: Cl100kBase, split: cl100kPiece, file: "cl100k_base.tiktoken"},
}

// Names are the encodings Get knows.
func Names() []string { return []string{O200kBase, Cl100kBase} }

// Get returns the named encoding, its vocabulary loaded (once per process).
func Get(name string) (*Encoding, error) {
	e, ok := encodings[name]
	if !ok {
		return nil, fmt.Errorf("unknown tokenizer %q", name)
	}
	e.once.Do(e.load)
	if e.err != nil {
		return nil, e.err
	}
	return e, nil
}

// Name is the encoding's name.
func (e *Encoding) Name() string { return e.name }

// load reads the embedded vocabulary: one "base64-token rank" a line.
func (e *Encoding) load() {
	data, err := assets.Assets.ReadFile(e.file)
	if err != nil {
		e.err = fmt.Errorf("tokenizer %s: %v", e.name, err)
		return
	}
	ranks := make(map[string]int32, bytes.Count(data, []byte{'\n'})+1)
	sc := bufio.NewScanner(bytes.NewReader(data))
	buf := make([]byte, 256)
	for sc.Scan() {
		tok, rank, ok := bytes.Cut(sc.Bytes(), []byte{' '})
		if !ok {
			continue
		}
		n, err := base64.StdEncoding.Decode(buf, tok)
		r, err2 := strconv.ParseInt(string(rank), 10, 32)
		if err != nil || err2 != nil {
			e.err = fmt.Errorf("tokenizer %s: bad vocabulary line %q", e.name, sc.Text())
			return
		}
		ranks[string(buf[:n])] = int32(r)
	}
	e.ranks = ranks
}

// Count is the number of tokens of s. Special tokens written in s (such
// as <|endoftext|>) count as ordinary text, as the providers encode
// message text.
func (e *Encoding) Count(s string) int {
	n := 0
	for i := 0; i < len(s); {
		end := e.split(s, i)
		n += e.countPiece(s[i:end])
		i = end
	}
	return n
}

// ErrOverLimit ends a CountUpTo whose count passed its limit.
var ErrOverLimit = errors.New("tokenizer: the count passed its limit")

// CountUpTo is Count for a request, in steps of 64 KiB of text (cut
// between pieces): it stops with ctx's error once ctx ends, and with
// ErrOverLimit once the count passes limit (0: no limit), returning the
// count so far, a lower bound.
func (e *Encoding) CountUpTo(ctx context.Context, s string, limit int) (int, error) {
	const every = 64 << 10
	n := 0
	for len(s) > every {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if limit > 0 && n > limit {
			return n, ErrOverLimit
		}
		// A piece may cross the cut: the split goes on to its end.
		i := 0
		for i < every {
			i = e.split(s, i)
		}
		n += e.Count(s[:i])
		s = s[i:]
	}
	return n + e.Count(s), ctx.Err()
}

// smallPiece bounds the pieces merged on the stack by scanning for the
// lowest rank; longer ones (rare: long words, runs of spaces) use a heap,
// so that no text costs quadratic time.
const smallPiece = 48

// exactPiece bounds the pieces merged whole, exactly. The heap's cost a
// byte grows with the piece (its arrays leave the cache: a text of 60 KB
// "words" cost five times ordinary text), so a longer piece (a run of
// one letter, a blob without spaces) is counted in chunks of at most
// exactPiece bytes, cut where a character starts, each merged exactly,
// plus one token a cut: an upper bound of its count, since a merge the
// cut prevents saves at most about one token (tests check the bound on
// long random pieces of several scripts), and at most a few percent
// above it. Every text then costs about what pieces of exactPiece bytes
// cost, linear in its length.
const exactPiece = 256

const noRank = int32(1<<31 - 1)

// countPiece is the number of tokens of one piece of the split.
func (e *Encoding) countPiece(p string) int {
	if len(p) == 1 {
		return 1 // every byte is a token
	}
	if _, ok := e.ranks[p]; ok {
		return 1
	}
	if len(p) > exactPiece {
		return e.countChunks(p)
	}
	if len(p) > smallPiece {
		return e.mergeLong(p)
	}
	// tiktoken's byte_pair_merge: parts[i] starts a part; rank[i] is the
	// rank of parts i and i+1 merged.
	var start [smallPiece + 1]int
	var rank [smallPiece + 1]int32
	n := len(p) + 1
	for i := range n {
		start[i] = i
	}
	pair := func(i int) int32 {
		if i+2 >= n {
			return noRank
		}
		if r, ok := e.ranks[p[start[i]:start[i+2]]]; ok {
			return r
		}
		return noRank
	}
	for i := range n {
		rank[i] = pair(i)
	}
	for n > 2 {
		m, at := noRank, -1
		for i := 0; i < n-2; i++ {
			if rank[i] < m {
				m, at = rank[i], i
			}
		}
		if at < 0 {
			break
		}
		copy(start[at+1:n-1], start[at+2:n])
		copy(rank[at+1:n-1], rank[at+2:n])
		n--
		rank[at] = pair(at)
		if at > 0 {
			rank[at-1] = pair(at - 1)
		}
	}
	return n - 1
}

// countChunks bounds the tokens of a piece longer than exactPiece (see
// exactPiece).
func (e *Encoding) countChunks(p string) int {
	n := 0
	for len(p) > exactPiece {
		k := exactPiece
		for k > exactPiece-utf8.UTFMax && !utf8.RuneStart(p[k]) {
			k--
		}
		n += e.countPiece(p[:k]) + 1
		p = p[k:]
	}
	return n + e.countPiece(p)
}

// mergeLong merges a long piece as countPiece does, lowest rank first and
// leftmost among equals, with a heap of candidate pairs over a linked
// list of parts: O(n log n).
func (e *Encoding) mergeLong(p string) int {
	n := len(p)
	// Arrays reused from piece to piece: a long text's chunks allocate
	// nothing.
	sc := scratchPool.Get().(*mergeScratch)
	defer scratchPool.Put(sc)
	next, prev := sc.next[:0], sc.prev[:0] // the start of the next part (n at the end), of the previous
	for i := range n {
		next, prev = append(next, int32(i+1)), append(prev, int32(i-1))
	}
	sc.next, sc.prev = next, prev
	h := sc.heap[:0]
	defer func() { sc.heap = h }()
	push := func(i int32) {
		j := next[i]
		if int(j) >= n {
			return
		}
		if r, ok := e.ranks[p[i:end(next, j, n)]]; ok {
			h.push(pairItem{rank: r, left: i, right: j, end: end(next, j, n)})
		}
	}
	for i := range int32(n) {
		push(i)
	}
	parts := n
	for len(h) > 0 {
		it := h.pop()
		// Stale: a part of the pair was merged since it was pushed.
		if prev[it.left] == -2 || next[it.left] != it.right || end(next, it.right, n) != it.end {
			continue
		}
		// Merge right into left.
		r := it.right
		next[it.left] = next[r]
		if int(next[r]) < n {
			prev[next[r]] = it.left
		}
		prev[r] = -2
		parts--
		push(it.left)
		if pl := prev[it.left]; pl >= 0 {
			push(pl)
		}
	}
	return parts
}

// mergeScratch is mergeLong's arrays, kept between calls.
type mergeScratch struct {
	next, prev []int32
	heap       pairHeap
}

var scratchPool = sync.Pool{New: func() any { return new(mergeScratch) }}

// end is where the part starting at i ends.
func end(next []int32, i int32, n int) int32 {
	if int(i) >= n {
		return int32(n)
	}
	return next[i]
}

type pairItem struct {
	rank             int32
	left, right, end int32
}

// pairHeap is a binary min-heap by rank, then position.
type pairHeap []pairItem

func (a pairItem) less(b pairItem) bool {
	return a.rank < b.rank || a.rank == b.rank && a.left < b.left
}

func (h *pairHeap) push(it pairItem) {
	*h = append(*h, it)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].less(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *pairHeap) pop() pairItem {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[m]) {
			m = l
		}
		if r < len(s) && s[r].less(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
