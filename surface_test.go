package gaffer_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// hidden are the import paths whose types no exported identifier of a
// public package may mention: the module's internal packages (the store
// above all) and the raw etcd client. A library user could not name such
// a type, and every one that leaks ties the public API to an internal
// detail.
func hidden(path string) bool {
	return strings.HasPrefix(path, "github.com/gafferhq/gaffer/internal/") ||
		strings.HasPrefix(path, "go.etcd.io/etcd/client/")
}

// TestPublicAPIHidesInternals parses every public package and fails on
// each exported function, method, field, type or variable whose type
// mentions a hidden package.
func TestPublicAPIHidesInternals(t *testing.T) {
	t.Parallel()
	var leaks []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		switch base := d.Name(); {
		case path != "." && (strings.HasPrefix(base, ".") || base == "internal" || base == "cmd" || base == "testdata" || base == "node_modules" || base == "clients"):
			return filepath.SkipDir
		}
		leaks = append(leaks, surfaceLeaks(t, path)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(leaks)
	for _, l := range leaks {
		t.Error(l)
	}
}

func surfaceLeaks(t *testing.T, dir string) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pkg := range pkgs {
		if pkg.Name == "main" {
			continue
		}
		for name, f := range pkg.Files {
			bad := map[string]string{} // local import name -> path
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if !hidden(p) {
					continue
				}
				local := p[strings.LastIndex(p, "/")+1:]
				if imp.Name != nil {
					local = imp.Name.Name
				}
				bad[local] = p
			}
			if len(bad) == 0 {
				continue
			}
			report := func(what string, expr ast.Node) {
				if expr == nil {
					return
				}
				ast.Inspect(expr, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && bad[id.Name] != "" {
							out = append(out, fmt.Sprintf("%s: %s mentions %s.%s", fset.Position(sel.Pos()), what, bad[id.Name], sel.Sel.Name))
						}
					}
					return true
				})
			}
			_ = name
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || (d.Recv != nil && !exportedRecv(d.Recv)) {
						continue
					}
					report("func "+d.Name.Name, d.Type)
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() {
								reportType(s.Name.Name, s.Type, report)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								// Only a declared type: a value such as
								// ErrNotLeader = service.ErrNotLeader is
								// an error, whatever package made it.
								if n.IsExported() {
									report("var "+n.Name, s.Type)
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// reportType reports what an exported type shows: a struct's exported
// fields, an interface's methods, anything else whole.
func reportType(name string, typ ast.Expr, report func(string, ast.Node)) {
	switch tt := typ.(type) {
	case *ast.StructType:
		for _, f := range tt.Fields.List {
			exported := len(f.Names) == 0 // embedded: promoted
			for _, n := range f.Names {
				exported = exported || n.IsExported()
			}
			if exported {
				report("type "+name+" field", f.Type)
			}
		}
	case *ast.InterfaceType:
		report("type "+name, tt)
	default:
		report("type "+name, typ)
	}
}

func exportedRecv(recv *ast.FieldList) bool {
	if len(recv.List) == 0 {
		return false
	}
	t := recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return false
		}
	}
}
