// Package lint holds checks of how the product's code reads, run as tests.
package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxFuncLines is the longest a product function may be, from its func
// line to its closing brace: past it, a function is split into named steps
// that read top-down.
const maxFuncLines = 100

// longFuncs are the product functions allowed over maxFuncLines, at most
// the length given. The list only shrinks: an entry whose function grew
// fails, and so does one whose function is now short enough or gone (take
// the entry out).
var longFuncs = map[string]int{}

// The product is everything but the test rig (testbed/), the end-to-end
// tests (e2e/) and the tests themselves.
func TestNoProductFunctionIsOverAHundredLines(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	lengths := funcLengths(t, root)
	require.NotEmpty(t, lengths, "no product function found under %s", root)
	long := map[string]int{}
	for name, n := range lengths {
		if n > maxFuncLines {
			long[name] = n
		}
	}
	for name, n := range long {
		allowed, ok := longFuncs[name]
		switch {
		case !ok:
			t.Errorf("%s is %d lines, over %d: split it into named steps", name, n, maxFuncLines)
		case n > allowed:
			t.Errorf("%s grew to %d lines (allowed %d, over %d only until it is split)", name, n, allowed, maxFuncLines)
		}
	}
	for name, allowed := range longFuncs {
		if _, ok := long[name]; !ok {
			t.Errorf("%s is no longer over %d lines (or gone): take it out of longFuncs (was %d)", name, maxFuncLines, allowed)
		}
	}
}

// The measure counts what a reader sees: from the func keyword (not the
// doc comment) to the closing brace.
func TestFuncLengthsCountFromFuncToBrace(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\n// f is short.\nfunc f() {\n\tprintln()\n}\n\ntype T struct{}\n\nfunc (t *T) m() {}\n"
	require.NoError(t, writeFile(filepath.Join(dir, "p.go"), src))
	require.NoError(t, writeFile(filepath.Join(dir, "p_test.go"), "package p\n\nfunc g() {\n}\n"))
	assert.Equal(t, map[string]int{"p.go f": 3, "p.go T.m": 1}, funcLengths(t, dir))
}

// funcLengths measures every function and method declared in the product's
// Go files under root, by "path name" (methods "path Type.name").
func funcLengths(t *testing.T, root string) map[string]int {
	t.Helper()
	lengths := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok {
				lengths[rel+" "+funcName(fd)] = fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			}
		}
		return nil
	})
	require.NoError(t, err)
	return lengths
}

// skipDir leaves out the rig, the end-to-end tests, test data, and what
// is not source (hidden folders, node_modules, build output).
func skipDir(rel, name string) bool {
	switch {
	case rel == "testbed", rel == "e2e", rel == "var", rel == "bin":
		return true
	case name == "testdata", name == "node_modules", strings.HasPrefix(name, "."):
		return true
	}
	return false
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok { // a generic type's method
		typ = idx.X
	}
	if idx, ok := typ.(*ast.IndexListExpr); ok {
		typ = idx.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fmt.Sprintf("(%T).%s", typ, fd.Name.Name)
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }
