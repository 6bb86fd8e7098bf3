// Package docs holds the project's documentation; its test checks that
// every relative link in the README and the docs resolves, anchors too.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading  = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	notInIDs = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchor is GitHub's: lower case, punctuation dropped, spaces to hyphens.
func anchor(title string) string {
	return strings.ReplaceAll(notInIDs.ReplaceAllString(strings.ToLower(strings.TrimSpace(title)), ""), " ", "-")
}

func TestLinksResolve(t *testing.T) {
	files, err := filepath.Glob("*.md")
	require.NoError(t, err)
	files = append(files, "../README.md", "../deploy/README.md")
	require.Greater(t, len(files), 5)
	for _, f := range files {
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(link, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), path)
			}
			body, err := os.ReadFile(target)
			if !assert.NoError(t, err, "%s links to %s", f, link) || frag == "" {
				continue
			}
			var ids []string
			for _, h := range heading.FindAllStringSubmatch(string(body), -1) {
				ids = append(ids, anchor(h[1]))
			}
			assert.Contains(t, ids, frag, "%s links to %s: no such heading", f, link)
		}
	}
}
