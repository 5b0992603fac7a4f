package main

import (
	"fmt"
	"strings"
)

// json writes the AppendJSON of r.jsonType, a conversion of r.
func (w *writer) json(r *record) error {
	w.p("// AppendJSON appends %s's JSON: what encoding/json writes for its", a(r.name))
	w.p("// fields' tags.")
	w.p("func (r %s) AppendJSON(b []byte) ([]byte, error) {", r.jsonType)
	if r.jsonType != r.name {
		var refused []string
		for _, f := range r.fields {
			switch {
			case f.t.kind == kTime:
				refused = append(refused, fmt.Sprintf("!codec.EncodableTime(r.%s)", f.goName))
			case f.t.kind == kPointer && f.t.elem.kind == kTime:
				refused = append(refused, fmt.Sprintf("r.%s != nil && !codec.EncodableTime(*r.%s)", f.goName, f.goName))
			case f.t.kind == kStruct && hasTime(f.t.st, map[*record]bool{}) ||
				f.t.elem != nil && f.t.elem.kind == kStruct && hasTime(f.t.elem.st, map[*record]bool{}):
				return fmt.Errorf("%s: a time inside a field's struct is not checked for encoding/json's refusal", f.goName)
			}
		}
		if len(refused) > 0 {
			w.p("if %s {", strings.Join(refused, " || "))
			w.p("return codec.AppendMarshaled(b, %s(r)) // encoding/json's own error", r.name)
			w.p("}")
		}
	}
	if err := w.object("r", r); err != nil {
		return err
	}
	w.p("return b, nil\n}\n")
	return nil
}

// object appends the JSON object of x, a struct of fields r's.
func (w *writer) object(x string, r *record) error {
	for i, f := range r.fields {
		if strings.ContainsAny(f.jsonName, "\"\\<>&") {
			return fmt.Errorf("%s: the member name %q needs escaping", f.goName, f.jsonName)
		}
		member := `,"` + f.jsonName + `":`
		if i == 0 {
			if f.omitempty {
				return fmt.Errorf("%s: the first member is always written", f.goName)
			}
			member = `{"` + f.jsonName + `":`
		}
		v := x + "." + f.goName
		if cond, ok := nonEmpty(v, f); ok {
			if f.t.kind == kBool {
				w.p("if %s {", v)
				w.lit += member + "true"
				w.p("}")
				continue
			}
			w.p("if %s {", cond)
			w.lit += member
			var err error
			switch t := f.t; t.kind {
			case kPointer:
				err = w.value(deref(v, t.elem), t.elem)
			case kSlice:
				err = w.array(v, w.newVar("i"), w.newVar("e"), t)
			default:
				err = w.value(v, t)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", f.goName, err)
			}
			w.p("}")
			continue
		}
		w.lit += member
		if err := w.value(v, f.t); err != nil {
			return fmt.Errorf("%s: %w", f.goName, err)
		}
	}
	w.lit += "}"
	return nil
}

// nonEmpty is the condition under which an omitempty field is written
// (encoding/json's: a struct, a time among them, always is).
func nonEmpty(v string, f field) (string, bool) {
	if !f.omitempty {
		return "", false
	}
	switch f.t.kind {
	case kString:
		return v + ` != ""`, true
	case kInt, kInt64, kUint64, kAmount, kFloat:
		return v + " != 0", true
	case kBool:
		return v, true
	case kPointer:
		return v + " != nil", true
	case kSlice, kMap:
		return "len(" + v + ") > 0", true
	}
	return "", false
}

// value appends the JSON of x, of type t.
func (w *writer) value(x string, t *typ) error {
	switch t.kind {
	case kString:
		w.p("b = jsonstr.Append(b, %s)", (&typ{name: "string"}).convFrom(t, x))
	case kInt:
		w.p("b = strconv.AppendInt(b, int64(%s), 10)", x)
	case kInt64:
		w.p("b = strconv.AppendInt(b, %s, 10)", x)
	case kUint64:
		w.p("b = strconv.AppendUint(b, %s, 10)", x)
	case kAmount:
		w.p("b = %s.Append(b)", paren(x))
	case kBool:
		w.p("b = strconv.AppendBool(b, %s)", x)
	case kTime:
		w.p("b = codec.AppendTime(b, %s)", x)
	case kWindowed:
		w.p("b = codec.AppendWindowed(b, %s)", x)
	case kCounters:
		w.p("b = codec.AppendCounters(b, %s)", x)
	case kPointer:
		if t.elem.kind == kString && t.elem.name == "string" {
			w.p("b = codec.AppendNullableString(b, %s)", x)
			break
		}
		w.p("if %s == nil {", x)
		w.lit += "null"
		w.p("} else {")
		if err := w.value(deref(x, t.elem), t.elem); err != nil {
			return err
		}
		w.p("}")
	case kSlice:
		i, e := w.newVar("i"), w.newVar("e")
		w.p("if %s == nil {", x)
		w.lit += "null"
		w.p("} else {")
		if err := w.array(x, i, e, t); err != nil {
			return err
		}
		w.p("}")
	case kStruct:
		return w.object(x, t.st)
	default:
		return fmt.Errorf("no JSON writer for %s", t.name)
	}
	return nil
}

func (w *writer) array(x, i, e string, t *typ) error {
	w.lit += "["
	w.p("for %s, %s := range %s {", i, e, x)
	w.p("if %s > 0 {", i)
	w.lit += ","
	w.p("}")
	if err := w.value(e, t.elem); err != nil {
		return err
	}
	w.p("}")
	w.lit += "]"
	return nil
}

// paren is x, parenthesized when it is a dereference.
func paren(x string) string {
	if strings.HasPrefix(x, "*") {
		return "(" + x + ")"
	}
	return x
}
