package main

import "fmt"

// gjson writes decodeXMember, which decodes one member of a record's JSON
// in any form, as encoding/json decodes it into the field its name
// matches exactly; a name encoding/json might match to a field
// case-insensitively is codec.ErrCaseFold, for the caller to leave the
// record to encoding/json.
func (w *writer) gjson(r *record) error {
	w.p("// decode%sMember decodes the member name of %s's JSON, as", r.codecName, a(r.name))
	w.p("// encoding/json would, from a gjson view of the record: strings it keeps")
	w.p("// are copies.")
	w.p("func decode%sMember(name string, x gjson.Result, r *%s) (err error) {", r.codecName, r.name)
	w.p("switch name {")
	for _, f := range r.fields {
		w.p("case %q:", f.jsonName)
		if err := w.gjsonValue("r."+f.goName, f.t); err != nil {
			return fmt.Errorf("%s: %w", f.goName, err)
		}
	}
	w.p("default:")
	w.p("// Any other member is not the record's (encoding/json ignores")
	w.p("// it), unless it names a field in another case.")
	w.p("if !codec.IsASCIILower(name) {")
	w.p("err = codec.ErrCaseFold")
	w.p("}")
	w.p("}")
	w.p("return err\n}\n")
	return nil
}

// gjsonValue decodes x into v, of type t, setting err.
func (w *writer) gjsonValue(v string, t *typ) error {
	switch t.kind {
	case kString:
		if t.name == "string" {
			w.p("err = codec.DecodeString(x, &%s)", v)
			break
		}
		s := w.newVar("s")
		w.p("var %s string", s)
		w.p("if err = codec.DecodeString(x, &%s); err == nil && x.Type != gjson.Null {", s)
		w.p("%s = %s", v, t.conv(s))
		w.p("}")
	case kBool:
		w.p("err = codec.DecodeBool(x, &%s)", v)
	case kUint64:
		w.p("if x.Type != gjson.Null {")
		w.p("%s, err = strconv.ParseUint(x.Raw, 10, 64)", v)
		w.p("}")
	case kTime:
		w.p("err = %s.UnmarshalJSON(codec.RawBytes(x))", v)
	case kCounters:
		w.p("err = codec.DecodeCounters(x, &%s)", v)
	case kPointer:
		switch {
		case t.elem.name == "string":
			w.p("err = codec.DecodeNullableString(x, &%s)", v)
			return nil
		case t.elem.kind == kAmount, t.elem.kind == kTime, t.elem.kind == kStruct:
		default:
			return fmt.Errorf("no gjson reader for %s", t.name)
		}
		e := w.newVar("e")
		w.p("%s = nil", v)
		w.p("if x.Type != gjson.Null {")
		w.p("var %s %s", e, t.elem.name)
		switch t.elem.kind {
		case kAmount:
			w.p("err = codec.DecodeAmount(x, &%s)", e)
		case kTime:
			w.p("err = %s.UnmarshalJSON(codec.RawBytes(x))", e)
		case kStruct:
			w.p("// Rare: encoding/json copies its strings.")
			w.p("err = json.Unmarshal([]byte(x.Raw), &%s)", e)
		}
		w.p("if err == nil {")
		w.p("%s = &%s", v, e)
		w.p("}")
		w.p("}")
	default:
		return fmt.Errorf("no gjson reader for %s", t.name)
	}
	return nil
}
