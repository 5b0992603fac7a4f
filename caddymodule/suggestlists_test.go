package caddymodule

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSuggestionListsNameEveryOption keeps the option lists that unknown
// options are matched against in step with the parsers: every option a
// switch accepts must be in the list its default case suggests from, or a
// typo of a newer option would get no "did you mean".
func TestSuggestionListsNameEveryOption(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	files = append(files, filepath.Join("..", "handlers", "tollgatecaddyfile.go"))
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	vars := map[string][]string{} // package-level []string literals by name
	for _, f := range parsed {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if lit, ok := v.(*ast.CompositeLit); ok {
						vars[vs.Names[i].Name] = stringLits(lit.Elts)
					}
				}
			}
		}
	}
	checked := 0
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			sw, ok := n.(*ast.SwitchStmt)
			if !ok {
				return true
			}
			var known []string
			var accepted []string
			found := false
			for _, st := range sw.Body.List {
				cc := st.(*ast.CaseClause)
				if cc.List != nil {
					accepted = append(accepted, stringLits(cc.List)...)
					continue
				}
				for _, s := range cc.Body {
					ast.Inspect(s, func(n ast.Node) bool {
						if _, nested := n.(*ast.SwitchStmt); nested {
							return false
						}
						call, ok := n.(*ast.CallExpr)
						if !ok || len(call.Args) != 3 {
							return true
						}
						sel, ok := call.Fun.(*ast.SelectorExpr)
						if !ok || sel.Sel.Name != "UnknownOption" {
							return true
						}
						found = true
						switch list := call.Args[2].(type) {
						case *ast.CompositeLit:
							known = stringLits(list.Elts)
						case *ast.Ident:
							known = vars[list.Name]
						case *ast.SelectorExpr:
							known = vars[list.Sel.Name]
						}
						return false
					})
				}
			}
			if !found {
				return true
			}
			checked++
			for _, name := range accepted {
				if !slices.Contains(known, name) {
					t.Errorf("%s: option %q is accepted but missing from the list its unknown options are matched against", fset.Position(sw.Pos()), name)
				}
			}
			return true
		})
	}
	if checked < 8 {
		t.Fatalf("checked %d option switches; the parsers have more: has the suggestion call changed?", checked)
	}
}

// stringLits are the string literals among exprs.
func stringLits(exprs []ast.Expr) []string {
	var out []string
	for _, e := range exprs {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				out = append(out, s)
			}
		}
	}
	return out
}
