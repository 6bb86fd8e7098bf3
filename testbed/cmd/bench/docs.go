package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"
)

// The bench regenerates the sections of a Markdown file (-docs, e.g.
// docs/performance.md) that hold its tables: each between
// "<!-- bench:NAME -->" and "<!-- /bench:NAME -->", replaced by what this
// run measured, with the run's date, command and yardstick. A section the
// run did not measure is left as it was.

// docSections are the sections a run can write: their names and what
// fills them (nothing when the run did not measure it).
func (r *results) docSections() map[string]string {
	out := map[string]string{}
	var b bytes.Buffer
	r.printFloor(&b)
	r.printWhere(&b)
	if b.Len() > 0 {
		out["floor"] = r.caption() + b.String()
	}
	return out
}

// caption says which run a section is from.
func (r *results) caption() string {
	when := r.Date
	if t, err := time.Parse(time.RFC3339, r.Date); err == nil {
		when = t.UTC().Format("2006-01-02 15:04 UTC")
	}
	return fmt.Sprintf("\n*Written by `bin/bench %s` (%s, %s, yardstick %.1f → %.1f ms).*\n",
		strings.Join(r.Flags, " "), when, r.Machine, r.Values["machine_speed_start_ms"], r.Values["machine_speed_end_ms"])
}

// writeDocs replaces the sections of the file at path this run measured;
// it refuses a file whose markers do not pair up.
func (r *results) writeDocs(path string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(doc)
	for name, body := range r.docSections() {
		open, end := "<!-- bench:"+name+" -->", "<!-- /bench:"+name+" -->"
		i, j := strings.Index(text, open), strings.Index(text, end)
		if i < 0 || j < i || strings.Count(text, open) != 1 || strings.Count(text, end) != 1 {
			return fmt.Errorf("%s: want one %q before one %q", path, open, end)
		}
		text = text[:i+len(open)] + "\n" + strings.TrimSpace(body) + "\n" + text[j:]
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
