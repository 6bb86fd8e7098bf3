package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// This module builds the server at the versions the Temporal CLI builds
// it with (Makefile: TEMPORAL_CLI_VERSION), every module they share
// included, so that `make temporal-server` after `make temporal-cli` finds
// the server's packages in Go's build cache instead of compiling them
// again (some 6 minutes on 2 cores). A bump of either must bump both.
func TestTheServerBuildsWithTheCLIsModules(t *testing.T) {
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^TEMPORAL_CLI_VERSION := (\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile names no TEMPORAL_CLI_VERSION")
	}
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/temporalio/cli@"+string(m[1])).Output()
	if err != nil {
		t.Fatalf("go mod download the CLI's go.mod: %v", err)
	}
	var dl struct{ GoMod string }
	if err := json.Unmarshal(out, &dl); err != nil {
		t.Fatal(err)
	}
	cli := requires(t, dl.GoMod)
	ours := requires(t, "go.mod")
	var differ []string
	for path, v := range ours {
		if cv, ok := cli[path]; ok && cv != v {
			differ = append(differ, path+" "+v+" (the CLI: "+cv+")")
		}
	}
	if cli["go.temporal.io/server"] == "" {
		t.Fatalf("the CLI %s builds no go.temporal.io/server", m[1])
	}
	if len(differ) > 0 {
		t.Errorf("%d modules differ from the CLI %s's; `go get` them at its versions:\n%s", len(differ), m[1], strings.Join(differ, "\n"))
	}
}

// requires reads a go.mod's requirements with `go mod edit -json`.
func requires(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := exec.Command("go", "mod", "edit", "-json", path).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", path, err)
	}
	var f struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range f.Require {
		out[r.Path] = r.Version
	}
	return out
}
