package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The case expressions of a switch the tests reached become covered
// blocks; those of a switch they never reached do not.
func TestCaseExpressionsOfAReachedSwitchAreCovered(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.WriteFile("go.mod", []byte("module example.com/m\n\ngo 1.26\n"), 0o644))
	require.NoError(t, os.MkdirAll("p", 0o755))
	src := `package p

func Reached(n int) string {
	switch {
	case n < 0:
		return "negative"
	case n > 10 && n < 20:
		return "teens"
	}
	return "other"
}

func NotReached(n int) bool {
	switch {
	case n == 1:
		return true
	}
	return false
}
`
	require.NoError(t, os.WriteFile(filepath.Join("p", "p.go"), []byte(src), 0o644))
	profile := "mode: set\n" +
		"example.com/m/p/p.go:3.28,4.9 1 1\n" +
		"example.com/m/p/p.go:5.13,6.20 1 0\n" +
		"example.com/m/p/p.go:7.24,8.17 1 1\n" +
		"example.com/m/p/p.go:10.2,10.16 1 0\n" +
		"example.com/m/p/p.go:13.28,14.9 1 0\n" +
		"example.com/m/p/p.go:15.14,16.14 1 0\n" +
		"example.com/m/p/p.go:18.2,18.14 1 0\n"
	require.NoError(t, os.WriteFile("cover.out", []byte(profile), 0o644))

	require.NoError(t, run("cover.out"))
	out, err := os.ReadFile("cover.out")
	require.NoError(t, err)
	added := strings.TrimPrefix(string(out), profile)
	assert.Equal(t, "example.com/m/p/p.go:5.2,5.12 1 1\nexample.com/m/p/p.go:7.2,7.23 1 1\n", added)
}
