package processor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// Bounds on the size of the package's types: a type that outgrows them
// owns more than one thing and is split, not grown (docs/architecture.md).
const (
	maxTypeFields  = 15
	maxTypeMethods = 30
)

// TestTypeSizes counts the fields and methods of every type declared in
// the package's own (non-test) files.
func TestTypeSizes(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	fields, methods := map[string]int{}, map[string]int{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.GenDecl:
					for _, s := range d.Specs {
						ts, ok := s.(*ast.TypeSpec)
						if !ok {
							continue
						}
						if st, ok := ts.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								fields[ts.Name.Name] += max(1, len(fl.Names))
							}
						}
					}
				case *ast.FuncDecl:
					if d.Recv == nil || len(d.Recv.List) == 0 {
						continue
					}
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						methods[id.Name]++
					}
				}
			}
		}
	}
	if len(fields) < 10 {
		t.Fatalf("only %d struct types found: the count reads the wrong files", len(fields))
	}
	for name, n := range fields {
		if n > maxTypeFields {
			t.Errorf("type %s has %d fields, more than %d", name, n, maxTypeFields)
		}
	}
	for name, n := range methods {
		if n > maxTypeMethods {
			t.Errorf("type %s has %d methods, more than %d", name, n, maxTypeMethods)
		}
	}
	t.Logf("exchange: %d fields, %d methods", fields["exchange"], methods["exchange"])
}
