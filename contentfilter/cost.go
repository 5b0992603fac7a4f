package contentfilter

import (
	"regexp/syntax"
	"unicode"
)

// The cost model of a custom pattern. Go's regexp runs an RE2 pattern in
// time linear in the text, but per byte it steps every thread alive at
// once, and a counted repetition such as [a-z]{1,1000} keeps one thread
// per count alive: a pattern the parser accepts could cost a quarter of a
// millisecond a byte. A pattern's cost is the most instructions its
// matcher visits for one byte of a text built to keep threads alive
// (patternCost); a pattern whose cost exceeds MaxPatternCost is refused
// when the guardrail is written, and a request is refused before its
// scan when its text times the cost of the patterns in force exceeds
// ScanBudget (Result.TooCostly).
const (
	// MaxPatternCost bounds one pattern's cost: one or two microseconds
	// a byte at worst.
	MaxPatternCost = 64
	// ScanBudget bounds the cost of one request's scan by custom
	// patterns, in instructions stepped (bytes of text times each
	// pattern's cost): at worst about a second of CPU.
	ScanBudget = 64 << 20
)

// costProbeSteps bounds the bytes patternCost feeds a pattern: enough
// for a counted repetition's threads to pile up past MaxPatternCost.
const costProbeSteps = 4*MaxPatternCost + 64

// patternCost estimates prog's worst case per byte: it runs the program
// as Go's unanchored matcher does (a thread started at every byte),
// choosing each next character among those the live threads accept so
// as to keep the most instructions alive, and returns the most it saw
// (stopping once past MaxPatternCost). Empty-width assertions (\b, ^, $)
// are taken as passing, which only overstates the cost.
func patternCost(prog *syntax.Prog) int {
	n := len(prog.Inst)
	seen := make([]uint32, n)
	mark := uint32(0)
	var stack []uint32
	// closure adds to set the instructions reached from pcs without
	// consuming a character, and returns how many it visited.
	closure := func(set []uint32, pcs ...uint32) ([]uint32, int) {
		visited := 0
		stack = append(stack[:0], pcs...)
		for len(stack) > 0 {
			pc := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[pc] == mark {
				continue
			}
			seen[pc] = mark
			visited++
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstAlt, syntax.InstAltMatch:
				stack = append(stack, in.Arg, in.Out)
			case syntax.InstCapture, syntax.InstNop, syntax.InstEmptyWidth:
				stack = append(stack, in.Out)
			case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
				set = append(set, pc)
			}
		}
		return set, visited
	}
	// step is the threads after r, and the instructions visited.
	step := func(live []uint32, r rune, out []uint32) ([]uint32, int) {
		mark++
		out, visited := closure(out[:0], uint32(prog.Start))
		for _, pc := range live {
			if prog.Inst[pc].MatchRune(r) {
				var v int
				out, v = closure(out, prog.Inst[pc].Out)
				visited += v
			}
		}
		return out, visited
	}
	live, worst := step(nil, -1, nil)
	var next, best []uint32
	var cands []rune
	for range costProbeSteps {
		cands = cands[:0]
		for _, pc := range live {
			if r := sampleRune(&prog.Inst[pc]); r >= 0 && !containsRune(cands, r) && len(cands) < 16 {
				cands = append(cands, r)
			}
		}
		if len(cands) == 0 {
			break
		}
		bestCost := -1
		for _, r := range cands {
			var c int
			next, c = step(live, r, next)
			if c > bestCost {
				bestCost = c
				best, next = append(best[:0], next...), best
			}
		}
		live, best = best, live
		worst = max(worst, bestCost)
		if worst > MaxPatternCost {
			break
		}
	}
	return worst
}

// sampleRune is a character the instruction accepts, or -1.
func sampleRune(in *syntax.Inst) rune {
	switch in.Op {
	case syntax.InstRune1:
		return in.Rune[0]
	case syntax.InstRune:
		if len(in.Rune) == 0 {
			return -1
		}
		r := in.Rune[0]
		if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
			r = unicode.SimpleFold(r)
		}
		return r
	case syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
		return 'a'
	}
	return -1
}

func containsRune(rs []rune, r rune) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}
