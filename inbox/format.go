package main

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
	_ "time/tzdata" // approvers' time zones resolve on any host

	"golang.org/x/text/currency"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// format shows amounts and times the way the approver reads them: their
// locale (the directory's, else the browser's) for numbers, their time zone
// (the directory's, else UTC) for times, with the UTC value beside it.
type format struct {
	tag     language.Tag
	loc     *time.Location
	printer *message.Printer
	now     func() time.Time
}

func newFormat(ap authority.Approver, acceptLanguage string) format {
	tag := language.BritishEnglish
	if t, err := language.Parse(ap.Locale); ap.Locale != "" && err == nil {
		tag = t
	} else if tags, _, err := language.ParseAcceptLanguage(acceptLanguage); err == nil && len(tags) > 0 {
		tag = tags[0]
	}
	loc := time.UTC
	if l, err := time.LoadLocation(ap.TimeZone); ap.TimeZone != "" && err == nil {
		loc = l
	}
	return format{tag: tag, loc: loc, printer: message.NewPrinter(tag), now: time.Now}
}

// Money is an amount in minor units, as "USD 1,840.00" in the approver's
// locale ("USD 1.840,00" in German).
func (f format) Money(minor int64, cur string) string {
	exp, _ := claim.CurrencyExponent(cur)
	unit, err := currency.ParseISO(strings.ToUpper(cur))
	if err != nil {
		return claim.FormatAmount(minor, cur) + " " + strings.ToUpper(cur)
	}
	return f.printer.Sprint(currency.ISO(unit.Amount(float64(minor) / math.Pow10(exp))))
}

// Plain is an amount as a form takes it back: "1840.00".
func (f format) Plain(minor int64, cur string) string { return claim.FormatAmount(minor, cur) }

// plainAmount is an amount as the workflow writes it into a request's
// reasons and the assessment's rationale ("1840.00", "1840.00 USD").
var plainAmount = regexp.MustCompile(`\b\d+\.\d{2,3}\b(?: [A-Za-z]{3}\b)?`)

// Text is a reason or a rationale with its amounts in the request's
// currency written as Money writes them, so the page has one format for
// money: "payout USD 1,840.00 is above the auto-approve limit USD 1,000.00".
// The signed request keeps the workflow's own words; only the page changes.
// A number that is not an amount in that currency stays as it was.
func (f format) Text(s, cur string) string {
	return plainAmount.ReplaceAllStringFunc(s, func(m string) string {
		n, code, _ := strings.Cut(m, " ")
		if code != "" && !strings.EqualFold(code, cur) {
			return m
		}
		minor, err := claim.ParseAmount(n, cur)
		if err != nil || claim.FormatAmount(minor, cur) != n {
			return m
		}
		return f.Money(minor, cur)
	})
}

// Bytes is a document's size, in the approver's locale: "32 bytes", "1.2 MB".
func (f format) Bytes(n int64) string {
	switch {
	case n < 1000:
		return f.printer.Sprintf("%d bytes", n)
	case n < 1000*1000:
		return f.printer.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return f.printer.Sprintf("%.1f MB", float64(n)/1e6)
}

// Time is t in the approver's time zone.
func (f format) Time(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.In(f.loc).Format("Mon 2 Jan 2006, 15:04 MST")
}

// UTC is t in UTC, for the title beside a local time.
func (f format) UTC(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// Past says whether t has passed.
func (f format) Past(t time.Time) bool { return !t.IsZero() && !t.After(f.now()) }

// Left says how long until t, or how long ago it passed.
func (f format) Left(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(f.now()).Round(time.Minute)
	past := d < 0
	if past {
		d = -d
	}
	var s string
	switch days, hours := int(d.Hours())/24, int(d.Hours())%24; {
	case days > 0:
		s = fmt.Sprintf("%d d %d h", days, hours)
	case d >= time.Hour:
		s = fmt.Sprintf("%d h %d min", hours, int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%d min", int(d.Minutes()))
	}
	if past {
		return s + " ago"
	}
	return "in " + s
}

// Lang is the page's language tag.
func (f format) Lang() string { return f.tag.String() }

// Zone names the approver's time zone.
func (f format) Zone() string { return f.loc.String() }
