package main

import (
	"bytes"
	"fmt"
	"slices"
)

// fast writes FastX, the reader of every field.
func (w *writer) fast(r *record) error {
	w.p("// Fast%s reads %s in the form AppendJSON or encoding/json", r.codecName, a(r.name))
	w.p("// writes, false at the first byte it does not expect.")
	w.p("func Fast%s(p *codec.Parser, r *%s) bool {", r.codecName, r.name)
	return w.reader(r, func(field) bool { return true })
}

// sums writes readXSums, the reader of the fields r.sums names, which
// passes over the others.
func (w *writer) sums(r *record) error {
	for _, name := range r.sums {
		if !slices.ContainsFunc(r.fields, func(f field) bool { return f.goName == name }) {
			return fmt.Errorf("sums: no field %s", name)
		}
	}
	w.p("// read%sSums reads the fields of %s that its sums need, in", r.codecName, a(r.name))
	w.p("// the form AppendJSON writes, passing over the others' members;")
	w.p("// false at the first byte it does not expect.")
	w.p("func read%sSums(p *codec.Parser, r *%s) bool {", r.codecName, r.name)
	return w.reader(r, func(f field) bool { return slices.Contains(r.sums, f.goName) })
}

// reader writes the body of a reader of r: its scratch variables, then
// its members.
func (w *writer) reader(r *record, keep func(field) bool) error {
	body := &writer{buf: new(bytes.Buffer), vars: w.vars}
	body.p("ok := true")
	if err := body.readObject("r", r, keep); err != nil {
		return fmt.Errorf("%s: %w", r.name, err)
	}
	body.p("return ok\n}\n")
	w.vars = body.vars
	for _, s := range body.scratch {
		w.p("%s", s)
	}
	w.flush()
	w.buf.Write(body.buf.Bytes())
	return nil
}

func (w *writer) readObject(x string, r *record, keep func(field) bool) error {
	for i, f := range r.fields {
		member := `,"` + f.jsonName + `":`
		if i == 0 {
			member = `{"` + f.jsonName + `":`
		}
		if err := w.readField(x+"."+f.goName, member, f, keep(f)); err != nil {
			return fmt.Errorf("%s: %w", f.goName, err)
		}
	}
	w.p("ok = ok && p.Lit(`}`)")
	return nil
}

func (w *writer) readField(v, member string, f field, kept bool) error {
	t := f.t
	_, omit := nonEmpty(v, f)
	switch {
	case t.kind == kBool && omit:
		if kept {
			w.p("%s = ok && p.Lit(%s)", v, quote(member+"true"))
		} else {
			w.p("if ok {")
			w.p("p.Lit(%s) // not kept", quote(member+"true"))
			w.p("}")
		}
	case t.kind == kMap || t.kind == kPointer && t.elem.kind == kStruct:
		if !omit {
			return fmt.Errorf("no fast reader for %s", t.name)
		}
		// Left to the slower path: the member must be absent.
	case t.kind == kSlice && t.elem.kind == kStruct:
		if !omit {
			return fmt.Errorf("no fast reader for %s without omitempty", t.name)
		}
		first := w.newVar("first")
		w.p("if ok && p.Lit(%s) {", quote(member+"["))
		w.p("for %s := true; ok && !p.Lit(`]`); %s = false {", first, first)
		e := "_"
		if kept {
			e = w.newVar("e")
			w.p("var %s %s", e, t.elem.name)
		}
		w.p("ok = %s || p.Lit(`,`)", first)
		if err := w.readObject(e, t.elem.st, func(field) bool { return kept }); err != nil {
			return err
		}
		if kept {
			w.p("%s = append(%s, %s)", v, v, e)
		}
		w.p("}")
		w.p("}")
	default:
		pre, expr, post, err := w.readExpr(v, t, kept)
		if err != nil {
			return err
		}
		if pre != "" {
			w.p("%s", pre)
		}
		if omit {
			w.p("ok = ok && (!p.Lit(%s) || %s)", quote(member), expr)
		} else {
			w.p("ok = ok && p.Lit(%s) && %s", quote(member), expr)
		}
		if post != "" {
			w.p("%s", post)
		}
	}
	return nil
}

// readExpr reads v, of type t, in expr (true when it read one), with a
// statement before and after it; a value not kept goes to a scratch
// variable.
func (w *writer) readExpr(v string, t *typ, kept bool) (pre, expr, post string, err error) {
	if !kept {
		switch t.kind {
		case kString:
			return "", "p.SkipStr()", "", nil
		case kInt, kInt64:
			return "", "p.Int(&" + w.scratchVar("skipInt", "int64") + ")", "", nil
		case kUint64:
			return "", "p.Uint(&" + w.scratchVar("skipUint", "uint64") + ")", "", nil
		case kAmount:
			return "", "p.Amount(&" + w.scratchVar("skipAmount", "money.Amount") + ")", "", nil
		case kBool:
			return "", "p.Bool(&" + w.scratchVar("skipBool", "bool") + ")", "", nil
		case kFloat:
			return "", "p.Float(&" + w.scratchVar("skipFloat", "float64") + ")", "", nil
		case kTime:
			return "", "p.Time(&" + w.scratchVar("skipTime", "time.Time") + ")", "", nil
		}
		return "", "", "", fmt.Errorf("no reader passes over %s", t.name)
	}
	switch t.kind {
	case kString:
		if t.name == "string" {
			return "", "p.Str(&" + v + ")", "", nil
		}
		s := w.newVar("s")
		return "var " + s + " string", "p.Str(&" + s + ")", v + " = " + t.conv(s), nil
	case kInt:
		n := w.newVar("n")
		return "var " + n + " int64", "p.Int(&" + n + ") && " + n + " == int64(int(" + n + "))", v + " = int(" + n + ")", nil
	case kInt64:
		return "", "p.Int(&" + v + ")", "", nil
	case kUint64:
		return "", "p.Uint(&" + v + ")", "", nil
	case kAmount:
		return "", "p.Amount(&" + v + ")", "", nil
	case kBool:
		return "", "p.Bool(&" + v + ")", "", nil
	case kFloat:
		return "", "p.Float(&" + v + ")", "", nil
	case kTime:
		return "", "p.Time(&" + v + ")", "", nil
	case kWindowed:
		return "", "p.Windowed(&" + v + ")", "", nil
	case kCounters:
		return "", "p.Counters(&" + v + ")", "", nil
	case kPointer:
		switch t.elem.name {
		case "string":
			return "", "p.NullableStr(&" + v + ")", "", nil
		case "time.Time":
			return "", "p.NullableTime(&" + v + ")", "", nil
		case "money.Amount":
			return "", "p.NullableAmount(&" + v + ")", "", nil
		}
	case kSlice:
		switch t.elem.name {
		case "string":
			return "", "p.Strs(&" + v + ")", "", nil
		case "int64":
			return "", "p.Ints(&" + v + ")", "", nil
		}
	}
	return "", "", "", fmt.Errorf("no fast reader for %s", t.name)
}

// scratchVar declares, once per reader, a variable for values read and
// not kept.
func (w *writer) scratchVar(name, typ string) string {
	decl := "var " + name + " " + typ
	if !slices.Contains(w.scratch, decl) {
		w.scratch = append(w.scratch, decl)
	}
	return name
}
