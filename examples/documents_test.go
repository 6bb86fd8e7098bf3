// Package examples holds the demo's claims and the documents they name:
// real photos (JPEG) and real one-page PDFs, made by the generator below
// (go test ./examples -run TestDemoDocuments -update writes them) and
// checked here, so the inbox shows a picture and a document, not a broken
// image and "Failed to load PDF document".
package examples

import (
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "write the documents under examples/docs")

// photos are the demo's pictures: a scene drawn in a few shapes, each
// pixel a function of where it is, so the file is the same every time.
var photos = map[string]func(x, y int) color.RGBA{
	// A kitchen floor under water: floorboards, two cabinets, a sheet of
	// water with ripples.
	"kitchen.jpg": func(x, y int) color.RGBA {
		switch {
		case y < 50 && (x > 10 && x < 70 || x > 90 && x < 150):
			return color.RGBA{R: 200, G: 190, B: 170, A: 255} // cabinets
		case y < 50:
			return color.RGBA{R: 235, G: 232, B: 220, A: 255} // wall
		case y > 70 && (x+2*y)%23 < 9:
			return color.RGBA{R: 70, G: 120, B: 190, A: 255} // ripples
		case y > 70:
			return color.RGBA{R: 95, G: 145, B: 205, A: 255} // water
		case x%20 == 0:
			return color.RGBA{R: 90, G: 60, B: 35, A: 255} // a board's edge
		}
		return color.RGBA{R: 150, G: 105, B: 60, A: 255} // floorboards
	},
	// A study after a fire: soot rising up a wall, a charred desk.
	"study.jpg": func(x, y int) color.RGBA {
		switch {
		case y > 80 && x > 30 && x < 130:
			return color.RGBA{R: 45, G: 35, B: 30, A: 255} // the desk
		case y > 100:
			return color.RGBA{R: 110, G: 95, B: 80, A: 255} // floor
		}
		grey := uint8(min(220, 60+y+abs(x-80)/2)) // darkest above the desk, where the smoke rose
		return color.RGBA{R: grey, G: grey, B: grey + 5, A: 255}
	},
}

const photoW, photoH = 160, 120

// papers are the demo's PDFs: a title and a few lines on one A4 page.
var papers = map[string][]string{
	"plumber-invoice.pdf": {"Invoice 2026-118 - Reliable Plumbing Ltd.", "Emergency call-out: burst pipe under the kitchen sink",
		"Pipe section and fittings replaced", "Floorboards and two cabinets: replacement quoted separately", "Total: 1,840.00 USD"},
	"fire-report.pdf": {"Fire brigade incident report", "Electrical fire in the study, contained to one room",
		"Cause: a faulty extension lead", "Smoke damage to desk, chair and curtains"},
	"police-report.pdf": {"Police report - burglary", "Entry forced through the back door overnight",
		"Reported stolen: one bicycle, one laptop", "Crime reference 2026/4471"},
	"quote.pdf": {"Windshield replacement quote", "Cracked windshield, stone strike on the motorway",
		"Glass, seal and fitting", "Total: 640.00 USD"},
}

func abs(n int) int { return max(n, -n) }

// photo draws one of photos as a JPEG.
func photo(draw func(x, y int) color.RGBA) ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, photoW, photoH))
	for y := range photoH {
		for x := range photoW {
			img.SetRGBA(x, y, draw(x, y))
		}
	}
	var b bytes.Buffer
	err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 80})
	return b.Bytes(), err
}

// pdf writes a one-page PDF 1.4 of lines (the first as a title) in
// Helvetica, with a cross-reference table whose offsets are the objects'.
func pdf(lines []string) []byte {
	esc := strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`)
	var content strings.Builder
	fmt.Fprintf(&content, "BT /F1 18 Tf 72 770 Td (%s) Tj ET\n", esc.Replace(lines[0]))
	content.WriteString("0.5 w 72 758 m 523 758 l S\n")
	content.WriteString("BT /F1 11 Tf 72 730 Td 16 TL\n")
	for _, l := range lines[1:] {
		fmt.Fprintf(&content, "(%s) Tj T*\n", esc.Replace(l))
	}
	content.WriteString("ET\n")
	objects := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%sendstream", content.Len(), content.String()),
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n") // the binary comment: tools treat the file as binary
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, xref)
	return b.Bytes()
}

// checkPDF is what a PDF reader needs to open the file: the header, a
// startxref that points at the cross-reference table, each entry of it at
// its object, the content stream as long as it says, and one page.
func checkPDF(t *testing.T, name string, b []byte) {
	t.Helper()
	require.True(t, bytes.HasPrefix(b, []byte("%PDF-1.")), "%s: a PDF header", name)
	require.True(t, bytes.HasSuffix(bytes.TrimRight(b, "\r\n"), []byte("%%EOF")), "%s: ends with %%%%EOF", name)
	m := regexp.MustCompile(`startxref\s+(\d+)\s+%%EOF\s*$`).FindSubmatch(b)
	require.NotNil(t, m, "%s: startxref", name)
	xref, _ := strconv.Atoi(string(m[1]))
	require.True(t, bytes.HasPrefix(b[xref:], []byte("xref\n")), "%s: startxref %d points at the xref table", name, xref)
	table := regexp.MustCompile(`^xref\n0 (\d+)\n`).FindSubmatch(b[xref:])
	require.NotNil(t, table, "%s: the xref table's subsection", name)
	n, _ := strconv.Atoi(string(table[1]))
	entries := b[xref+len(table[0]):]
	for i := 1; i < n; i++ {
		e := string(entries[i*20 : i*20+20]) // each entry is 20 bytes
		off, err := strconv.Atoi(e[:10])
		require.NoError(t, err, "%s: xref entry %d %q", name, i, e)
		assert.True(t, bytes.HasPrefix(b[off:], fmt.Appendf(nil, "%d 0 obj", i)), "%s: xref entry %d points at its object", name, i)
	}
	stream := regexp.MustCompile(`(?s)<< /Length (\d+) >>\nstream\n(.*?)endstream`).FindSubmatch(b)
	require.NotNil(t, stream, "%s: a content stream", name)
	length, _ := strconv.Atoi(string(stream[1]))
	assert.Equal(t, length, len(stream[2]), "%s: the stream is as long as it says", name)
	assert.Equal(t, 1, bytes.Count(b, []byte("/Type /Page ")), "%s: one page", name)
}

// Each document the demo's claims name is a real file of its kind: the
// photos decode as JPEGs, the PDFs open; the generator makes them so.
func TestDemoDocuments(t *testing.T) {
	files := map[string][]byte{}
	for name, draw := range photos {
		b, err := photo(draw)
		require.NoError(t, err)
		files[name] = b
	}
	for name, lines := range papers {
		files[name] = pdf(lines)
	}
	if *update {
		for name, b := range files {
			require.NoError(t, os.WriteFile(filepath.Join("docs", name), b, 0o644))
		}
	}
	for name, generated := range files {
		shipped, err := os.ReadFile(filepath.Join("docs", name))
		require.NoError(t, err)
		for what, b := range map[string][]byte{"generated": generated, "shipped": shipped} {
			switch filepath.Ext(name) {
			case ".jpg":
				img, err := jpeg.Decode(bytes.NewReader(b))
				require.NoError(t, err, "%s %s: a JPEG", what, name)
				assert.Equal(t, image.Rect(0, 0, photoW, photoH), img.Bounds(), "%s %s", what, name)
			case ".pdf":
				checkPDF(t, what+" "+name, b)
			}
		}
	}
	// Every document a demo claim names is one of them.
	claims, err := filepath.Glob(filepath.Join("claims", "*.json"))
	require.NoError(t, err)
	claims = append(claims, "claim-small.json")
	for _, c := range claims {
		b, err := os.ReadFile(c)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(`"path": *"[^"]*/([^"/]+)"`).FindAllSubmatch(b, -1) {
			assert.Contains(t, files, string(m[1]), "%s names %s", c, m[1])
		}
	}
}
