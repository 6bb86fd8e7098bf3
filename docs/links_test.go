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

// citation finds a doc section a comment names: `docs/x.md, "Heading"`
// (or README.md), `docs/x.md#anchor`, or `"Heading" in docs/x.md`.
var (
	citeFileHeading = regexp.MustCompile(`((?:docs/[a-z-]+|deploy/README|README)\.md)[,:]? "([^"]{4,80})"`)
	citeHeadingFile = regexp.MustCompile(`"([^"]{4,80})" in (?:the )?((?:docs/[a-z-]+|deploy/README|README)\.md)`)
	citeAnchor      = regexp.MustCompile(`((?:docs/[a-z-]+|deploy/README|README)\.md)#([a-z0-9-]+)`)
	commentMarks    = regexp.MustCompile(`(?m)^\s*(//|#)\s?`)
)

// Go comments, the Makefile and the scripts cite sections of the docs by
// heading or anchor: each cited section exists.
func TestCitedSectionsExist(t *testing.T) {
	root := ".."
	var files []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "var" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, ".go") || strings.HasSuffix(p, ".sh") || d.Name() == "Makefile" {
			files = append(files, p)
		}
		return nil
	}))
	headings := func(doc string) []string {
		body, err := os.ReadFile(filepath.Join(root, doc))
		require.NoError(t, err, "cited %s", doc)
		var ids []string
		for _, h := range heading.FindAllStringSubmatch(string(body), -1) {
			ids = append(ids, anchor(h[1]))
		}
		return ids
	}
	cited := 0
	for _, f := range files {
		if strings.HasSuffix(f, "links_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		// A citation may wrap across comment lines.
		text := strings.Join(strings.Fields(commentMarks.ReplaceAllString(string(b), "")), " ")
		check := func(doc, id string) {
			cited++
			assert.Contains(t, headings(doc), id, "%s cites %s, section %q: no such heading", f, doc, id)
		}
		for _, m := range citeFileHeading.FindAllStringSubmatch(text, -1) {
			check(m[1], anchor(m[2]))
		}
		for _, m := range citeHeadingFile.FindAllStringSubmatch(text, -1) {
			check(m[2], anchor(m[1]))
		}
		for _, m := range citeAnchor.FindAllStringSubmatch(text, -1) {
			check(m[1], m[2])
		}
	}
	assert.Greater(t, cited, 3, "the citations found")
}

func TestCitationsAreFound(t *testing.T) {
	text := `see docs/reliability.md, "Changing workflow code"; (docs/design.md, "The checkpoint rule") ` +
		`"Before the first start" in deploy/README.md and docs/performance.md#the-workers-defaults`
	assert.Len(t, citeFileHeading.FindAllStringSubmatch(text, -1), 2)
	assert.Len(t, citeHeadingFile.FindAllStringSubmatch(text, -1), 1)
	assert.Len(t, citeAnchor.FindAllStringSubmatch(text, -1), 1)
}
