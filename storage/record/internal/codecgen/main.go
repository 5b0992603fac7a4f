// Command codecgen writes the stored records' codecs from their struct
// declarations, so that a field is added to a record in one place: its
// struct (the field, its type and its json tag). It reads the package's
// Go files (not the file it writes) and, for each struct type whose doc
// comment holds a directive
//
//	//codec:binary json=AccountJSON fast sums=AccountID,Cost name=MgmtKey
//
// writes the codecs named:
//
//   - binary: EncodeX and DecodeX, the records' snapshot form: each
//     field in declaration order (json:"-" ones left out), strings
//     length-prefixed, integers as varints, a float as its 8 bytes, times
//     as time.Time's binary form, a pointer as a presence byte and its
//     value, a slice as a presence byte, a count and its elements, a map
//     as a count and its entries (in no order).
//   - json=T: T's AppendJSON, which writes what encoding/json writes for
//     the record's tags. When T is not the record type itself, a time
//     encoding/json refuses is left to encoding/json (for its error); the
//     record type's own AppendJSON writes every time as it is.
//   - fast: FastX, which reads the exact form AppendJSON or encoding/json
//     writes (member order, no white space, strings without escapes or
//     non-ASCII bytes) and reports false at the first byte it does not
//     expect. A map or a pointer to a struct it leaves to the caller's
//     slower path: the record must not have that member.
//   - gjson: decodeXMember, the reader of one member of any JSON form
//     of the record, from gjson's view of it, as encoding/json reads it
//     (the slower path, for what FastX declines).
//   - sums=F,G: readXSums, the fast reader of the fields named, which
//     passes over the others' members without keeping them.
//   - name=N: the codecs are named after N rather than X.
//
// Run by go generate in the package; a test fails when its output is
// stale.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"log"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("o", "codecs_gen.go", "the file to write, in the package's directory")
	flag.Parse()
	src, err := generate(".", *out)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

// kind is how a type is written and read.
type kind int

const (
	kString   kind = iota // string or a named string type
	kInt                  // int: read back only if it fits
	kInt64                // int64
	kUint64               // uint64
	kAmount               // money.Amount
	kBool                 // bool
	kFloat                // float64
	kTime                 // time.Time
	kWindowed             // money.Windowed
	kCounters             // money.UsageCounters
	kPointer              // *elem
	kSlice                // []elem
	kMap                  // map[key]*elem
	kStruct               // a struct of the package
)

// typ is a field's type as the codecs see it.
type typ struct {
	kind kind
	name string // the Go type as written: "string", "AccountKind", "money.Interval", "ConnectApp"
	elem *typ   // of a pointer, slice or map
	key  *typ   // of a map
	st   *record
}

// conv is s converted to the named type t, when t is not the basic one.
func (t *typ) conv(s string) string {
	switch t.name {
	case "string", "int64", "uint64", "bool", "float64":
		return s
	}
	return t.name + "(" + s + ")"
}

type field struct {
	goName    string
	jsonName  string
	omitempty bool
	t         *typ
}

type record struct {
	name   string
	fields []field // without json:"-" ones
	all    int     // every field, json:"-" ones included

	directive bool
	codecName string
	binary    bool
	jsonType  string
	fast      bool
	gjson     bool
	sums      []string
}

type gen struct {
	records map[string]*record
	strs    map[string]bool // named string types of the package
	order   []*record       // with a directive, in source order
}

func generate(dir, out string) ([]byte, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	g := &gen{records: map[string]*record{}, strs: map[string]bool{}}
	type decl struct {
		spec *ast.TypeSpec
		doc  *ast.CommentGroup
	}
	var structs []decl
	var pkg string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") || filepath.Base(name) == filepath.Base(out) {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		pkg = f.Name.Name
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(gd.Specs) == 1 {
					doc = gd.Doc
				}
				switch x := ts.Type.(type) {
				case *ast.StructType:
					structs = append(structs, decl{ts, doc})
					g.records[ts.Name.Name] = &record{name: ts.Name.Name}
				case *ast.Ident:
					if x.Name == "string" {
						g.strs[ts.Name.Name] = true
					}
				}
			}
		}
	}
	sort.SliceStable(structs, func(i, j int) bool { return structs[i].spec.Pos() < structs[j].spec.Pos() })
	for _, d := range structs {
		r := g.records[d.spec.Name.Name]
		if err := g.parseStruct(r, d.spec.Type.(*ast.StructType)); err != nil {
			return nil, fmt.Errorf("%s: %w", r.name, err)
		}
		if d.doc != nil {
			for _, c := range d.doc.List {
				if rest, ok := strings.CutPrefix(c.Text, "//codec:"); ok {
					if err := r.parseDirective(rest); err != nil {
						return nil, fmt.Errorf("%s: %w", r.name, err)
					}
				}
			}
		}
		if r.directive {
			g.order = append(g.order, r)
		}
	}
	// In the order of their names, whichever file declares them.
	sort.SliceStable(g.order, func(i, j int) bool { return g.order[i].name < g.order[j].name })

	var body bytes.Buffer
	for _, r := range g.order {
		w := &writer{buf: &body}
		if r.binary {
			if err := w.binary(r); err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
		}
		if r.jsonType != "" {
			if err := w.json(r); err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
		}
		if r.fast {
			if err := w.fast(r); err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
		}
		if r.gjson {
			if err := w.gjson(r); err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
		}
		if r.sums != nil {
			if err := w.sums(r); err != nil {
				return nil, fmt.Errorf("%s: %w", r.name, err)
			}
		}
	}
	var src bytes.Buffer
	src.WriteString("// Code generated by go run ./internal/codecgen; DO NOT EDIT.\n\n")
	fmt.Fprintf(&src, "package %s\n\nimport (\n", pkg)
	var groups []string
	for _, group := range [][]struct{ use, path string }{
		{{"binary.", "encoding/binary"}, {"json.Unmarshal", "encoding/json"}, {"math.", "math"},
			{"strconv.", "strconv"}, {"time.Time", "time"}},
		{{"gjson.", "github.com/tidwall/gjson"}},
		{{"jsonstr.", "github.com/tollgate-dev/caddy-tollgate/jsonstr"},
			{"money.", "github.com/tollgate-dev/caddy-tollgate/money"},
			{"codec.", "github.com/tollgate-dev/caddy-tollgate/storage/codec"}},
	} {
		var g []string
		for _, imp := range group {
			// A package is imported when the code (not a comment) uses it.
			if bytes.Contains(code(body.Bytes()), []byte(imp.use)) {
				g = append(g, strconv.Quote(imp.path))
			}
		}
		if len(g) > 0 {
			groups = append(groups, strings.Join(g, "\n"))
		}
	}
	src.WriteString(strings.Join(groups, "\n\n") + "\n")
	src.WriteString(")\n")
	src.Write(body.Bytes())
	res, err := format.Source(src.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, src.Bytes())
	}
	return res, nil
}

func (r *record) parseDirective(s string) error {
	r.directive = true
	r.codecName = r.name
	for _, opt := range strings.Fields(s) {
		k, v, _ := strings.Cut(opt, "=")
		switch k {
		case "binary":
			r.binary = true
		case "json":
			if v == "" {
				return fmt.Errorf("json= names the type whose AppendJSON is written")
			}
			r.jsonType = v
		case "fast":
			r.fast = true
		case "gjson":
			r.gjson = true
		case "sums":
			r.sums = strings.Split(v, ",")
		case "name":
			r.codecName = v
		default:
			return fmt.Errorf("unknown codec option %q", opt)
		}
	}
	return nil
}

func (g *gen) parseStruct(r *record, st *ast.StructType) error {
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			r.all++
			if !n.IsExported() {
				continue
			}
			tag := ""
			if f.Tag != nil {
				tag, _ = strconv.Unquote(f.Tag.Value)
			}
			js := reflect.StructTag(tag).Get("json")
			if js == "-" {
				continue
			}
			name, opts, _ := strings.Cut(js, ",")
			if name == "" {
				name = n.Name
			}
			t, err := g.typeOf(f.Type)
			if err != nil {
				return fmt.Errorf("%s: %w", n.Name, err)
			}
			r.fields = append(r.fields, field{goName: n.Name, jsonName: name, omitempty: slices.Contains(strings.Split(opts, ","), "omitempty"), t: t})
		}
	}
	return nil
}

func (g *gen) typeOf(e ast.Expr) (*typ, error) {
	switch x := e.(type) {
	case *ast.Ident:
		switch x.Name {
		case "string":
			return &typ{kind: kString, name: "string"}, nil
		case "int":
			return &typ{kind: kInt, name: "int"}, nil
		case "int64":
			return &typ{kind: kInt64, name: "int64"}, nil
		case "uint64":
			return &typ{kind: kUint64, name: "uint64"}, nil
		case "bool":
			return &typ{kind: kBool, name: "bool"}, nil
		case "float64":
			return &typ{kind: kFloat, name: "float64"}, nil
		}
		if g.strs[x.Name] {
			return &typ{kind: kString, name: x.Name}, nil
		}
		if r, ok := g.records[x.Name]; ok {
			return &typ{kind: kStruct, name: x.Name, st: r}, nil
		}
	case *ast.SelectorExpr:
		switch name := fmt.Sprintf("%s.%s", x.X, x.Sel.Name); name {
		case "time.Time":
			return &typ{kind: kTime, name: name}, nil
		case "money.Amount":
			return &typ{kind: kAmount, name: name}, nil
		case "money.Interval":
			return &typ{kind: kString, name: name}, nil
		case "money.Windowed":
			return &typ{kind: kWindowed, name: name}, nil
		case "money.UsageCounters":
			return &typ{kind: kCounters, name: name}, nil
		}
	case *ast.StarExpr:
		el, err := g.typeOf(x.X)
		if err != nil {
			return nil, err
		}
		return &typ{kind: kPointer, name: "*" + el.name, elem: el}, nil
	case *ast.ArrayType:
		if x.Len != nil {
			break
		}
		el, err := g.typeOf(x.Elt)
		if err != nil {
			return nil, err
		}
		return &typ{kind: kSlice, name: "[]" + el.name, elem: el}, nil
	case *ast.MapType:
		k, err := g.typeOf(x.Key)
		if err != nil {
			return nil, err
		}
		el, err := g.typeOf(x.Value)
		if err != nil {
			return nil, err
		}
		if k.kind != kString || el.kind != kPointer || el.elem.kind != kStruct {
			break
		}
		return &typ{kind: kMap, name: "map[" + k.name + "]" + el.name, key: k, elem: el.elem}, nil
	}
	return nil, fmt.Errorf("no codec knows the type %T %v: teach codecgen's typeOf and its writers it", e, e)
}

// writer writes Go statements, merging the literal bytes appended in a
// row into one append.
type writer struct {
	buf     *bytes.Buffer
	lit     string // JSON text not yet appended
	vars    int
	scratch []string // a reader's scratch variables
}

func (w *writer) p(format string, args ...any) {
	w.flush()
	fmt.Fprintf(w.buf, format+"\n", args...)
}

func (w *writer) flush() {
	if w.lit == "" {
		return
	}
	l := w.lit
	w.lit = ""
	if len(l) == 1 {
		fmt.Fprintf(w.buf, "b = append(b, %s)\n", strconv.QuoteRune(rune(l[0])))
		return
	}
	fmt.Fprintf(w.buf, "b = append(b, %s...)\n", quote(l))
}

// quote is s as a Go string literal, raw when it can be.
func quote(s string) string {
	if !strings.ContainsAny(s, "`\n\r") {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

func (w *writer) newVar(prefix string) string {
	w.vars++
	return fmt.Sprintf("%s%d", prefix, w.vars)
}

// a is name with its indefinite article.
func a(name string) string {
	if strings.ContainsRune("AEIOU", rune(strings.TrimPrefix(name, "*")[0])) {
		return "an " + name
	}
	return "a " + name
}

// code is src without its comments' lines.
func code(src []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(src, []byte("\n")) {
		if t := bytes.TrimSpace(line); !bytes.HasPrefix(t, []byte("//")) {
			if i := bytes.Index(line, []byte(" // ")); i >= 0 {
				line = line[:i]
			}
			out = append(append(out, line...), '\n')
		}
	}
	return out
}
