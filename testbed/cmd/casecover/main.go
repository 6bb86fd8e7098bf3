// Command casecover adds to a Go coverage profile the case expressions of
// every switch the tests reached, for make mutate (scripts/mutate.sh).
//
// Go's coverage blocks hold a switch's header and each case's body, but not
// the expressions between `case` and its colon. Gremlins tests only the
// mutants inside a covered block, so it reports every mutant of a case
// condition "not covered" and never runs it, though the tests evaluate that
// condition; and many of the guarantees' checks are such cases (a receipt's
// checks, the gate's refusals). casecover marks the case expressions of each
// reached switch as covered, so gremlins mutates them like any other
// condition. A case after one that always matches is counted too: its
// mutants then live, and the report shows them.
//
//	casecover PROFILE      rewrites PROFILE in place; run in the module's root
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: casecover PROFILE")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "casecover:", err)
		os.Exit(1)
	}
}

// block is one line of a profile: file:startLine.startCol,endLine.endCol stmts count.
type block struct {
	sl, sc, el, ec int
	count          int
}

func (b block) holds(p token.Position) bool {
	after := p.Line > b.sl || (p.Line == b.sl && p.Column >= b.sc)
	before := p.Line < b.el || (p.Line == b.el && p.Column <= b.ec)
	return after && before
}

func run(profile string) error {
	data, err := os.ReadFile(profile)
	if err != nil {
		return err
	}
	module, err := modulePath()
	if err != nil {
		return err
	}
	blocks := map[string][]block{}
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") || line == "" {
			continue
		}
		name, rest, ok := strings.Cut(line, ":")
		var b block
		var stmts int
		if !ok {
			return fmt.Errorf("profile line %q", line)
		}
		if _, err := fmt.Sscanf(rest, "%d.%d,%d.%d %d %d", &b.sl, &b.sc, &b.el, &b.ec, &stmts, &b.count); err != nil {
			return fmt.Errorf("profile line %q: %w", line, err)
		}
		if _, seen := blocks[name]; !seen {
			files = append(files, name)
		}
		blocks[name] = append(blocks[name], b)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	var added bytes.Buffer
	for _, name := range files {
		rel, ok := strings.CutPrefix(name, module+"/")
		if !ok {
			continue
		}
		cases, err := reachedCases(filepath.FromSlash(rel), blocks[name])
		if err != nil {
			return err
		}
		for _, c := range cases {
			fmt.Fprintf(&added, "%s:%d.%d,%d.%d 1 1\n", name, c[0].Line, c[0].Column, c[1].Line, c[1].Column)
		}
	}
	if added.Len() == 0 {
		return nil
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	return os.WriteFile(profile, append(data, added.Bytes()...), 0o644)
}

// reachedCases is, for each expression switch in path whose header a
// covered block holds, the span from each `case` keyword to its colon.
func reachedCases(path string, blocks []block) ([][2]token.Position, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	reached := func(p token.Pos) bool {
		pos := fset.Position(p)
		for _, b := range blocks {
			if b.count > 0 && b.holds(pos) {
				return true
			}
		}
		return false
	}
	var spans [][2]token.Position
	ast.Inspect(f, func(n ast.Node) bool {
		sw, ok := n.(*ast.SwitchStmt)
		if !ok || !reached(sw.Switch) {
			return true
		}
		for _, s := range sw.Body.List {
			if cc, ok := s.(*ast.CaseClause); ok && len(cc.List) > 0 {
				spans = append(spans, [2]token.Position{fset.Position(cc.Case), fset.Position(cc.Colon)})
			}
		}
		return true
	})
	return spans, nil
}

// modulePath is the module line of ./go.mod: profiles name files by import path.
func modulePath() (string, error) {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	return "", fmt.Errorf("go.mod names no module")
}
