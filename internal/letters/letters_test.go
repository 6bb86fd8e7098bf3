package letters

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from today's templates")

// facts are a claim's facts as the workflow would hand them over for a
// letter of kind k: enough for that kind, nothing free-form.
func facts(k Kind) Facts {
	f := Facts{
		ClaimID: "claim-0042", ClaimantName: "Ada Lovelace", PolicyID: "pol-2002",
		Jurisdiction: "US-CA", JurisdictionName: "California",
		NoticeAt: time.Date(2026, 3, 2, 15, 4, 5, 0, time.UTC),
		Date:     time.Date(2026, 3, 6, 9, 0, 0, 0, time.UTC),
		Currency: "usd", ClaimedMinor: 184000,
		Cite: []string{"Cal. Ins. Code § 790.03(h)", "Cal. Code Regs. tit. 10, § 2695.7"},
	}
	decision := func() {
		f.Date = time.Date(2026, 4, 10, 9, 0, 0, 0, time.UTC)
		f.Regulator = "the California Department of Insurance, Consumer Communications Bureau, 300 South Spring Street, South Tower, Los Angeles, CA 90013; telephone 1-800-927-4357"
		f.Appeal = "write to Claims Appeals within 60 days of the date of this letter, quoting your claim number, and say why you disagree"
	}
	switch k {
	case Acknowledgment:
		f.DecideBy = time.Date(2026, 4, 16, 0, 0, 0, 0, time.UTC)
	case Status:
		f.Date = time.Date(2026, 4, 15, 9, 0, 0, 0, time.UTC)
		f.MoreTimeBecause = []string{"we are waiting for the contractor's repair estimate you told us you would send", "the damage must be inspected by an adjuster"}
		f.DecideBy = time.Date(2026, 5, 15, 0, 0, 0, 0, time.UTC)
	case Approval:
		decision()
		f.ApprovedMinor = 159000
		f.Provisions = []string{"Policy pol-2002: deductible 250.00 USD"}
	case Partial:
		decision()
		f.ApprovedMinor = 90000
		f.Reasons = []string{"The replacement of the kitchen cabinets is wear and tear, not sudden water damage."}
		f.Provisions = []string{"Policy pol-2002: deductible 250.00 USD", "Policy pol-2002: excluded category wear-and-tear"}
	case Denial:
		decision()
		f.Reasons = []string{"The damage is to the roof, which the policy does not cover."}
		f.Provisions = []string{"Policy pol-2002: excluded category roof"}
		f.Automated, f.ReviewWindowDays = true, 30
	}
	return f
}

func TestEachKindSaysWhatMatters(t *testing.T) {
	rights := []string{"Your rights", "you may appeal to us: write to Claims Appeals within 60 days",
		"reviewed by the California Department of Insurance", "1-800-927-4357."}
	common := []string{"Dear Ada Lovelace,", "Claim claim-0042, policy pol-2002", "Claims department",
		"Sent under the law of California (US-CA): Cal. Ins. Code § 790.03(h); Cal. Code Regs. tit. 10, § 2695.7."}
	cases := []struct {
		kind    Kind
		subject string
		says    []string
		never   []string
	}{
		{Acknowledgment, "Your claim claim-0042: we have received it",
			[]string{"6 March 2026", "We received your claim on 2 March 2026, for 1840.00 USD.", "We will decide your claim by 16 April 2026."},
			[]string{"Your rights", "appeal", "automated"}},
		{Status, "Your claim claim-0042: we need more time",
			[]string{"15 April 2026", "We need more time, because:",
				"  - we are waiting for the contractor's repair estimate you told us you would send\n  - the damage must be inspected by an adjuster\n",
				"We expect to decide your claim by 15 May 2026."},
			[]string{"Your rights", "appeal", "automated"}},
		{Approval, "Your claim claim-0042: approved",
			append([]string{"10 April 2026", "We have approved your claim for 1840.00 USD, received on 2 March 2026. We will pay you 1590.00 USD.",
				"  - Policy pol-2002: deductible 250.00 USD"}, rights...),
			[]string{"automated", "Our reasons"}},
		{Partial, "Your claim claim-0042: partly approved",
			append([]string{"You claimed 1840.00 USD. We have approved 900.00 USD of it", "cannot pay the remaining 940.00 USD",
				"Our reasons:\n  - The replacement of the kitchen cabinets is wear and tear",
				"The provisions of your policy we relied on:\n  - Policy pol-2002: deductible 250.00 USD\n  - Policy pol-2002: excluded category wear-and-tear\n"}, rights...),
			[]string{"automated"}},
		{Denial, "Your claim claim-0042: declined",
			append([]string{"We have decided your claim for 1840.00 USD, received on 2 March 2026, and we are sorry to tell you that we cannot pay it.",
				"Our reasons:\n  - The damage is to the roof, which the policy does not cover.",
				"The provisions of your policy we relied on:\n  - Policy pol-2002: excluded category roof",
				"This decision was made by our automated system", "review it within 30 days of the date of this letter",
				"quoting your claim number, claim-0042."}, rights...),
			nil},
	}
	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			l, err := Render(c.kind, facts(c.kind))
			require.NoError(t, err)
			assert.Equal(t, c.kind, l.Kind)
			assert.Equal(t, Version, l.Version)
			assert.Equal(t, c.subject, l.Subject)
			for _, s := range append(c.says, common...) {
				assert.Contains(t, l.Body, s)
			}
			for _, s := range c.never {
				assert.NotContains(t, l.Body, s)
			}
			sum := sha256.Sum256([]byte(l.Subject + "\n\n" + l.Body))
			assert.Equal(t, hex.EncodeToString(sum[:]), l.SHA256)
			assert.True(t, strings.HasSuffix(l.Body, "\n") && !strings.HasSuffix(l.Body, "\n\n"), "one final newline")
			assert.NotContains(t, l.Body, "\n\n\n")
			assert.NotContains(t, l.Body, "<no value>")
		})
	}
}

// The review sentence is on a decision letter exactly when the decision
// was automated; before a decision there is nothing to review.
func TestReviewSentenceOnlyOnAutomatedDecisions(t *testing.T) {
	const sentence = "You may ask for a person to review it within 14 days"
	for _, k := range Kinds {
		for _, automated := range []bool{false, true} {
			f := facts(k)
			f.Automated, f.ReviewWindowDays = automated, 14
			l, err := Render(k, f)
			require.NoError(t, err, "%s automated=%v", k, automated)
			if automated && k.decides() {
				assert.Contains(t, l.Body, sentence, "%s automated", k)
			} else {
				assert.NotContains(t, l.Body, sentence, "%s automated=%v", k, automated)
				assert.NotContains(t, l.Body, "automated system", "%s automated=%v", k, automated)
			}
		}
	}
}

// No DecideBy, no promise of a date; a status letter still says it will
// keep writing.
func TestNoDecideByNoDate(t *testing.T) {
	for _, k := range []Kind{Acknowledgment, Status} {
		f := facts(k)
		f.DecideBy = time.Time{}
		l, err := Render(k, f)
		require.NoError(t, err)
		assert.NotContains(t, l.Body, "decide your claim by")
	}
	f := facts(Status)
	f.DecideBy = time.Time{}
	l, err := Render(Status, f)
	require.NoError(t, err)
	assert.Contains(t, l.Body, "\nUntil we do, we will keep writing")
}

func TestRefusalsNameTheirField(t *testing.T) {
	long := strings.Repeat("x", MaxLine+1)
	cases := []struct {
		name   string
		kind   Kind
		edit   func(f *Facts)
		field  string
		reason string
	}{
		{"unknown kind", "reminder", func(*Facts) {}, "Kind", `"reminder" is not a letter kind`},
		{"no claim ID", Acknowledgment, func(f *Facts) { f.ClaimID = "" }, "ClaimID", "is required"},
		{"no claimant", Denial, func(f *Facts) { f.ClaimantName = "  " }, "ClaimantName", "is required"},
		{"no policy", Status, func(f *Facts) { f.PolicyID = "" }, "PolicyID", "is required"},
		{"claimant name with a newline", Approval, func(f *Facts) { f.ClaimantName = "Ada\nBcc: x@example.com" }, "ClaimantName", "control character (U+000A)"},
		{"bad jurisdiction", Denial, func(f *Facts) { f.Jurisdiction = "California" }, "Jurisdiction", "ISO 3166-2"},
		{"no notice date", Acknowledgment, func(f *Facts) { f.NoticeAt = time.Time{} }, "NoticeAt", "is required"},
		{"notice after the letter", Acknowledgment, func(f *Facts) { f.NoticeAt = f.Date.Add(48 * time.Hour) }, "NoticeAt", "after the letter's date"},
		{"no letter date", Denial, func(f *Facts) { f.Date = time.Time{} }, "Date", "is required"},
		{"unknown currency", Approval, func(f *Facts) { f.Currency = "USD" }, "Currency", "not a supported currency"},
		{"nothing claimed", Acknowledgment, func(f *Facts) { f.ClaimedMinor = 0 }, "ClaimedMinor", "greater than zero"},
		{"denial without reasons", Denial, func(f *Facts) { f.Reasons = nil }, "Reasons", "is required for a denial letter"},
		{"denial without provisions", Denial, func(f *Facts) { f.Provisions = nil }, "Provisions", "is required for a denial letter"},
		{"partial without reasons", Partial, func(f *Facts) { f.Reasons = nil }, "Reasons", "is required for a partial letter"},
		{"partial without provisions", Partial, func(f *Facts) { f.Provisions = []string{} }, "Provisions", "is required for a partial letter"},
		{"partial of nothing", Partial, func(f *Facts) { f.ApprovedMinor = 0 }, "ApprovedMinor", "more than zero and less than the amount claimed (1840.00)"},
		{"partial of everything", Partial, func(f *Facts) { f.ApprovedMinor = f.ClaimedMinor }, "ApprovedMinor", "less than the amount claimed"},
		{"partial of more", Partial, func(f *Facts) { f.ApprovedMinor = f.ClaimedMinor + 1 }, "ApprovedMinor", "less than the amount claimed"},
		{"negative partial", Partial, func(f *Facts) { f.ApprovedMinor = -5 }, "ApprovedMinor", "more than zero"},
		{"approval of nothing", Approval, func(f *Facts) { f.ApprovedMinor = 0 }, "ApprovedMinor", "greater than zero for an approval"},
		{"negative approval", Approval, func(f *Facts) { f.ApprovedMinor = -1 }, "ApprovedMinor", "greater than zero for an approval"},
		{"approval above the claim", Approval, func(f *Facts) { f.ApprovedMinor = f.ClaimedMinor + 1 }, "ApprovedMinor", "more than the amount claimed"},
		{"denial that pays", Denial, func(f *Facts) { f.ApprovedMinor = 100 }, "ApprovedMinor", "must be zero for a denial"},
		{"status without why", Status, func(f *Facts) { f.MoreTimeBecause = nil }, "MoreTimeBecause", "is required for a status letter"},
		{"decide by in the past", Status, func(f *Facts) { f.DecideBy = f.Date.Add(-48 * time.Hour) }, "DecideBy", "before the letter's date"},
		{"approval without regulator", Approval, func(f *Facts) { f.Regulator = "" }, "Regulator", "is required"},
		{"partial without regulator", Partial, func(f *Facts) { f.Regulator = "" }, "Regulator", "is required"},
		{"denial without regulator", Denial, func(f *Facts) { f.Regulator = " " }, "Regulator", "is required"},
		{"approval without appeal", Approval, func(f *Facts) { f.Appeal = "" }, "Appeal", "is required"},
		{"partial without appeal", Partial, func(f *Facts) { f.Appeal = "" }, "Appeal", "is required"},
		{"denial without appeal", Denial, func(f *Facts) { f.Appeal = "" }, "Appeal", "is required"},
		{"automated without a window", Denial, func(f *Facts) { f.ReviewWindowDays = 0 }, "ReviewWindowDays", "greater than zero"},
		{"reason too long", Denial, func(f *Facts) { f.Reasons = append(f.Reasons, long) }, "Reasons[1]", "301 characters, more than 300"},
		{"reason with a newline", Partial, func(f *Facts) { f.Reasons = []string{"fine\n\nDear Ada, ignore the above"} }, "Reasons[0]", "control character (U+000A)"},
		{"reason with an escape", Denial, func(f *Facts) { f.Reasons = []string{"\x1b[2Jcleared"} }, "Reasons[0]", "control character (U+001B)"},
		{"reason with a bidi override", Denial, func(f *Facts) { f.Reasons = []string{"covered \u202Etou\u202C"} }, "Reasons[0]", "control character (U+202E)"},
		{"empty reason", Denial, func(f *Facts) { f.Reasons = []string{""} }, "Reasons[0]", "is required"},
		{"reason not UTF-8", Denial, func(f *Facts) { f.Reasons = []string{"\xff"} }, "Reasons[0]", "not valid UTF-8"},
		{"provision too long", Partial, func(f *Facts) { f.Provisions[1] = long }, "Provisions[1]", "more than 300"},
		{"provision with a tab", Approval, func(f *Facts) { f.Provisions = []string{"a\tb"} }, "Provisions[0]", "control character (U+0009)"},
		{"provision with a line separator", Denial, func(f *Facts) { f.Provisions = []string{"a\u2028b"} }, "Provisions[0]", "control character (U+2028)"},
		{"too many reasons", Denial, func(f *Facts) { f.Reasons = make([]string, MaxLines+1) }, "Reasons", "21 entries, more than 20"},
		{"why too long", Status, func(f *Facts) { f.MoreTimeBecause = []string{long} }, "MoreTimeBecause[0]", "more than 300"},
		{"why with a carriage return", Status, func(f *Facts) { f.MoreTimeBecause[1] = "a\rb" }, "MoreTimeBecause[1]", "control character (U+000D)"},
		{"regulator with a newline", Denial, func(f *Facts) { f.Regulator = "the department\nP.S. pay me" }, "Regulator", "control character"},
		{"cite with a newline", Acknowledgment, func(f *Facts) { f.Cite = []string{"a\nb"} }, "Cite[0]", "control character"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := facts(c.kind)
			if _, ok := sets[c.kind]; !ok {
				f = facts(Denial)
			}
			c.edit(&f)
			l, err := Render(c.kind, f)
			require.Error(t, err)
			assert.Zero(t, l)
			var refused RefusedError
			require.True(t, errors.As(err, &refused), "%v", err)
			require.NotEmpty(t, refused.Fields)
			assert.Equal(t, c.field, refused.Fields[0].Field, "%v", err)
			assert.Contains(t, refused.Fields[0].Reason, c.reason)
			assert.Contains(t, err.Error(), c.field+": ")
		})
	}
}

// Every fault is named at once, in field order.
func TestRefusalListsEveryField(t *testing.T) {
	_, err := Render(Denial, Facts{})
	var refused RefusedError
	require.True(t, errors.As(err, &refused))
	var fields []string
	for _, f := range refused.Fields {
		fields = append(fields, f.Field)
	}
	assert.Equal(t, []string{"ClaimID", "ClaimantName", "PolicyID", "NoticeAt", "Date", "Currency", "ClaimedMinor",
		"Reasons", "Provisions", "Regulator", "Appeal"}, fields)
}

// Before a decision, what only a decision letter says is left out, not
// refused: no amount approved, no rights, nothing automated to review.
func TestUndecidedLettersIgnoreTheDecision(t *testing.T) {
	for _, k := range []Kind{Acknowledgment, Status} {
		f := facts(k)
		plain, err := Render(k, f)
		require.NoError(t, err)
		f.ApprovedMinor, f.Reasons, f.Provisions = 5, []string{"bad\nreason"}, []string{"p"}
		f.Regulator, f.Appeal, f.Automated = "the regulator", "appeal", true
		l, err := Render(k, f)
		require.NoError(t, err)
		assert.Equal(t, plain, l, "%s", k)
	}
}

func TestRenderIsDeterministic(t *testing.T) {
	for _, k := range Kinds {
		a, err := Render(k, facts(k))
		require.NoError(t, err)
		f := facts(k)
		f.Date = f.Date.In(time.FixedZone("PST", -8*3600)) // the same instant, another zone
		b, err := Render(k, f)
		require.NoError(t, err)
		assert.Equal(t, a, b, "%s", k)

		f.ClaimedMinor++
		c, err := Render(k, f)
		require.NoError(t, err)
		assert.NotEqual(t, a.SHA256, c.SHA256, "%s: another amount, another hash", k)
	}
}

// Dates are the UTC day: a letter written late on 9 April in California is
// dated 10 April, as the workflow's clock (UTC) has it.
func TestDatesAreUTCDays(t *testing.T) {
	f := facts(Denial)
	f.Date = time.Date(2026, 4, 9, 20, 0, 0, 0, time.FixedZone("PDT", -7*3600))
	l, err := Render(Denial, f)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(l.Body, "10 April 2026\n"), l.Body)
}

func TestMoneyUsesTheCurrencysExponent(t *testing.T) {
	f := facts(Partial)
	f.Currency, f.ClaimedMinor, f.ApprovedMinor = "jpy", 184000, 90000
	l, err := Render(Partial, f)
	require.NoError(t, err)
	assert.Contains(t, l.Body, "You claimed 184000 JPY. We have approved 90000 JPY of it")
	assert.Contains(t, l.Body, "the remaining 94000 JPY.")
}

func TestVersionFollowsTheTemplates(t *testing.T) {
	require.Regexp(t, `^[0-9a-f]{16}$`, Version)
	v, err := versionOf(embedded)
	require.NoError(t, err)
	assert.Equal(t, Version, v)

	same := copyFS(t)
	v, err = versionOf(same)
	require.NoError(t, err)
	assert.Equal(t, Version, v, "the same bytes, the same version")

	for _, name := range []string{"templates/denial.tmpl", "templates/rights.tmpl", "templates/subject.tmpl"} {
		changed := copyFS(t)
		changed[name].Data = append(append([]byte{}, changed[name].Data...), ' ')
		v, err := versionOf(changed)
		require.NoError(t, err)
		assert.NotEqual(t, Version, v, "one byte more in %s", name)
	}

	renamed := copyFS(t)
	renamed["templates/denial2.tmpl"] = renamed["templates/denial.tmpl"]
	delete(renamed, "templates/denial.tmpl")
	v, err = versionOf(renamed)
	require.NoError(t, err)
	assert.NotEqual(t, Version, v, "a renamed file")

	// Files told apart by their lengths too: a name and bytes run
	// together would read "a1b2b" for both of these.
	v1, err := versionOf(fstest.MapFS{"a": {Data: []byte("1b2")}, "b": {Data: nil}})
	require.NoError(t, err)
	v2, err := versionOf(fstest.MapFS{"a": {Data: []byte("1")}, "b": {Data: []byte("2b")}})
	require.NoError(t, err)
	assert.NotEqual(t, v1, v2, "bytes moved between files")
}

// The templates parse from any copy of the files, and a kind without its
// file or a part is refused at start, not at the first letter.
func TestEveryKindHasItsTemplates(t *testing.T) {
	_, err := parse(copyFS(t))
	require.NoError(t, err)
	for _, name := range []string{"templates/partial.tmpl", "templates/rights.tmpl"} {
		missing := copyFS(t)
		delete(missing, name)
		_, err = parse(missing)
		assert.Error(t, err, "without %s", name)
	}
	noBody := copyFS(t)
	noBody["templates/status.tmpl"] = &fstest.MapFile{Data: []byte(`{{define "headline"}}x{{end}}`)}
	_, err = parse(noBody)
	assert.ErrorContains(t, err, `status templates define no "body"`)
}

func copyFS(t *testing.T) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(embedded, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(embedded, name)
		out[name] = &fstest.MapFile{Data: b}
		return err
	}))
	require.NotEmpty(t, out)
	return out
}

// The golden letters are what a claimant reads, one of each kind: a change
// of wording shows in review as a change to these files
// (go test ./internal/letters/ -run Golden -update).
func TestGoldenLetters(t *testing.T) {
	for _, k := range Kinds {
		t.Run(string(k), func(t *testing.T) {
			l, err := Render(k, facts(k))
			require.NoError(t, err)
			got := l.Subject + "\n\n" + l.Body
			path := filepath.Join("testdata", string(k)+".golden")
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run with -update to write it")
			assert.Equal(t, string(want), got)
			sum := sha256.Sum256(want)
			assert.Equal(t, hex.EncodeToString(sum[:]), l.SHA256, "the hash is the golden file's")
		})
	}
}

// Each limit of a letter's text admits exactly its size: MaxLines entries
// of MaxLine characters; an approval may pay exactly the amount claimed.
func TestLimitsAdmitExactlyTheirSize(t *testing.T) {
	f := facts(Denial)
	f.Reasons = make([]string, MaxLines)
	for i := range f.Reasons {
		f.Reasons[i] = strings.Repeat("r", MaxLine)
	}
	_, err := Render(Denial, f)
	assert.NoError(t, err)

	f = facts(Approval)
	f.ApprovedMinor = f.ClaimedMinor
	l, err := Render(Approval, f)
	require.NoError(t, err)
	assert.Contains(t, l.Body, "1840.00 USD")
}

// An approval of a claim for nothing is refused for the claim, the one
// fault there is, and not also for the amount approved.
func TestNothingClaimedIsTheOneFault(t *testing.T) {
	f := facts(Approval)
	f.ClaimedMinor = 0
	_, err := Render(Approval, f)
	var refused RefusedError
	require.True(t, errors.As(err, &refused), "%v", err)
	require.Len(t, refused.Fields, 1, "%v", err)
	assert.Equal(t, "ClaimedMinor", refused.Fields[0].Field)
}

// Every bidirectional control, the first and last of each range included,
// is refused: text that reads otherwise than it is stored never reaches a
// claimant. The characters just outside the ranges are printed.
func TestEveryBidiControlIsRefused(t *testing.T) {
	for _, r := range []rune{'\u202A', '\u202B', '\u202C', '\u202D', '\u202E', '\u2066', '\u2067', '\u2068', '\u2069', '\u200E', '\u200F', '\u061C'} {
		f := facts(Denial)
		f.Reasons = []string{"covered " + string(r) + "tou"}
		_, err := Render(Denial, f)
		var refused RefusedError
		require.True(t, errors.As(err, &refused), "%U: %v", r, err)
		assert.Equal(t, "Reasons[0]", refused.Fields[0].Field, "%U", r)
	}
	for _, r := range []rune{'\u2029', '\u202F', '\u2065', '\u206A'} {
		assert.False(t, bidiControl(r), "%U", r)
	}
}

// The law a letter is sent under is named as the facts name it: name and
// code, the name alone, or the code alone.
func TestLetterNamesTheLawItIsSentUnder(t *testing.T) {
	for _, tc := range []struct{ name, code, want string }{
		{"California", "US-CA", "the law of California (US-CA):"},
		{"California", "", "the law of California:"},
		{"", "US-CA", "the law of US-CA:"},
	} {
		f := facts(Acknowledgment)
		f.JurisdictionName, f.Jurisdiction = tc.name, tc.code
		l, err := Render(Acknowledgment, f)
		require.NoError(t, err)
		assert.Contains(t, strings.Join(strings.Fields(l.Body), " "), tc.want)
	}
}

// A regulator or appeal ending a sentence is printed as written; one
// that does not gets its full stop.
func TestSentencesEndOnce(t *testing.T) {
	for in, want := range map[string]string{
		"Call us.": "Call us.", "Call us!": "Call us!", "Call us?": "Call us?", "Call us": "Call us.", "  ": "",
	} {
		assert.Equal(t, want, sentence(in), "%q", in)
	}
}
