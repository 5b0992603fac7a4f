package contentfilter

import (
	"context"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// Set is the guards in force for one request: its key's, its member's and
// its workspace's. Every block blocks; every redaction applies.
type Set []*Guard

// Empty reports whether no filter is in force.
func (s Set) Empty() bool {
	for _, g := range s {
		if !g.Empty() {
			return false
		}
	}
	return true
}

// Unusable returns the first guard that refuses every request (its
// filters could not be compiled), or nil.
func (s Set) Unusable() *Guard {
	for _, g := range s {
		if g.IsUnusable() {
			return g
		}
	}
	return nil
}

// Hit is a filter that matched: which guardrail, and its label (its slug
// for a builtin). It never carries the matched text.
type Hit struct {
	GuardrailID   string
	GuardrailName string
	Label         string
	Slug          string // "" for a custom pattern
	Action        Action
}

// Result is what the filters did to a request.
type Result struct {
	// Block is the first blocking filter that matched (nil: none).
	Block *Hit
	// Flags are the flagging filters that matched, once each.
	Flags []Hit
	// Redacted counts the texts that were rewritten.
	Redacted int
	// TooCostly: the text times the cost of the patterns in force
	// exceeded ScanBudget, and the scan stopped before it.
	TooCostly bool
	// Err is the request's context's error when it ended (the client
	// left) and the scan stopped.
	Err error

	ctx        context.Context
	spent      int64 // instructions charged to ScanBudget
	redactedBy *Hit  // the last text's first redaction
}

// Stopped reports whether the scan stopped before its end: a block, a
// scan too costly, or the request's end. The text is not to be used.
func (r *Result) Stopped() bool { return r.Block != nil || r.TooCostly || r.Err != nil }

// charge takes a custom pattern's scan of n bytes from the budget, and
// checks that the request still runs.
func (r *Result) charge(n, cost int) bool {
	if r.ctx != nil {
		if err := r.ctx.Err(); err != nil {
			r.Err = err
			return false
		}
	}
	r.spent += int64(n) * int64(cost)
	if r.spent > ScanBudget {
		r.TooCostly = true
		return false
	}
	return true
}

// WithContext makes a Result whose scans stop when ctx ends.
func WithContext(ctx context.Context) Result { return Result{ctx: ctx} }

func (r *Result) flag(h Hit) {
	for _, f := range r.Flags {
		if f.GuardrailID == h.GuardrailID && f.Label == h.Label && f.Slug == h.Slug {
			return
		}
	}
	r.Flags = append(r.Flags, h)
}

// span is a redaction of text[start:end] by label.
type span struct {
	start, end int
	label      string
}

// Text applies the set to one text; user says whether it is the user's
// (scan_scope user_only). It returns the text with every redaction
// applied; after a block the text is not to be used. Each filter matches
// the text and its folded copy.
func (s Set) Text(text string, user bool, res *Result) string {
	if text == "" {
		return text
	}
	if res.Stopped() {
		return text
	}
	v := view{text: text, ascii: isASCII(text)}
	defer v.release()
	for _, g := range s {
		if g == nil {
			continue
		}
		for i := range g.rules {
			if r := &g.rules[i]; !r.userOnly || user {
				v.want |= r.tok
				v.kinds |= r.number.bit()
			}
		}
	}
	var spans []span
	var first *Hit
	for _, g := range s {
		if g == nil {
			continue
		}
		v.litsOK = [2]bool{}
		for i := range g.rules {
			r := &g.rules[i]
			if r.userOnly && !user {
				continue
			}
			f := v.copy(r.slug != "")
			inText := v.may(g, r, nil)
			inCopy := f != nil && v.may(g, r, f)
			// A custom pattern's scan of the text, and of its copy,
			// comes out of the request's budget.
			if r.re != nil && ((inText && !res.charge(len(text), r.cost)) || (inCopy && !res.charge(len(f.s), r.cost))) {
				return text
			}
			switch r.action {
			case Block, Flag:
				if !(inText && v.matches(r, text, 0)) && !(inCopy && v.matches(r, f.s, 1)) {
					continue
				}
				if r.action == Block {
					if res.Block == nil {
						res.Block = g.hit(r)
					}
					return text
				}
				res.flag(*g.hit(r))
			case Redact:
				n := len(spans)
				if inText {
					spans = v.appendSpans(spans, r, text, 0, nil)
				}
				if inCopy {
					spans = v.appendSpans(spans, r, f.s, 1, f)
				}
				if len(spans) > n && first == nil {
					first = g.hit(r)
				}
			}
		}
	}
	if len(spans) == 0 {
		return text
	}
	res.Redacted++
	res.redactedBy = first
	return redact(text, spans)
}

// view is a text and its folded copies, made when a filter first needs
// them: nil when the copy is the text itself.
type view struct {
	text            string
	ascii           bool
	plain, builtin  *folded
	plainOK, confOK bool
	// The guard's prefilter strings the text (0) and its plain copy (1)
	// hold, found when a filter of the guard first asks.
	lits   [2][litWords]uint64
	litsOK [2]bool
	// What the token builtins in force (want, and the number kinds)
	// find in the text and in its builtins' copy, in one scan of each.
	want, kinds uint8
	toks        [2][]tokHit
	toksOK      [2]bool
}

// tokHit is what a token builtin found.
type tokHit struct {
	start, end int
	det        uint8
	kind       numberKind
}

// may reports whether r's prefilter (of guard g) lets the text (f nil)
// or its plain copy f through.
func (v *view) may(g *Guard, r *rule, f *folded) bool {
	if r.needIDs == nil {
		return true
	}
	if !v.litsOK[0] {
		v.lits[0], v.litsOK[0] = [litWords]uint64{}, true
		g.lits.scan(v.text, v.lits[0][:])
	}
	if f == nil {
		return mayHold(r.needIDs, v.lits[0][:])
	}
	if !v.litsOK[1] {
		v.lits[1], v.litsOK[1] = v.lits[0], true
		g.lits.scanChanges(v.text, f, v.lits[1][:])
	}
	return mayHold(r.needIDs, v.lits[1][:])
}

// copy is the text's folded copy for a custom pattern or (builtin) for a
// builtin; nil when it is the text.
func (v *view) copy(builtin bool) *folded {
	if v.ascii {
		return nil
	}
	if !v.plainOK {
		v.plainOK = true
		f, changed, lookalike := foldText(v.text, false)
		if changed {
			v.plain = &f
		} else {
			f.release()
		}
		if !lookalike {
			// The builtins' copy is the same: not made again.
			v.builtin, v.confOK = v.plain, true
		}
	}
	if !builtin {
		return v.plain
	}
	if !v.confOK {
		v.confOK = true
		if f, changed := fold(v.text, true); changed {
			v.builtin = &f
		} else {
			f.release()
		}
	}
	return v.builtin
}

// hit is what a match of r, one of g's rules, reports; made only when
// one is.
func (g *Guard) hit(r *rule) *Hit {
	return &Hit{GuardrailID: g.ID, GuardrailName: g.Name, Label: r.label, Slug: r.slug, Action: r.action}
}

// release hands back the buffers of the view's copies.
func (v *view) release() {
	if v.builtin != v.plain {
		v.builtin.release()
	}
	v.plain.release()
}

// matches reports whether r matches t: the text (which 0) or its
// builtins' copy (1).
func (v *view) matches(r *rule, t string, which int) bool {
	if r.tok == 0 {
		return r.matches(t)
	}
	for _, h := range v.tokens(t, which) {
		if r.tok&h.det != 0 && h.kind == r.number {
			return true
		}
	}
	return false
}

// appendSpans appends r's matches in t, the text (which 0) or its
// builtins' copy f (1), as spans of the text.
func (v *view) appendSpans(spans []span, r *rule, t string, which int, f *folded) []span {
	if r.tok == 0 {
		return appendMatches(spans, r, t, f)
	}
	for _, h := range v.tokens(t, which) {
		if r.tok&h.det != 0 && h.kind == r.number {
			a, b := h.start, h.end
			if f != nil {
				a, b = f.span(a, b)
			}
			spans = append(spans, span{a, b, r.label})
		}
	}
	return spans
}

// appendMatches is appendSpans for a custom pattern or e-mail, apart:
// its callback's hold on spans would move every call's spans to the heap.
func appendMatches(spans []span, r *rule, t string, f *folded) []span {
	r.each(t, func(a, b int) {
		if f != nil {
			a, b = f.span(a, b)
		}
		spans = append(spans, span{a, b, r.label})
	})
	return spans
}

// tokens is what the token builtins in force find in t, the text (which
// 0) or its builtins' copy (1): one scan of it for all of them. With a
// copy, the copy's list holds what its scan finds where it differs from
// the text's (scanTokenPair): what it leaves out, the text's list has,
// at the same place.
func (v *view) tokens(t string, which int) []tokHit {
	if v.toksOK[which] {
		return v.toks[which]
	}
	if f := v.builtin; v.confOK && f != nil && !v.toksOK[0] && !v.toksOK[1] {
		v.toksOK = [2]bool{true, true}
		scanTokenPair(v.text, f, v.want, v.kinds, func(det uint8, kind numberKind, a, b int) {
			v.toks[0] = append(v.toks[0], tokHit{a, b, det, kind})
		}, func(det uint8, kind numberKind, a, b int) {
			v.toks[1] = append(v.toks[1], tokHit{a, b, det, kind})
		})
		return v.toks[which]
	}
	v.toksOK[which] = true
	scanTokens(t, v.want, v.kinds, func(det uint8, kind numberKind, a, b int) {
		v.toks[which] = append(v.toks[which], tokHit{a, b, det, kind})
	})
	return v.toks[which]
}

func (r *rule) matches(text string) bool {
	if r.re != nil {
		return r.re.MatchString(text)
	}
	found := false
	r.find(text, func(int, int) { found = true })
	return found
}

func (r *rule) each(text string, emit func(a, b int)) {
	if r.re != nil {
		for _, loc := range r.re.FindAllStringIndex(text, -1) {
			if loc[1] > loc[0] {
				emit(loc[0], loc[1])
			}
		}
		return
	}
	r.find(text, emit)
}

// redact replaces the spans (of every filter, possibly overlapping: the
// earliest and then longest wins, and what it covers goes with it; of
// the same span, the first filter's).
func redact(text string, spans []span) string {
	slices.SortStableFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	var b strings.Builder
	b.Grow(len(text))
	at := 0
	for i := 0; i < len(spans); i++ {
		sp := spans[i]
		if sp.start < at {
			continue
		}
		end := sp.end
		// Absorb overlapping spans into this one.
		for i+1 < len(spans) && spans[i+1].start < end {
			i++
			end = max(end, spans[i].end)
		}
		b.WriteString(text[at:sp.start])
		b.WriteString(sp.label)
		at = end
	}
	b.WriteString(text[at:])
	return b.String()
}

// edit replaces body[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// Body applies the set to the text of an inference request body of api
// (Fields). It returns the body with every redaction applied (body
// itself when there is none) and what the filters did; after a block, or
// a scan stopped (Result.Stopped), the body is not to be used. An
// identifier a redaction would rewrite refuses the request instead, as
// that filter's block.
func (s Set) Body(api API, body []byte) ([]byte, Result) {
	return s.BodyContext(context.Background(), api, body)
}

// BodyContext is Body for a request: the scan stops (Result.Err) once
// ctx ends.
func (s Set) BodyContext(ctx context.Context, api API, body []byte) ([]byte, Result) {
	res := WithContext(ctx)
	var edits []edit
	Fields(api, body, func(f *Field) bool {
		if f.Media != "" {
			return true
		}
		v := f.Value
		out := s.Text(v.Str, f.User, &res)
		if !res.Stopped() && f.JSON && strings.IndexByte(out, '\\') >= 0 && gjson.Valid(out) {
			out = s.jsonStrings(out, f.User, &res)
		}
		if res.Stopped() {
			return false
		}
		if out == v.Str {
			return true
		}
		if f.Ident {
			h := *res.redactedBy
			h.Action = Block
			res.Block = &h
			return false
		}
		if v.Index <= 0 || v.Index+len(v.Raw) > len(body) || string(body[v.Index:v.Index+len(v.Raw)]) != v.Raw {
			// The text's place in the body is unknown: refuse rather
			// than send it unredacted.
			res.Block = &Hit{Label: DefaultLabel, Action: Block}
			return false
		}
		edits = append(edits, edit{v.Index, v.Index + len(v.Raw), jsonstr.Append(nil, out)})
		return true
	})
	if res.Stopped() || len(edits) == 0 {
		return body, res
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	out := make([]byte, 0, len(body)+64)
	at := 0
	for _, e := range edits {
		if e.start < at {
			continue
		}
		out = append(out, body[at:e.start]...)
		out = append(out, e.repl...)
		at = e.end
	}
	return append(out, body[at:]...), res
}

// jsonStrings applies the set to the escaped strings of doc (a tool
// call's arguments), as the model reads them, and rewrites those it
// redacts.
func (s Set) jsonStrings(doc string, user bool, res *Result) string {
	var edits []edit
	var walk func(v gjson.Result) bool
	walk = func(v gjson.Result) bool {
		switch {
		case v.Type == gjson.String:
			if strings.IndexByte(v.Raw, '\\') < 0 {
				return true // its text was scanned with the document's
			}
			out := s.Text(v.Str, user, res)
			if res.Stopped() {
				return false
			}
			if out == v.Str {
				return true
			}
			if v.Index < 0 || v.Index+len(v.Raw) > len(doc) || doc[v.Index:v.Index+len(v.Raw)] != v.Raw {
				// Its place is unknown: refuse rather than send it.
				res.Block = &Hit{Label: DefaultLabel, Action: Block}
				return false
			}
			edits = append(edits, edit{v.Index, v.Index + len(v.Raw), jsonstr.Append(nil, out)})
		case v.IsArray() || v.IsObject():
			ok := true
			v.ForEach(func(_, el gjson.Result) bool {
				ok = walk(el)
				return ok
			})
			return ok
		}
		return true
	}
	if !walk(gjson.Parse(doc)) || len(edits) == 0 {
		return doc
	}
	var b strings.Builder
	at := 0
	for _, e := range edits {
		b.WriteString(doc[at:e.start])
		b.Write(e.repl)
		at = e.end
	}
	b.WriteString(doc[at:])
	return b.String()
}
