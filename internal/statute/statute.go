// Package statute is the law a claim is handled under: for each
// jurisdiction, how many days the insurer has to acknowledge, decide and
// pay, when a "we need more time" letter is due, and the holiday calendar
// business days are counted on. Every number carries its citation. The
// rule sets ship embedded (rules.json) and an operator may supply their own
// (JURISDICTION_RULES_FILE); intake records the claim's jurisdiction,
// holidays included, in the workflow's history, so the arithmetic here is
// pure and a replay computes the same deadlines. Holidays are shipped,
// never fetched.
package statute

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"time"
	_ "time/tzdata" // time zones load on a machine without a zoneinfo database
)

// Unit is how a clock counts days.
type Unit string

const (
	CalendarDays Unit = "calendar_days"
	BusinessDays Unit = "business_days" // not Saturday, Sunday or a holiday of the jurisdiction's calendar
)

// Start is the event a clock runs from.
type Start string

const (
	FromNotice      Start = "notice"        // the insurer received notice of the claim
	FromProofOfLoss Start = "proof_of_loss" // the insurer received what it needs to decide
	FromAcceptance  Start = "acceptance"    // the insurer told the claimant it will pay
	FromStatus      Start = "status_letter" // the (last) "we need more time" letter: status_every, extension
	FromDecision    Start = "decision"      // the decision was sent: review_window
)

// Clock is one statutory period: Days of Unit after Starts, per Cite.
type Clock struct {
	Days   int    `json:"days"`
	Unit   Unit   `json:"unit"`
	Starts Start  `json:"starts"`
	Cite   string `json:"cite"`
}

// Jurisdiction is one rule set: the claim-handling clocks of a state (or
// the default), the zone its days are counted in, and the claimant's
// rights text for letters.
type Jurisdiction struct {
	Name     string `json:"name"`
	TimeZone string `json:"time_zone"` // IANA name: days end at local midnight there
	Calendar string `json:"calendar"`  // key into Rules.Calendars

	Acknowledge Clock `json:"acknowledge"`
	Decide      Clock `json:"decide"`
	Pay         Clock `json:"pay"`
	// StatusFirst is when the first "we need more time" letter is due
	// while the claim is undecided; StatusEvery then runs from each letter.
	StatusFirst *Clock `json:"status_first,omitempty"`
	StatusEvery *Clock `json:"status_every,omitempty"`
	// Extension is how far the decision may run when a status letter was
	// sent in time (Tex. Ins. Code §542.056(d)). Without one, a letter
	// keeps the claimant informed but moves no deadline.
	Extension *Clock `json:"extension,omitempty"`
	// StatusDefers: the rules let an insurer take longer than Decide as
	// long as its status letters go out on time (10 CCR §2695.7(c)(1), NAIC
	// #902 §7 C). While every letter is in time the decision is due before
	// the next letter would be; a late or missing letter ends the deferral.
	// Needs StatusFirst and StatusEvery.
	StatusDefers bool `json:"status_defers,omitempty"`

	Regulator string `json:"regulator"` // who the claimant may turn to: name, phone, website
	Appeal    string `json:"appeal"`    // how to appeal, for decision letters
	// ReviewWindow is how long a claimant may ask a person to review an
	// automated decision.
	ReviewWindow Clock `json:"review_window"`
}

// Calendar is a holiday calendar: the dates ("YYYY-MM-DD") on which
// offices are closed, as observed (a Saturday holiday observed on the
// Friday is listed as that Friday).
type Calendar struct {
	Name     string   `json:"name"`
	Holidays []string `json:"holidays"`
}

// Rules is a versioned set of rule sets: the file JURISDICTION_RULES_FILE
// names, or the shipped one.
type Rules struct {
	Version       string                  `json:"version"`
	Default       string                  `json:"default"` // the jurisdiction of a policy that names none
	Calendars     map[string]Calendar     `json:"calendars"`
	Jurisdictions map[string]Jurisdiction `json:"jurisdictions"` // by ISO 3166-2 code
}

//go:embed rules.json
var shipped []byte

// Shipped is the embedded rule sets. Its tests hold it valid.
func Shipped() Rules {
	r, err := decode(shipped)
	if err != nil {
		panic("statute: the embedded rules.json does not decode: " + err.Error())
	}
	return r
}

// Load reads the rule sets from path, or returns Shipped() when path is "".
// Unknown fields are refused, and the result is validated.
func Load(path string) (Rules, error) {
	if path == "" {
		return Shipped(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Rules{}, fmt.Errorf("jurisdiction rules: %w", err)
	}
	r, err := decode(data)
	if err != nil {
		return Rules{}, fmt.Errorf("jurisdiction rules %s: %w", path, err)
	}
	if err := r.Validate(); err != nil {
		return Rules{}, fmt.Errorf("jurisdiction rules %s: %w", path, err)
	}
	return r, nil
}

func decode(data []byte) (Rules, error) {
	var r Rules
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Rules{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Rules{}, errors.New("data after the rule sets' JSON object")
	}
	return r, nil
}

var codePattern = regexp.MustCompile(`^[A-Z]{2}(-[A-Z0-9]{1,3})?$`)

// Code checks the shape of a jurisdiction code: ISO 3166-2 ("US-CA"), or a
// bare ISO 3166-1 country ("US") for a country-wide default.
func Code(s string) error {
	if !codePattern.MatchString(s) {
		return fmt.Errorf("jurisdiction %q is not an ISO 3166-2 code such as US-CA (or a country such as US)", s)
	}
	return nil
}

// maxDays bounds every clock: a typo of 1500 for 15 is refused, not
// counted out day by day.
const maxDays = 366

// Validate checks every rule set; each error names the field's path and
// what is wrong with it, e.g. `jurisdictions["US-TX"].decide.days: must be > 0`.
func (r Rules) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
	}
	if r.Version == "" {
		bad("version", "must be set")
	}
	if r.Default == "" {
		bad("default", "must name a jurisdiction")
	} else if _, ok := r.Jurisdictions[r.Default]; !ok {
		bad("default", "%q is not in jurisdictions", r.Default)
	}
	if len(r.Jurisdictions) == 0 {
		bad("jurisdictions", "must hold at least one rule set")
	}
	for _, key := range sortedKeys(r.Calendars) {
		c, path := r.Calendars[key], fmt.Sprintf("calendars[%q]", key)
		if key == "" {
			bad(path, "must have a name as its key")
		}
		if c.Name == "" {
			bad(path+".name", "must be set")
		}
		seen := map[string]bool{}
		for i, h := range c.Holidays {
			hp := fmt.Sprintf("%s.holidays[%d]", path, i)
			if _, err := parseDate(h); err != nil {
				bad(hp, "%q is not a date (YYYY-MM-DD)", h)
			} else if seen[h] {
				bad(hp, "%s is listed twice", h)
			}
			seen[h] = true
		}
	}
	for _, code := range sortedKeys(r.Jurisdictions) {
		j, path := r.Jurisdictions[code], fmt.Sprintf("jurisdictions[%q]", code)
		if err := Code(code); err != nil {
			bad(path, "%v", err)
		}
		if j.Name == "" {
			bad(path+".name", "must be set")
		}
		if j.TimeZone == "" {
			bad(path+".time_zone", "must be an IANA time zone such as America/Chicago")
		} else if _, err := time.LoadLocation(j.TimeZone); err != nil {
			bad(path+".time_zone", "%q is not a known IANA time zone", j.TimeZone)
		}
		if _, ok := r.Calendars[j.Calendar]; !ok {
			bad(path+".calendar", "%q is not in calendars", j.Calendar)
		}
		for _, c := range []struct {
			field  string
			clock  *Clock
			starts []Start
		}{
			{"acknowledge", &j.Acknowledge, []Start{FromNotice}},
			{"decide", &j.Decide, []Start{FromNotice, FromProofOfLoss}},
			{"pay", &j.Pay, []Start{FromNotice, FromProofOfLoss, FromAcceptance}},
			{"status_first", j.StatusFirst, []Start{FromNotice, FromProofOfLoss}},
			{"status_every", j.StatusEvery, []Start{FromStatus}},
			{"extension", j.Extension, []Start{FromNotice, FromProofOfLoss, FromStatus}},
			{"review_window", &j.ReviewWindow, []Start{FromDecision}},
		} {
			if c.clock != nil {
				validClock(path+"."+c.field, *c.clock, c.starts, bad)
			}
		}
		if j.StatusFirst == nil && j.StatusEvery != nil {
			bad(path+".status_every", "needs status_first: the letters run from the first one")
		}
		if j.StatusFirst == nil && j.Extension != nil {
			bad(path+".extension", "needs status_first: the extension is earned by a status letter sent in time")
		}
		if j.StatusDefers && j.StatusEvery == nil {
			bad(path+".status_defers", "needs status_first and status_every: the letters are what defer the decision")
		}
		if j.StatusDefers && j.Extension != nil {
			bad(path+".status_defers", "and extension both move the decision: a rule set has one or the other")
		}
		if j.Regulator == "" {
			bad(path+".regulator", "must say who the claimant may turn to")
		}
		if j.Appeal == "" {
			bad(path+".appeal", "must say how the claimant may appeal")
		}
	}
	return errors.Join(errs...)
}

func validClock(path string, c Clock, starts []Start, bad func(string, string, ...any)) {
	if c.Days <= 0 {
		bad(path+".days", "must be > 0")
	} else if c.Days > maxDays {
		bad(path+".days", "must be at most %d", maxDays)
	}
	if c.Unit != CalendarDays && c.Unit != BusinessDays {
		bad(path+".unit", "must be %q or %q, not %q", CalendarDays, BusinessDays, c.Unit)
	}
	if !slices.Contains(starts, c.Starts) {
		bad(path+".starts", "must be one of %q, not %q", starts, c.Starts)
	}
	if c.Cite == "" {
		bad(path+".cite", "must cite the statute or regulation (or say it is the insurer's own standard)")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Recorded is what intake records in a run's history: the jurisdiction's
// rule set and its holiday calendar, self-contained, so the run (and its
// replay, and the claim file) computes deadlines by the law as it stood at
// intake, whatever file the worker reads later.
type Recorded struct {
	RuleSet      string       `json:"rule_set"` // Rules.Version
	Code         string       `json:"code"`
	Jurisdiction Jurisdiction `json:"jurisdiction"`
	Holidays     Calendar     `json:"holidays"`
}

// Record picks the rule set for code ("" is the default).
func (r Rules) Record(code string) (Recorded, error) {
	if code == "" {
		code = r.Default
	}
	j, ok := r.Jurisdictions[code]
	if !ok {
		return Recorded{}, fmt.Errorf("jurisdiction %q has no rule set in rules version %q (it has %q)", code, r.Version, sortedKeys(r.Jurisdictions))
	}
	cal, ok := r.Calendars[j.Calendar]
	if !ok {
		return Recorded{}, fmt.Errorf("jurisdiction %q: calendar %q is not in rules version %q", code, j.Calendar, r.Version)
	}
	cal.Holidays = slices.Clone(cal.Holidays)
	return Recorded{RuleSet: r.Version, Code: code, Jurisdiction: j, Holidays: cal}, nil
}
