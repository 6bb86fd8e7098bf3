// Package deptest pins the layering (tailscale's tstest/deptest, in spirit):
// a package imports only its own layer or those below it, and nothing of
// the product imports the test rig under testbed/.
package deptest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/durableclaims/durableclaims"

// layer is a package's place, lowest first; a package may import its own
// layer and those below. The domain (internal/) is the floor; the mains are
// the top of the product; the rig (testbed/) and the end-to-end tests stand
// above it all and may use anything.
func layer(pkg string) (int, string) {
	p := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	switch {
	case p == "whatif", p == "story":
		return 5, "the readers of recorded runs (story tells a run, whatif replays claims under the workflow's rules)"
	case strings.HasPrefix(p, "internal/"), p == "deploy/httpcheck":
		return 0, "the domain (internal/)"
	case p == "model":
		return 1, "model"
	case p == "approvals":
		return 2, "approvals"
	case p == "activities":
		return 3, "activities"
	case p == "workflows":
		return 4, "workflows"
	case p == "worker" || strings.HasPrefix(p, "worker/"), p == "starter", p == "claimsctl", p == "inbox", p == "codecserver":
		return 6, "the product's programs"
	case strings.HasPrefix(p, "testbed/"), p == "e2e", p == "deploy", p == "docs", p == "examples":
		return 7, "the rig and the tests (testbed/, e2e/, deploy/, docs/, examples/)"
	}
	return -1, "unplaced"
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func packages(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	require.NoError(t, err, "go list")
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		require.NoError(t, dec.Decode(&p))
		pkgs = append(pkgs, p)
	}
	require.Greater(t, len(pkgs), 20)
	return pkgs
}

func TestLayersImportOnlyDownward(t *testing.T) {
	for _, p := range packages(t) {
		from, fromName := layer(p.ImportPath)
		if !assert.GreaterOrEqual(t, from, 0, "%s has no place in the layering: add it to layer()", p.ImportPath) {
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to, toName := layer(imp)
			assert.LessOrEqual(t, to, from, "%s (%s) imports %s (%s): a layer imports only its own and those below",
				p.ImportPath, fromName, imp, toName)
		}
	}
}

// The product's packages, with everything they import, reach nothing of
// the rig: no simulator, bench or test server ships in a worker.
func TestTheProductImportsNothingOfTheRig(t *testing.T) {
	for _, p := range packages(t) {
		if l, _ := layer(p.ImportPath); l >= 7 {
			continue
		}
		for _, dep := range p.Deps {
			assert.False(t, strings.HasPrefix(dep, module+"/testbed/"), "%s depends on %s, of the test rig", p.ImportPath, dep)
		}
	}
}

// A letter is words from facts: internal/letters stands on the standard
// library and internal/claim (its money and field errors), and through it
// internal/statute (itself on the standard library alone, below), nothing
// else, so no store, model or SDK can reach what a claimant is sent.
func TestLettersStandOnTheClaimAlone(t *testing.T) {
	for _, p := range packages(t) {
		if p.ImportPath != module+"/internal/letters" {
			continue
		}
		for _, dep := range p.Deps {
			first, _, _ := strings.Cut(dep, "/")
			standard := !strings.Contains(first, ".")
			assert.True(t, standard || dep == module+"/internal/claim" || dep == module+"/internal/statute",
				"internal/letters depends on %s", dep)
		}
		return
	}
	t.Fatal("internal/letters is not in the module")
}

// The statutory arithmetic is the floor under the domain: internal/claim
// and everything above may import it, and it stands on the standard
// library alone, so what a workflow computes deadlines with cannot reach
// I/O or another package's state.
func TestStatuteStandsOnTheStandardLibraryAlone(t *testing.T) {
	found := false
	for _, p := range packages(t) {
		if p.ImportPath != module+"/internal/statute" {
			continue
		}
		found = true
		for _, dep := range p.Deps {
			first, _, _ := strings.Cut(dep, "/")
			assert.NotContains(t, first, ".", "internal/statute depends on %s, outside the standard library", dep)
		}
	}
	assert.True(t, found, "internal/statute is listed")
}
