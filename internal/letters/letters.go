// Package letters writes the letters a claimant is sent while the law's
// clocks run: acknowledgment, status, approval, partial approval and
// denial. Each is rendered from a versioned, embedded template with facts
// the workflow already holds (the coverage check's and review rules'
// reasons, the policy provisions, the rule set's regulator and appeal),
// never free model text, and carries the hash the claim file records
// (docs/law.md, "Letters").
package letters

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// Kind is a letter's kind; the names are the ones DESIGN.md gives, and the
// claim file's letters record them.
type Kind string

const (
	Acknowledgment Kind = "acknowledgment"
	Status         Kind = "status"
	Approval       Kind = "approval"
	Partial        Kind = "partial"
	Denial         Kind = "denial"
)

// Kinds lists every kind, in the order a claim may meet them.
var Kinds = []Kind{Acknowledgment, Status, Approval, Partial, Denial}

// decides reports whether a letter of kind k tells a decision, so carries
// the claimant's rights.
func (k Kind) decides() bool { return k == Approval || k == Partial || k == Denial }

// Facts are what a letter says. Strings reach a claimant, so every one is
// checked: no control characters, no line or paragraph separators, no
// bidirectional overrides, bounded lengths.
type Facts struct {
	ClaimID, ClaimantName, PolicyID string
	Jurisdiction                    string    // ISO 3166-2 code, e.g. "US-CA", or "US"
	JurisdictionName                string    // e.g. "California"
	NoticeAt                        time.Time // when the claim was received
	Date                            time.Time // the letter's date (the workflow's time when sent)
	Currency                        string    // lower-case ISO 4217, e.g. "usd"
	ClaimedMinor, ApprovedMinor     int64     // amounts in minor units
	// Reasons are the specific reasons (coverage check, review rules, the
	// approver's recorded reason): never free model text.
	Reasons []string
	// Provisions are the policy provisions relied on, e.g. "Policy
	// pol-2002: deductible 250.00 USD".
	Provisions      []string
	MoreTimeBecause []string  // status letters: why more time is needed
	DecideBy        time.Time // acknowledgment and status: by when a decision is due (zero: omit the sentence)
	Regulator       string    // the claimant's regulator contact, from the rule set
	Appeal          string    // how to appeal, from the rule set
	// Automated: decided with no human. A decision letter then says the
	// claimant may ask for a person to review it, within ReviewWindowDays,
	// and how. Forced off for acknowledgment and status: nothing is decided.
	Automated        bool
	ReviewWindowDays int
	Cite             []string // statutes the letter is sent under (optional, printed in a footer)
}

// Letter is a rendered letter as the outbox sends it and the claim file
// keeps it.
type Letter struct {
	Kind    Kind   `json:"kind"`
	Version string `json:"version"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
	// SHA256 is the hex SHA-256 of Subject + "\n\n" + Body.
	SHA256 string `json:"sha256"`
}

// Limits on what a letter carries. Reasons and the like are single lines
// written by the rules; the rule set's regulator and appeal texts may be a
// short paragraph.
const (
	MaxLine      = 300
	MaxParagraph = 1000
	MaxLines     = 20
)

// DateLayout is how a letter writes a date, in UTC.
const DateLayout = "2 January 2006"

// RefusedError says why a letter cannot be written: every field at fault,
// in the order Facts declares them. Nothing a retry changes.
type RefusedError struct {
	Kind   Kind
	Fields []claim.FieldError
}

func (e RefusedError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Error()
	}
	return fmt.Sprintf("letters: refusing a %s letter: %s", e.Kind, strings.Join(parts, "; "))
}

// Render writes the letter of kind k from f. The same kind and facts give
// the same letter, byte for byte, on any machine.
func Render(k Kind, f Facts) (Letter, error) {
	set, ok := sets[k]
	if !ok {
		return Letter{}, RefusedError{Kind: k, Fields: []claim.FieldError{{Field: "Kind", Reason: fmt.Sprintf("%q is not a letter kind", k)}}}
	}
	f = relevant(k, f)
	if errs := check(k, f); len(errs) > 0 {
		return Letter{}, RefusedError{Kind: k, Fields: errs}
	}
	v := viewOf(k, f)
	var subject, body strings.Builder
	if err := set.ExecuteTemplate(&subject, "subject", v); err != nil {
		return Letter{}, fmt.Errorf("letters: %s subject: %w", k, err)
	}
	if err := set.ExecuteTemplate(&body, "body", v); err != nil {
		return Letter{}, fmt.Errorf("letters: %s body: %w", k, err)
	}
	l := Letter{Kind: k, Version: Version, Subject: strings.TrimSpace(subject.String()), Body: tidy(body.String())}
	sum := sha256.Sum256([]byte(l.Subject + "\n\n" + l.Body))
	l.SHA256 = hex.EncodeToString(sum[:])
	return l, nil
}

// relevant clears what a kind's letter does not say, so it is neither
// checked nor printed: before a decision there is no amount approved, no
// grounds, no rights and no automated decision to review; after one, no
// promise of a date.
func relevant(k Kind, f Facts) Facts {
	if k.decides() {
		f.MoreTimeBecause, f.DecideBy = nil, time.Time{}
		if !f.Automated {
			f.ReviewWindowDays = 0
		}
		return f
	}
	f.ApprovedMinor, f.Reasons, f.Provisions = 0, nil, nil
	f.Regulator, f.Appeal = "", ""
	f.Automated, f.ReviewWindowDays = false, 0
	if k != Status {
		f.MoreTimeBecause = nil
	}
	return f
}

// check lists every fault in f for a letter of kind k, in field order.
func check(k Kind, f Facts) []claim.FieldError {
	var errs []claim.FieldError
	bad := func(field, reason string, args ...any) {
		errs = append(errs, claim.FieldError{Field: field, Reason: fmt.Sprintf(reason, args...)})
	}
	text := func(field, v string, max int, required bool) {
		if required && strings.TrimSpace(v) == "" {
			bad(field, "is required")
			return
		}
		if reason := unprintable(v, max); reason != "" {
			bad(field, "%s", reason)
		}
	}
	list := func(field string, vs []string, required bool) {
		switch {
		case required && len(vs) == 0:
			bad(field, "is required for a %s letter", k)
			return
		case len(vs) > MaxLines:
			bad(field, "has %d entries, more than %d", len(vs), MaxLines)
			return
		}
		for i, v := range vs {
			text(fmt.Sprintf("%s[%d]", field, i), v, MaxLine, true)
		}
	}

	text("ClaimID", f.ClaimID, claim.MaxIDLen, true)
	text("ClaimantName", f.ClaimantName, claim.MaxNameLen, true)
	text("PolicyID", f.PolicyID, claim.MaxIDLen, true)
	if f.Jurisdiction != "" && !jurisdictionPattern.MatchString(f.Jurisdiction) {
		bad("Jurisdiction", "%q is not an ISO 3166-2 code like US-CA", f.Jurisdiction)
	}
	text("JurisdictionName", f.JurisdictionName, MaxLine, false)
	switch {
	case f.NoticeAt.IsZero():
		bad("NoticeAt", "is required")
	case !f.Date.IsZero() && day(f.NoticeAt).After(day(f.Date)):
		bad("NoticeAt", "%s is after the letter's date, %s", date(f.NoticeAt), date(f.Date))
	}
	if f.Date.IsZero() {
		bad("Date", "is required")
	}
	if _, ok := claim.CurrencyExponent(f.Currency); !ok {
		bad("Currency", "%q is not a supported currency (lower-case ISO 4217, like usd)", f.Currency)
	}
	if f.ClaimedMinor <= 0 {
		bad("ClaimedMinor", "must be greater than zero")
	}
	switch k {
	case Approval:
		if f.ApprovedMinor <= 0 {
			bad("ApprovedMinor", "must be greater than zero for an approval")
		} else if f.ApprovedMinor > f.ClaimedMinor && f.ClaimedMinor > 0 {
			bad("ApprovedMinor", "is more than the amount claimed")
		}
	case Partial:
		if f.ApprovedMinor <= 0 || f.ApprovedMinor >= f.ClaimedMinor {
			bad("ApprovedMinor", "must be more than zero and less than the amount claimed (%s) for a partial approval",
				claim.FormatAmount(f.ClaimedMinor, f.Currency))
		}
	case Denial:
		if f.ApprovedMinor != 0 {
			bad("ApprovedMinor", "must be zero for a denial")
		}
	}
	grounds := k == Partial || k == Denial
	list("Reasons", f.Reasons, grounds)
	list("Provisions", f.Provisions, grounds)
	list("MoreTimeBecause", f.MoreTimeBecause, k == Status)
	if !f.DecideBy.IsZero() && !f.Date.IsZero() && day(f.DecideBy).Before(day(f.Date)) {
		bad("DecideBy", "%s is before the letter's date, %s", date(f.DecideBy), date(f.Date))
	}
	text("Regulator", f.Regulator, MaxParagraph, k.decides())
	text("Appeal", f.Appeal, MaxParagraph, k.decides())
	if f.Automated && f.ReviewWindowDays <= 0 {
		bad("ReviewWindowDays", "must be greater than zero for an automated decision")
	}
	list("Cite", f.Cite, false)
	return errs
}

var jurisdictionPattern = regexp.MustCompile(`^[A-Z]{2}(-[A-Z0-9]{1,3})?$`)

// unprintable says what makes v unfit for a letter, or "".
func unprintable(v string, max int) string {
	if !utf8.ValidString(v) {
		return "is not valid UTF-8"
	}
	if n := utf8.RuneCountInString(v); n > max {
		return fmt.Sprintf("is %d characters, more than %d", n, max)
	}
	for _, r := range v {
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) || bidiControl(r) {
			return fmt.Sprintf("contains a control character (%U)", r)
		}
	}
	return ""
}

// bidiControl reports the embeddings, overrides and isolates that make
// text read otherwise than it is stored ("Trojan Source").
func bidiControl(r rune) bool {
	return (r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069') || r == '\u200E' || r == '\u200F' || r == '\u061C'
}

// view is what the templates see: every value already worded.
type view struct {
	Kind                            Kind
	ClaimID, ClaimantName, PolicyID string
	Date, NoticeAt, DecideBy        string
	Claimed, Approved, Withheld     string
	Reasons, Provisions             []string
	MoreTimeBecause                 []string
	Regulator, Appeal               string
	Automated                       bool
	ReviewWindowDays                int
	Under                           string // "California (US-CA)"
	Cite                            string
}

func viewOf(k Kind, f Facts) view {
	v := view{
		Kind: k, ClaimID: f.ClaimID, ClaimantName: strings.TrimSpace(f.ClaimantName), PolicyID: f.PolicyID,
		Date: date(f.Date), NoticeAt: date(f.NoticeAt),
		Claimed: money(f.ClaimedMinor, f.Currency), Approved: money(f.ApprovedMinor, f.Currency),
		Withheld:   money(f.ClaimedMinor-f.ApprovedMinor, f.Currency),
		Reasons:    trimmed(f.Reasons),
		Provisions: trimmed(f.Provisions), MoreTimeBecause: trimmed(f.MoreTimeBecause),
		Regulator: sentence(f.Regulator), Appeal: sentence(f.Appeal),
		Automated: f.Automated, ReviewWindowDays: f.ReviewWindowDays,
		Cite: strings.Join(trimmed(f.Cite), "; "),
	}
	if !f.DecideBy.IsZero() {
		v.DecideBy = date(f.DecideBy)
	}
	name := strings.TrimSpace(f.JurisdictionName)
	switch {
	case name != "" && f.Jurisdiction != "":
		v.Under = name + " (" + f.Jurisdiction + ")"
	case name != "":
		v.Under = name
	default:
		v.Under = f.Jurisdiction
	}
	return v
}

func day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func date(t time.Time) string { return t.UTC().Format(DateLayout) }

func money(minor int64, currency string) string {
	return claim.FormatAmount(minor, currency) + " " + strings.ToUpper(currency)
}

func trimmed(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.TrimSpace(v)
	}
	return out
}

// sentence ends v with a full stop unless it already ends a sentence.
func sentence(v string) string {
	v = strings.TrimSpace(v)
	if v == "" || strings.HasSuffix(v, ".") || strings.HasSuffix(v, "!") || strings.HasSuffix(v, "?") {
		return v
	}
	return v + "."
}

// tidy lets the templates be laid out for reading: it drops trailing
// spaces, leading and trailing blank lines and runs of blank lines, and
// ends the body with one newline.
func tidy(s string) string {
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" && (len(out) == 0 || out[len(out)-1] == "") {
			continue
		}
		out = append(out, l)
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n") + "\n"
}

// Sent is a letter as the claim file keeps it: its kind, when it
// was sent, the template version, its hash and its text.
type Sent struct {
	Kind      Kind      `json:"kind"`
	SentAt    time.Time `json:"sent_at"`
	Version   string    `json:"version"`
	SHA256    string    `json:"sha256"`
	MessageID string    `json:"message_id"`
	Subject   string    `json:"subject"`
	Body      string    `json:"body"`
}
