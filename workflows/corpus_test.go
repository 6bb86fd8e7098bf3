package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// shelves are the replay corpus's folders, one per version of the claim
// workflow: a constant of versions.go, named without its "version" prefix
// in lower case with hyphens (versionDeadLetterFile: dead-letter-file), and
// "default" for runs from before versionClaim was read. Read from the
// source, so a version is named in one place; scripts/record-histories.sh
// names the shelf of versionLatest by the same rule.
func shelves(t *testing.T) map[string]workflow.Version {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "versions.go", nil, 0)
	require.NoError(t, err)
	out := map[string]workflow.Version{"default": workflow.DefaultVersion}
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			rest, ok := strings.CutPrefix(name.Name, "version")
			lit, isInt := spec.Values[i].(*ast.BasicLit)
			if !ok || !isInt || lit.Kind != token.INT {
				continue
			}
			v, err := strconv.Atoi(lit.Value)
			require.NoError(t, err)
			out[shelfName(rest)] = workflow.Version(v)
		}
		return false
	})
	return out
}

// shelfName spells a version constant's name (without "version") as its
// shelf: LocalNotices is local-notices.
func shelfName(constant string) string {
	var b strings.Builder
	for i, r := range constant {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('-')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Every version of versions.go has a shelf name, every folder of the corpus
// is the shelf of a version, and every history on a shelf is of its
// version: its GetVersion marker for versionClaim says so, or, for a run
// that ended at intake before reading the version (an unregistered claim),
// its recording session put it there.
func TestEveryShelfIsAVersionAndHoldsItsOwn(t *testing.T) {
	named := shelves(t)
	has := map[workflow.Version]bool{}
	for _, v := range named {
		has[v] = true
	}
	for v := workflow.Version(versionAgent); v <= versionLatest; v++ {
		assert.True(t, has[v], "version %d is not a constant of versions.go, so it has no shelf", v)
	}
	entries, err := os.ReadDir(corpus)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	for _, e := range entries {
		want, ok := named[e.Name()]
		if !assert.True(t, e.IsDir() && ok, "%s: the corpus holds only shelves named after the versions of versions.go", e.Name()) {
			continue
		}
		files, err := filepath.Glob(filepath.Join(corpus, e.Name(), "*.json"))
		require.NoError(t, err)
		assert.NotEmpty(t, files, "shelf %s is empty: a retired version's shelf goes whole", e.Name())
		for _, file := range files {
			f, err := os.Open(file)
			require.NoError(t, err)
			h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			f.Close()
			require.NoError(t, err, file)
			got, _ := recorded(t, h)
			if workflow.Version(got) == want {
				continue
			}
			assert.True(t, got == int(workflow.DefaultVersion) && onlyIntake(t, h), "%s is a run of version %d on the shelf of version %d (%s)", file, got, want, e.Name())
		}
	}
}

// onlyIntake says whether a run's only step was intake's LoadClaim, local
// or regular.
func onlyIntake(t *testing.T, h *historypb.History) bool {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() != "LoadClaim" {
			return false
		}
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil {
			var data struct{ ActivityType string }
			if m.GetMarkerName() != "LocalActivity" || dc.FromPayloads(m.GetDetails()["data"], &data) != nil || data.ActivityType != "LoadClaim" {
				return false
			}
		}
	}
	return true
}
