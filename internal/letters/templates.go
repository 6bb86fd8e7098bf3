package letters

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strconv"
	"text/template"
)

// The letters' wording lives in these files: one per kind (its headline
// and body) and the parts they share (subject line, opening, grounds,
// rights, signature). Changing any of them changes Version.
//
//go:embed templates
var embedded embed.FS

// Version names the wording every letter is rendered from: the first 16
// hex digits of a SHA-256 over every embedded template, name and bytes, in
// name order. A letter carries it, so the claim file says which wording a
// claimant was sent.
var Version string

// sets holds one parsed template set per kind: the shared parts and the
// kind's own file, which defines "headline" and "body".
var sets map[Kind]*template.Template

func init() {
	var err error
	if Version, err = versionOf(embedded); err != nil {
		panic(err) // the embedded files are read at build time: cannot fail
	}
	if sets, err = parse(embedded); err != nil {
		panic(err) // a template that does not parse is caught by the tests
	}
}

// shared are the parts every kind's letter may use.
var shared = []string{"subject", "opening", "grounds", "rights", "signature"}

// parse builds each kind's template set from templates/ in fsys.
func parse(fsys fs.FS) (map[Kind]*template.Template, error) {
	out := make(map[Kind]*template.Template, len(Kinds))
	for _, k := range Kinds {
		files := make([]string, 0, len(shared)+1)
		for _, name := range shared {
			files = append(files, "templates/"+name+".tmpl")
		}
		files = append(files, "templates/"+string(k)+".tmpl")
		t, err := template.New(string(k)).Option("missingkey=error").ParseFS(fsys, files...)
		if err != nil {
			return nil, fmt.Errorf("letters: %s templates: %w", k, err)
		}
		for _, name := range []string{"subject", "headline", "body"} {
			if t.Lookup(name) == nil {
				return nil, fmt.Errorf("letters: %s templates define no %q", k, name)
			}
		}
		out[k] = t
	}
	return out, nil
}

// versionOf digests every file in fsys, in the lexical order fs.WalkDir
// visits them, each as its name, its length and its bytes, so no two sets
// of files share a digest by moving bytes from one file to the next.
func versionOf(fsys fs.FS) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		h.Write([]byte(name + "\x00" + strconv.Itoa(len(b)) + "\x00"))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("letters: template version: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
