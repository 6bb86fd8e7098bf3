package statute

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShippedValidatesAndCitesEveryNumber(t *testing.T) {
	r := Shipped()
	require.NoError(t, r.Validate())
	assert.Equal(t, "US", r.Default)
	assert.NotEmpty(t, r.Version)
	assert.ElementsMatch(t, []string{"US", "US-CA", "US-TX", "US-FL"}, sortedKeys(r.Jurisdictions))
	for _, code := range sortedKeys(r.Jurisdictions) {
		j := r.Jurisdictions[code]
		clocks := map[string]*Clock{"acknowledge": &j.Acknowledge, "decide": &j.Decide, "pay": &j.Pay, "review_window": &j.ReviewWindow,
			"status_first": j.StatusFirst, "status_every": j.StatusEvery, "extension": j.Extension}
		for name, c := range clocks {
			if c != nil {
				assert.NotEmpty(t, strings.TrimSpace(c.Cite), "%s.%s has no citation", code, name)
				assert.Positive(t, c.Days, "%s.%s", code, name)
			}
		}
		assert.NotEmpty(t, j.Regulator, code)
		assert.NotEmpty(t, j.Appeal, code)
	}
}

// The numbers the issue asks for, each where it was asked for.
func TestShippedNumbers(t *testing.T) {
	r := Shipped()
	type want struct {
		days   int
		unit   Unit
		starts Start
		cite   string // a fragment the citation must hold
	}
	cal := func(d int, s Start, cite string) *want { return &want{d, CalendarDays, s, cite} }
	biz := func(d int, s Start, cite string) *want { return &want{d, BusinessDays, s, cite} }
	for _, tc := range []struct {
		code, zone, calendar                               string
		ack, decide, pay, statusFirst, statusEvery, extend *want
	}{
		{"US", "America/New_York", "us-federal",
			cal(15, FromNotice, "§6 A"), cal(21, FromProofOfLoss, "§7 A"), cal(30, FromAcceptance, "Insurer standard"),
			cal(21, FromProofOfLoss, "§7 C"), cal(45, FromStatus, "§7 C"), nil},
		{"US-CA", "America/Los_Angeles", "us-federal",
			cal(15, FromNotice, "§2695.5(e)(1)"), cal(40, FromProofOfLoss, "§2695.7(b)"), cal(30, FromAcceptance, "§2695.7(h)"),
			cal(40, FromProofOfLoss, "§2695.7(c)(1)"), cal(30, FromStatus, "§2695.7(c)(1)"), nil},
		{"US-TX", "America/Chicago", "us-tx",
			cal(15, FromNotice, "§542.055(a)"), biz(15, FromProofOfLoss, "§542.056(a)"), biz(5, FromAcceptance, "§542.057(a)"),
			biz(15, FromProofOfLoss, "§542.056(d)"), nil, cal(45, FromStatus, "§542.056(d)")},
		{"US-FL", "America/New_York", "us-federal",
			cal(7, FromNotice, "§627.70131(1)(a)"), cal(60, FromNotice, "§627.70131(7)(a)"), cal(60, FromNotice, "§627.70131(7)(a)"),
			cal(30, FromProofOfLoss, "§627.7142"), cal(30, FromStatus, "Insurer standard"), nil},
	} {
		t.Run(tc.code, func(t *testing.T) {
			j := r.Jurisdictions[tc.code]
			assert.Equal(t, tc.zone, j.TimeZone)
			assert.Equal(t, tc.calendar, j.Calendar)
			check := func(name string, w *want, c *Clock) {
				if w == nil {
					assert.Nil(t, c, name)
					return
				}
				if assert.NotNil(t, c, name) {
					assert.Equal(t, want{w.days, w.unit, w.starts, ""}, want{c.Days, c.Unit, c.Starts, ""}, name)
					assert.Contains(t, c.Cite, w.cite, name)
				}
			}
			check("acknowledge", tc.ack, &j.Acknowledge)
			check("decide", tc.decide, &j.Decide)
			check("pay", tc.pay, &j.Pay)
			check("status_first", tc.statusFirst, j.StatusFirst)
			check("status_every", tc.statusEvery, j.StatusEvery)
			check("extension", tc.extend, j.Extension)
		})
	}
}

// The shipped calendars are the statutes' rules applied to 2026–2030,
// derived here independently of however the file was written.
func TestShippedHolidaysFollowTheStatutes(t *testing.T) {
	nth := func(y int, m time.Month, wd time.Weekday, n int) time.Time {
		d := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		for d.Weekday() != wd {
			d = d.AddDate(0, 0, 1)
		}
		return d.AddDate(0, 0, 7*(n-1))
	}
	last := func(y int, m time.Month, wd time.Weekday) time.Time {
		d := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC)
		for d.Weekday() != wd {
			d = d.AddDate(0, 0, -1)
		}
		return d
	}
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	var federal, texas []string
	add := func(list *[]string, d time.Time) { *list = append(*list, d.Format(time.DateOnly)) }
	for y := 2026; y <= 2030; y++ {
		// 5 U.S.C. §6103(a), observed per §6103(b) and E.O. 11582.
		for _, d := range []time.Time{day(y, 1, 1), nth(y, 1, time.Monday, 3), nth(y, 2, time.Monday, 3), last(y, time.May, time.Monday),
			day(y, 6, 19), day(y, 7, 4), nth(y, 9, time.Monday, 1), nth(y, 10, time.Monday, 2), day(y, 11, 11),
			nth(y, 11, time.Thursday, 4), day(y, 12, 25)} {
			switch d.Weekday() {
			case time.Saturday:
				d = d.AddDate(0, 0, -1)
			case time.Sunday:
				d = d.AddDate(0, 0, 1)
			}
			add(&federal, d)
		}
		// Tex. Gov't Code §662.003(a) national and (b) state holidays; a
		// weekend one is not moved (§662.005(a)(1)), so it is not listed.
		thanksgiving := nth(y, 11, time.Thursday, 4)
		for _, d := range []time.Time{day(y, 1, 1), nth(y, 1, time.Monday, 3), nth(y, 2, time.Monday, 3), last(y, time.May, time.Monday),
			day(y, 7, 4), nth(y, 9, time.Monday, 1), day(y, 11, 11), thanksgiving, day(y, 12, 25),
			day(y, 1, 19), day(y, 3, 2), day(y, 4, 21), day(y, 6, 19), day(y, 8, 27), thanksgiving.AddDate(0, 0, 1), day(y, 12, 24), day(y, 12, 26)} {
			if d.Weekday() != time.Saturday && d.Weekday() != time.Sunday {
				add(&texas, d)
			}
		}
	}
	slices.Sort(federal)
	slices.Sort(texas)
	texas = slices.Compact(texas) // MLK Day and Confederate Heroes Day coincide some years
	r := Shipped()
	assert.Equal(t, federal, r.Calendars["us-federal"].Holidays)
	assert.Equal(t, texas, r.Calendars["us-tx"].Holidays)

	// A few read off the calendars by hand.
	assert.Contains(t, federal, "2026-07-03", "July 4, 2026 is a Saturday: observed Friday")
	assert.Contains(t, federal, "2027-12-31", "January 1, 2028 is a Saturday: observed the Friday before")
	assert.NotContains(t, texas, "2026-07-03", "Texas does not move a weekend holiday")
	assert.Contains(t, texas, "2026-11-27", "the Friday after Thanksgiving")
	assert.NotContains(t, texas, "2026-10-12", "Columbus Day is not a Texas holiday")
}

func TestCode(t *testing.T) {
	for _, tc := range []struct {
		code string
		ok   bool
	}{
		{"US-CA", true}, {"US-TX", true}, {"US", true}, {"GB-ENG", true}, {"FR-75", true},
		{"", false}, {"us-ca", false}, {"USA-CA", false}, {"US-", false}, {"US-CALI", false}, {"US_CA", false}, {"California", false},
	} {
		err := Code(tc.code)
		if tc.ok {
			assert.NoError(t, err, tc.code)
		} else if assert.Error(t, err, tc.code) {
			assert.Contains(t, err.Error(), "ISO 3166-2")
		}
	}
}

func TestValidateRefusesEachBadField(t *testing.T) {
	in := func(code string, f func(*Jurisdiction)) func(*Rules) {
		return func(r *Rules) {
			j := r.Jurisdictions[code]
			f(&j)
			r.Jurisdictions[code] = j
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Rules)
		want   string
	}{
		{"version", func(r *Rules) { r.Version = "" }, `version: must be set`},
		{"default missing", func(r *Rules) { r.Default = "" }, `default: must name a jurisdiction`},
		{"default unknown", func(r *Rules) { r.Default = "US-ZZ" }, `default: "US-ZZ" is not in jurisdictions`},
		{"days zero", in("US-TX", func(j *Jurisdiction) { j.Decide.Days = 0 }), `jurisdictions["US-TX"].decide.days: must be > 0`},
		{"days huge", in("US-TX", func(j *Jurisdiction) { j.Pay.Days = 1500 }), `jurisdictions["US-TX"].pay.days: must be at most 366`},
		{"unit", in("US-CA", func(j *Jurisdiction) { j.Acknowledge.Unit = "weekdays" }), `jurisdictions["US-CA"].acknowledge.unit: must be "calendar_days" or "business_days", not "weekdays"`},
		{"starts", in("US-FL", func(j *Jurisdiction) { j.Pay.Starts = FromDecision }), `jurisdictions["US-FL"].pay.starts: must be one of`},
		{"acknowledge starts", in("US", func(j *Jurisdiction) { j.Acknowledge.Starts = FromProofOfLoss }), `jurisdictions["US"].acknowledge.starts: must be one of ["notice"], not "proof_of_loss"`},
		{"cite", in("US", func(j *Jurisdiction) { j.StatusEvery.Cite = "" }), `jurisdictions["US"].status_every.cite: must cite`},
		{"review window starts", in("US-CA", func(j *Jurisdiction) { j.ReviewWindow.Starts = FromNotice }), `jurisdictions["US-CA"].review_window.starts: must be one of ["decision"]`},
		{"extension starts", in("US-TX", func(j *Jurisdiction) { j.Extension.Starts = FromAcceptance }), `jurisdictions["US-TX"].extension.starts: must be one of`},
		{"status every alone", in("US-CA", func(j *Jurisdiction) { j.StatusFirst = nil }), `jurisdictions["US-CA"].status_every: needs status_first`},
		{"extension alone", in("US-TX", func(j *Jurisdiction) { j.StatusFirst = nil }), `jurisdictions["US-TX"].extension: needs status_first`},
		{"deferring without letters", in("US-CA", func(j *Jurisdiction) { j.StatusEvery = nil }), `jurisdictions["US-CA"].status_defers: needs status_first and status_every`},
		{"deferring and extending", in("US-TX", func(j *Jurisdiction) {
			j.StatusDefers, j.StatusEvery = true, &Clock{Days: 30, Unit: CalendarDays, Starts: FromStatus, Cite: "a rule of our own"}
		}), `jurisdictions["US-TX"].status_defers: and extension both move the decision`},
		{"zone", in("US-TX", func(j *Jurisdiction) { j.TimeZone = "America/Austin" }), `jurisdictions["US-TX"].time_zone: "America/Austin" is not a known IANA time zone`},
		{"zone missing", in("US-TX", func(j *Jurisdiction) { j.TimeZone = "" }), `jurisdictions["US-TX"].time_zone: must be an IANA time zone`},
		{"calendar", in("US-TX", func(j *Jurisdiction) { j.Calendar = "us-texas" }), `jurisdictions["US-TX"].calendar: "us-texas" is not in calendars`},
		{"name", in("US-FL", func(j *Jurisdiction) { j.Name = "" }), `jurisdictions["US-FL"].name: must be set`},
		{"regulator", in("US-FL", func(j *Jurisdiction) { j.Regulator = "" }), `jurisdictions["US-FL"].regulator: must say who`},
		{"appeal", in("US-FL", func(j *Jurisdiction) { j.Appeal = "" }), `jurisdictions["US-FL"].appeal: must say how`},
		{"code", func(r *Rules) { r.Jurisdictions["California"] = r.Jurisdictions["US-CA"] },
			`jurisdictions["California"]: jurisdiction "California" is not an ISO 3166-2 code`},
		{"holiday date", func(r *Rules) { r.Calendars["us-tx"].Holidays[3] = "2026-02-30" }, `calendars["us-tx"].holidays[3]: "2026-02-30" is not a date (YYYY-MM-DD)`},
		{"holiday twice", func(r *Rules) {
			c := r.Calendars["us-federal"]
			c.Holidays = append(c.Holidays, c.Holidays[0])
			r.Calendars["us-federal"] = c
		}, `calendars["us-federal"].holidays[55]: 2026-01-01 is listed twice`},
		{"calendar name", func(r *Rules) { c := r.Calendars["us-federal"]; c.Name = ""; r.Calendars["us-federal"] = c }, `calendars["us-federal"].name: must be set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Shipped()
			tc.mutate(&r)
			err := r.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n", "only the broken field is named")
		})
	}
}

// A clock of exactly the longest allowed days is valid.
func TestClocksUpToMaxDaysAreValid(t *testing.T) {
	r := Shipped()
	j := r.Jurisdictions["US-TX"]
	j.Pay.Days = maxDays
	r.Jurisdictions["US-TX"] = j
	assert.NoError(t, r.Validate())
}

func TestLoad(t *testing.T) {
	r, err := Load("")
	require.NoError(t, err)
	assert.Equal(t, Shipped(), r)

	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	own := Shipped()
	own.Version = "acme-2027-01"
	j := own.Jurisdictions["US-TX"]
	j.Pay.Days = 3
	own.Jurisdictions["US-TX"] = j
	data, err := json.Marshal(own)
	require.NoError(t, err)
	got, err := Load(write("own.json", data))
	require.NoError(t, err)
	assert.Equal(t, own, got)

	unknown := strings.Replace(string(data), `"pay":{`, `"pay":{"business":true,`, 1)
	_, err = Load(write("unknown.json", []byte(unknown)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown field "business"`)

	_, err = Load(write("trailing.json", append(data, []byte(`{}`)...)))
	assert.ErrorContains(t, err, "data after")

	j.Pay.Days = 0
	own.Jurisdictions["US-TX"] = j
	data, err = json.Marshal(own)
	require.NoError(t, err)
	_, err = Load(write("invalid.json", data))
	assert.ErrorContains(t, err, `jurisdictions["US-TX"].pay.days: must be > 0`)

	_, err = Load(filepath.Join(dir, "absent.json"))
	assert.Error(t, err)
}

func TestRecord(t *testing.T) {
	r := Shipped()
	rec, err := r.Record("")
	require.NoError(t, err)
	assert.Equal(t, "US", rec.Code, "no jurisdiction on the policy: the default")
	assert.Equal(t, r.Version, rec.RuleSet)

	rec, err = r.Record("US-TX")
	require.NoError(t, err)
	assert.Equal(t, r.Calendars["us-tx"], rec.Holidays)
	assert.Equal(t, r.Jurisdictions["US-TX"], rec.Jurisdiction)

	// What history holds decodes to the same law, with no rules file.
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	var back Recorded
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, rec, back)
	law, err := back.Law()
	require.NoError(t, err)
	assert.Equal(t, "America/Chicago", law.Location().String())
	assert.False(t, law.BusinessDay(time.Date(2026, 11, 27, 12, 0, 0, 0, law.Location())))

	_, err = r.Record("US-ZZ")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"US-ZZ"`)
	assert.Contains(t, err.Error(), r.Version)
}

func TestLawRefusesWhatItCannotLoad(t *testing.T) {
	rec, err := Shipped().Record("US-CA")
	require.NoError(t, err)
	zone := rec
	zone.Jurisdiction.TimeZone = "Pacific/Atlantis"
	_, err = zone.Law()
	assert.ErrorContains(t, err, `time zone "Pacific/Atlantis"`)

	day := rec
	day.Holidays.Holidays = []string{"2026-7-4"}
	_, err = day.Law()
	assert.ErrorContains(t, err, `holiday "2026-7-4"`)
}
