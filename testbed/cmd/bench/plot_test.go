package main

import (
	"encoding/xml"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wellFormedSVG fails the test unless file is well-formed XML whose root
// element is svg.
func wellFormedSVG(t *testing.T, file string) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	d := xml.NewDecoder(f)
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s is not well-formed XML", file)
		if s, ok := tok.(xml.StartElement); ok && root == "" {
			root = s.Name.Local
		}
	}
	assert.Equal(t, "svg", root, file)
}

// copyFixture puts bench/testdata/results.json in a temporary directory
// as latest.json and returns its path.
func copyFixture(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("testdata", "results.json"))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "latest.json")
	require.NoError(t, os.WriteFile(file, b, 0o644))
	return file
}

// Every panel is drawn next to the JSON, and all of them in one picture.
func TestPlotDrawsEveryPanelFromTheJSON(t *testing.T) {
	file := copyFixture(t)
	files, err := redraw(file)
	require.NoError(t, err)
	dir := filepath.Dir(file)
	want := []string{"latest-throughput.svg", "latest-latency.svg", "latest-model.svg", "latest-recovery.svg", "latest-cost.svg", "latest.svg"}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	assert.Equal(t, want, got)
	for _, name := range want {
		wellFormedSVG(t, filepath.Join(dir, name))
	}
	all, err := os.ReadFile(filepath.Join(dir, "latest.svg"))
	require.NoError(t, err)
	for _, text := range []string{"Throughput", "baseline median, 12.0/s", "Approve signal", "Real model latency", "claim completion, start to paid", "Recovery after", "Cost per claim",
		"fixture: example layout, not a measurement", "bin/bench -n 100"} {
		assert.Contains(t, string(all), text)
	}
	assert.NotContains(t, string(all), "/usr/local/bin/temporal", "paths are not settings")
	assert.Contains(t, string(all), "'Liberation Sans',Arial", "a sans-serif fallback")
}

// A run that measured only some workloads draws only their panels, and the
// panels an older run left next to the JSON go: no picture outlives its
// numbers.
func TestPlotDrawsOnlyWhatRan(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "latest.json")
	stale := filepath.Join(dir, "latest-latency.svg")
	require.NoError(t, os.WriteFile(stale, []byte("<svg/>"), 0o644))
	require.NoError(t, os.WriteFile(file, []byte(`{"date":"2000-01-01T00:00:00Z","options":{},
		"samples":{"ceiling_per_s":[30,40],"scaling_cluster_2w_per_s":[20]},"values":{}}`), 0o644))
	files, err := redraw(file)
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "latest-throughput.svg"), filepath.Join(dir, "latest.svg")}, files)
	wellFormedSVG(t, files[0])
	_, err = os.Stat(stale)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "the stale latency picture is removed")

	require.NoError(t, os.WriteFile(file, []byte(`{"date":"x","samples":{}}`), 0o644))
	_, err = redraw(file)
	assert.ErrorContains(t, err, "no workload")
}

// The flags that change what was measured are in the caption; paths are not.
func TestRunLabel(t *testing.T) {
	l := runLabel(&results{Date: "2026-11-30T08:29:14Z", Machine: "2 cores",
		Flags: []string{"-worker", "bin/worker", "-temporal=/x/temporal", "-only", "ceiling,history", "-json", "var/bench/latest.json"}})
	assert.Equal(t, "run of 2026-11-30 08:29 UTC, bin/bench -only ceiling,history; 2 cores", l)
	assert.True(t, strings.HasSuffix(runLabel(&results{Date: "d"}), "(default flags); "))
}
