package main

import "fmt"

// binary writes EncodeX and DecodeX.
func (w *writer) binary(r *record) error {
	w.p("// Encode%s appends %s's binary form.", r.codecName, a("*"+r.name))
	w.p("func Encode%s(b []byte, v any) ([]byte, error) {", r.codecName)
	w.p("r := v.(*%s)", r.name)
	if hasTime(r, map[*record]bool{}) {
		w.p("var err error")
	}
	for _, f := range r.fields {
		if err := w.encode("r."+f.goName, f.t); err != nil {
			return fmt.Errorf("%s: %w", f.goName, err)
		}
	}
	if hasTime(r, map[*record]bool{}) {
		w.p("return b, err\n}\n")
	} else {
		w.p("return b, nil\n}\n")
	}

	w.p("// Decode%s reads what Encode%s appends.", r.codecName, r.codecName)
	w.p("func Decode%s(v []byte, r *%s, strs *codec.StrArena) error {", r.codecName, r.name)
	w.p("p := codec.NewBinReader(v, strs)")
	w.p("ok := true")
	for _, f := range r.fields {
		if err := w.decode("r."+f.goName, f.t); err != nil {
			return fmt.Errorf("%s: %w", f.goName, err)
		}
	}
	w.p("return p.Done(ok)\n}\n")
	return nil
}

// hasTime reports whether r's binary form holds a time (whose encoding
// may fail).
func hasTime(r *record, seen map[*record]bool) bool {
	if seen[r] {
		return false
	}
	seen[r] = true
	for _, f := range r.fields {
		for t := f.t; t != nil; t = t.elem {
			if t.kind == kTime || t.kind == kStruct && hasTime(t.st, seen) {
				return true
			}
		}
	}
	return false
}

// encode appends x, of type t.
func (w *writer) encode(x string, t *typ) error {
	switch t.kind {
	case kString:
		w.p("b = codec.AppendBytes(b, %s)", (&typ{name: "string"}).convFrom(t, x))
	case kInt, kAmount:
		w.p("b = binary.AppendVarint(b, int64(%s))", x)
	case kInt64:
		w.p("b = binary.AppendVarint(b, %s)", x)
	case kUint64:
		w.p("b = binary.AppendUvarint(b, %s)", x)
	case kBool:
		w.p("b = codec.AppendBool(b, %s)", x)
	case kFloat:
		w.p("b = binary.LittleEndian.AppendUint64(b, math.Float64bits(%s))", x)
	case kTime:
		w.p("b = codec.AppendBinTime(b, %s, &err)", x)
	case kWindowed:
		w.p("b = codec.AppendBinWindowed(b, %s)", x)
	case kPointer:
		if t.elem.kind == kString && t.elem.name == "string" {
			w.p("b = codec.AppendOptStr(b, %s)", x)
			break
		}
		w.p("b = codec.AppendBool(b, %s != nil)", x)
		w.p("if %s != nil {", x)
		if err := w.encode(deref(x, t.elem), t.elem); err != nil {
			return err
		}
		w.p("}")
	case kSlice:
		e := w.newVar("e")
		w.p("b = codec.AppendBool(b, %s != nil)", x)
		w.p("b = binary.AppendUvarint(b, uint64(len(%s)))", x)
		w.p("for _, %s := range %s {", e, x)
		if err := w.encode(e, t.elem); err != nil {
			return err
		}
		w.p("}")
	case kMap:
		k, e := w.newVar("k"), w.newVar("e")
		w.p("b = binary.AppendUvarint(b, uint64(len(%s)))", x)
		w.p("for %s, %s := range %s {", k, e, x)
		if err := w.encode(k, t.key); err != nil {
			return err
		}
		if err := w.encode(e, t.elem); err != nil {
			return err
		}
		w.p("}")
	case kStruct:
		for _, f := range t.st.fields {
			if err := w.encode(x+"."+f.goName, f.t); err != nil {
				return fmt.Errorf("%s: %w", f.goName, err)
			}
		}
	default:
		return fmt.Errorf("no binary form for %s", t.name)
	}
	return nil
}

// convFrom is x, of type from, converted to t.
func (t *typ) convFrom(from *typ, x string) string {
	if from.name == t.name {
		return x
	}
	return t.name + "(" + x + ")"
}

// decode reads the lvalue x, of type t.
func (w *writer) decode(x string, t *typ) error {
	switch t.kind {
	case kString:
		w.p("%s = %s", x, t.conv("p.Str()"))
	case kInt:
		n := w.newVar("n")
		w.p("%s := p.Varint()", n)
		w.p("%s = int(%s)", x, n)
		w.p("ok = ok && int64(%s) == %s", x, n)
	case kInt64, kAmount:
		w.p("%s = %s", x, t.conv("p.Varint()"))
	case kUint64:
		w.p("%s = p.Uvarint()", x)
	case kBool:
		w.p("%s = p.Bool()", x)
	case kFloat:
		w.p("%s = math.Float64frombits(p.Uint64())", x)
	case kTime:
		w.p("%s = p.Time()", x)
	case kWindowed:
		w.p("%s = p.Windowed()", x)
	case kPointer:
		if t.elem.kind == kString && t.elem.name == "string" {
			w.p("%s = p.OptStr()", x)
			break
		}
		e := w.newVar("e")
		w.p("if p.Bool() {")
		w.p("%s := new(%s)", e, t.elem.name)
		if err := w.decode(deref(e, t.elem), t.elem); err != nil {
			return err
		}
		w.p("%s = %s", x, e)
		w.p("}")
	case kSlice:
		i := w.newVar("i")
		w.p("if p.Bool() {")
		w.p("%s = make(%s, p.Count())", x, t.name)
		w.p("for %s := range %s {", i, x)
		if err := w.decode(x+"["+i+"]", t.elem); err != nil {
			return err
		}
		w.p("}")
		w.p("} else if p.Count() != 0 {")
		w.p("p.Fail()")
		w.p("}")
	case kMap:
		n, k, e := w.newVar("n"), w.newVar("k"), w.newVar("e")
		w.p("if %s := p.Count(); %s > 0 {", n, n)
		w.p("%s = make(%s, %s)", x, t.name, n)
		w.p("for range %s {", n)
		w.p("%s := %s", k, t.key.conv("p.Str()"))
		w.p("%s := new(%s)", e, t.elem.name)
		if err := w.decode(deref(e, t.elem), t.elem); err != nil {
			return err
		}
		w.p("%s[%s] = %s", x, k, e)
		w.p("}")
		w.p("}")
	case kStruct:
		for _, f := range t.st.fields {
			if err := w.decode(x+"."+f.goName, f.t); err != nil {
				return fmt.Errorf("%s: %w", f.goName, err)
			}
		}
	default:
		return fmt.Errorf("no binary form for %s", t.name)
	}
	return nil
}

// deref is what p points to, as an expression of type t: a struct's
// fields are reached through the pointer.
func deref(p string, t *typ) string {
	if t.kind == kStruct {
		return p
	}
	return "*" + p
}
