package storage

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The domain stores ask each other through the small interfaces each
// declares (Store's "Who locks"): none holds another store itself, so
// none can read another's maps or call a method that is not in its
// interface.
func TestDomainStoresHoldNoOtherStore(t *testing.T) {
	fset := token.NewFileSet()
	stores := map[string]*ast.StructType{}
	// This package's stores and those kept in packages of their own.
	for _, dir := range []string{".", "byok", "destinations", "endpoints", "endusers"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if ts, ok := n.(*ast.TypeSpec); ok && strings.HasSuffix(ts.Name.Name, "Store") && ts.Name.Name != "Store" {
					if st, ok := ts.Type.(*ast.StructType); ok {
						stores[ts.Name.Name] = st
					}
				}
				return true
			})
		}
	}
	if len(stores) < 9 {
		t.Fatalf("found %d domain stores, want the 9 built-in ones at least", len(stores))
	}
	for name, st := range stores {
		for _, field := range st.Fields.List {
			typ := field.Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if sel, ok := typ.(*ast.SelectorExpr); ok {
				typ = sel.Sel
			}
			if id, ok := typ.(*ast.Ident); ok && id.Name != name && stores[id.Name] != nil {
				t.Errorf("%s holds the %s (%s): ask it through an interface %s declares", name, id.Name, fset.Position(field.Pos()), name)
			}
		}
	}
}
