package statute

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func lawOf(t *testing.T, code string) Law {
	t.Helper()
	rec, err := Shipped().Record(code)
	require.NoError(t, err)
	l, err := rec.Law()
	require.NoError(t, err)
	return l
}

// local is a wall-clock time in the law's zone: "2026-07-02 15:04".
func local(t *testing.T, l Law, s string) time.Time {
	t.Helper()
	v, err := time.ParseInLocation("2006-01-02 15:04", s, l.Location())
	require.NoError(t, err)
	return v
}

func ptr(t time.Time) *time.Time { return &t }

func TestBusinessDay(t *testing.T) {
	ca, tx := lawOf(t, "US-CA"), lawOf(t, "US-TX")
	for _, tc := range []struct {
		day          string
		federal, tex bool
		why          string
	}{
		{"2026-07-02", true, true, "a Thursday"},
		{"2026-07-03", false, true, "July 4 is a Saturday: federal offices observe Friday, Texas does not move it"},
		{"2026-07-04", false, false, "a Saturday"},
		{"2026-07-05", false, false, "a Sunday"},
		{"2026-07-06", true, true, "a Monday"},
		{"2026-10-12", false, true, "Columbus Day: federal, not Texas"},
		{"2026-11-26", false, false, "Thanksgiving"},
		{"2026-11-27", true, false, "the Friday after Thanksgiving: Texas only"},
		{"2026-12-24", true, false, "December 24: Texas only"},
		{"2027-12-31", false, true, "January 1, 2028 is a Saturday: federal offices observe December 31"},
		{"2029-12-31", true, true, "a Monday"},
		{"2030-01-01", false, false, "New Year's Day"},
		{"2030-01-02", true, true, "a Wednesday"},
		{"2026-03-09", true, true, "the Monday after clocks go forward"},
		{"2026-11-02", true, true, "the Monday after clocks go back"},
	} {
		t.Run(tc.day, func(t *testing.T) {
			assert.Equal(t, tc.federal, ca.BusinessDay(local(t, ca, tc.day+" 12:00")), "us-federal: %s", tc.why)
			assert.Equal(t, tc.tex, tx.BusinessDay(local(t, tx, tc.day+" 12:00")), "us-tx: %s", tc.why)
		})
	}

	// The day is the jurisdiction's: 05:00 UTC on Friday July 3 is still
	// Thursday evening in California.
	instant := time.Date(2026, 7, 3, 5, 0, 0, 0, time.UTC)
	assert.True(t, ca.BusinessDay(instant))
	assert.False(t, ca.BusinessDay(instant.Add(3*time.Hour)), "08:00 UTC is Friday, the observed holiday, in California")
}

func TestDue(t *testing.T) {
	days := func(n int, u Unit) Clock { return Clock{Days: n, Unit: u} }
	for _, tc := range []struct {
		name, code string
		clock      Clock
		from, want string // local wall times
	}{
		{"calendar days end at midnight", "US-CA", days(15, CalendarDays), "2026-06-01 10:00", "2026-06-17 00:00"},
		{"the day of the event does not count", "US-CA", days(1, CalendarDays), "2026-06-01 23:59", "2026-06-03 00:00"},
		{"business days skip the weekend", "US-TX", days(1, BusinessDays), "2026-06-05 09:00", "2026-06-09 00:00"},
		{"an observed holiday is skipped", "US-CA", days(1, BusinessDays), "2026-07-02 09:00", "2026-07-07 00:00"},
		{"a holiday Texas does not move is not", "US-TX", days(1, BusinessDays), "2026-07-02 09:00", "2026-07-04 00:00"},
		{"year end: Dec 31 to Jan 2", "US-CA", days(1, BusinessDays), "2029-12-31 16:00", "2030-01-03 00:00"},
		{"year end over a weekend", "US-TX", days(1, BusinessDays), "2026-12-31 16:00", "2027-01-05 00:00"},
		{"Texas Christmas week", "US-TX", days(5, BusinessDays), "2026-12-22 16:00", "2027-01-01 00:00"},
		{"Texas 15 business days over Thanksgiving", "US-TX", days(15, BusinessDays), "2026-11-16 09:00", "2026-12-10 00:00"},
		{"spring forward inside the period", "US-CA", days(15, CalendarDays), "2026-03-02 23:30", "2026-03-18 00:00"},
		{"spring forward weekend, business days", "US-TX", days(1, BusinessDays), "2026-03-06 17:00", "2026-03-10 00:00"},
		{"fall back inside the period", "US-CA", days(40, CalendarDays), "2026-10-01 08:00", "2026-11-11 00:00"},
		{"fall back weekend, business days", "US-FL", days(1, BusinessDays), "2026-10-30 17:00", "2026-11-03 00:00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lawOf(t, tc.code)
			got := l.Due(tc.clock, local(t, l, tc.from))
			assert.Equal(t, local(t, l, tc.want), got)
			assert.Equal(t, l.Location(), got.Location())
			h, m, s := got.Clock()
			assert.Equal(t, [3]int{0, 0, 0}, [3]int{h, m, s}, "a deadline is a local midnight")
		})
	}

	// Across the spring change, 15 days and 30 minutes on the wall clock
	// are an hour less in elapsed time: counted in dates, never in 24-hour
	// steps.
	ca := lawOf(t, "US-CA")
	from := local(t, ca, "2026-03-02 23:30")
	assert.Equal(t, 15*24*time.Hour+30*time.Minute-time.Hour, ca.Due(days(15, CalendarDays), from).Sub(from))

	// The same instant given in another zone counts from the jurisdiction's day.
	assert.Equal(t, local(t, ca, "2026-06-17 00:00"), ca.Due(days(15, CalendarDays), time.Date(2026, 6, 2, 6, 0, 0, 0, time.UTC)),
		"06:00 UTC on June 2 is still June 1 in California")
}

// Each shipped jurisdiction's clocks from one start, Monday June 1, 2026,
// 10:00 local; the dates were counted by hand on a calendar.
func TestDueForEachShippedJurisdiction(t *testing.T) {
	for _, tc := range []struct {
		code string
		want map[string]string // clock → due, local
	}{
		{"US", map[string]string{"acknowledge": "2026-06-17", "decide": "2026-06-23", "status_first": "2026-06-23",
			"status_every": "2026-07-17", "pay": "2026-07-02", "review_window": "2026-07-02"}},
		{"US-CA", map[string]string{"acknowledge": "2026-06-17", "decide": "2026-07-12", "status_first": "2026-07-12",
			"status_every": "2026-07-02", "pay": "2026-07-02", "review_window": "2026-07-02"}},
		// 15 business days in Texas skip June 19, Emancipation Day.
		{"US-TX", map[string]string{"acknowledge": "2026-06-17", "decide": "2026-06-24", "status_first": "2026-06-24",
			"extension": "2026-07-17", "pay": "2026-06-09", "review_window": "2026-07-02"}},
		{"US-FL", map[string]string{"acknowledge": "2026-06-09", "decide": "2026-08-01", "status_first": "2026-07-02",
			"status_every": "2026-07-02", "pay": "2026-08-01", "review_window": "2026-07-02"}},
	} {
		t.Run(tc.code, func(t *testing.T) {
			l := lawOf(t, tc.code)
			j := l.Jurisdiction()
			clocks := map[string]*Clock{"acknowledge": &j.Acknowledge, "decide": &j.Decide, "pay": &j.Pay, "review_window": &j.ReviewWindow,
				"status_first": j.StatusFirst, "status_every": j.StatusEvery, "extension": j.Extension}
			from := local(t, l, "2026-06-01 10:00")
			for name, c := range clocks {
				want, ok := tc.want[name]
				if !ok {
					assert.Nil(t, c, "%s has no %s clock", tc.code, name)
					continue
				}
				require.NotNil(t, c, name)
				assert.Equal(t, local(t, l, want+" 00:00"), l.Due(*c, from), name)
			}
		})
	}
}

func TestClocks(t *testing.T) {
	type want struct {
		clock        string
		limit        int
		started, due string // local, "" for nil
		met          string
		breached     bool
	}
	for _, tc := range []struct {
		name   string
		code   string
		events func(l Law) Events
		now    string
		want   []want
	}{
		{
			name: "acknowledged a minute late", code: "US-CA", now: "2026-06-20 12:00",
			events: func(l Law) Events {
				return Events{NoticeAt: local(t, l, "2026-06-01 10:00"), AcknowledgedAt: ptr(local(t, l, "2026-06-17 00:00"))}
			},
			want: []want{
				{"acknowledge", 15, "2026-06-01 10:00", "2026-06-17 00:00", "2026-06-17 00:00", true},
				{"decide", 40, "", "", "", false},
				{"pay", 30, "", "", "", false},
			},
		},
		{
			name: "acknowledged on the last minute", code: "US-CA", now: "2026-06-20 12:00",
			events: func(l Law) Events {
				return Events{NoticeAt: local(t, l, "2026-06-01 10:00"), AcknowledgedAt: ptr(local(t, l, "2026-06-16 23:59"))}
			},
			want: []want{
				{"acknowledge", 15, "2026-06-01 10:00", "2026-06-17 00:00", "2026-06-16 23:59", false},
				{"decide", 40, "", "", "", false},
				{"pay", 30, "", "", "", false},
			},
		},
		{
			name: "unacknowledged past due", code: "US-FL", now: "2026-06-09 00:00",
			events: func(l Law) Events { return Events{NoticeAt: local(t, l, "2026-06-01 10:00")} },
			want: []want{
				{"acknowledge", 7, "2026-06-01 10:00", "2026-06-09 00:00", "", true},
				{"decide", 60, "2026-06-01 10:00", "2026-08-01 00:00", "", false},
				{"pay", 60, "2026-06-01 10:00", "2026-08-01 00:00", "", false},
			},
		},
		{
			// November 11 (Veterans Day) and 26–27 (Thanksgiving, the day
			// after) are Texas holidays: the 15th business day after
			// November 3 is Wednesday the 25th.
			name: "decided on the last business day before a holiday", code: "US-TX", now: "2026-12-10 12:00",
			events: func(l Law) Events {
				return Events{
					NoticeAt: local(t, l, "2026-10-26 09:00"), AcknowledgedAt: ptr(local(t, l, "2026-10-27 09:00")),
					ProofOfLossAt: ptr(local(t, l, "2026-11-03 11:00")),
					DecidedAt:     ptr(local(t, l, "2026-11-25 16:30")), AcceptedAt: ptr(local(t, l, "2026-11-25 16:30")),
					PaidAt: ptr(local(t, l, "2026-12-04 10:00")),
				}
			},
			want: []want{
				{"acknowledge", 15, "2026-10-26 09:00", "2026-11-11 00:00", "2026-10-27 09:00", false},
				{"decide", 15, "2026-11-03 11:00", "2026-11-26 00:00", "2026-11-25 16:30", false},
				{"pay", 5, "2026-11-25 16:30", "2026-12-05 00:00", "2026-12-04 10:00", false},
			},
		},
		{
			name: "decided the first business day after the holiday, no letter", code: "US-TX", now: "2026-12-10 12:00",
			events: func(l Law) Events {
				return Events{
					NoticeAt: local(t, l, "2026-10-26 09:00"), AcknowledgedAt: ptr(local(t, l, "2026-10-27 09:00")),
					ProofOfLossAt: ptr(local(t, l, "2026-11-03 11:00")), DecidedAt: ptr(local(t, l, "2026-11-30 09:00")), Denied: true,
				}
			},
			want: []want{
				{"acknowledge", 15, "2026-10-26 09:00", "2026-11-11 00:00", "2026-10-27 09:00", false},
				{"decide", 15, "2026-11-03 11:00", "2026-11-26 00:00", "2026-11-30 09:00", true},
				{"status", 15, "2026-11-03 11:00", "2026-11-26 00:00", "", true},
			},
		},
		{
			// 40 days after proof of claim, then every 30 days from the last
			// letter: the third went out four days late; the fourth is not
			// yet due.
			// California lets timely letters defer the decision
			// (10 CCR §2695.7(c)(1)): the chain of letters in time ends
			// with the late one of September 12, so the decision was due
			// before the letter after August 8's, on September 8.
			name: "status letters every interval", code: "US-CA", now: "2026-09-20 12:00",
			events: func(l Law) Events {
				return Events{
					NoticeAt: local(t, l, "2026-05-28 10:00"), AcknowledgedAt: ptr(local(t, l, "2026-05-29 10:00")),
					ProofOfLossAt: ptr(local(t, l, "2026-06-01 10:00")),
					StatusLetters: []time.Time{local(t, l, "2026-09-12 09:00"), local(t, l, "2026-07-10 09:00"), local(t, l, "2026-08-08 09:00")},
				}
			},
			want: []want{
				{"acknowledge", 15, "2026-05-28 10:00", "2026-06-13 00:00", "2026-05-29 10:00", false},
				{"decide", 30, "2026-08-08 09:00", "2026-09-08 00:00", "", true},
				{"pay", 30, "", "", "", false},
				{"status", 40, "2026-06-01 10:00", "2026-07-12 00:00", "2026-07-10 09:00", false},
				{"status", 30, "2026-07-10 09:00", "2026-08-10 00:00", "2026-08-08 09:00", false},
				{"status", 30, "2026-08-08 09:00", "2026-09-08 00:00", "2026-09-12 09:00", true},
				{"status", 30, "2026-09-12 09:00", "2026-10-13 00:00", "", false},
			},
		},
		{
			name: "decided before any letter was due", code: "US-CA", now: "2026-09-20 12:00",
			events: func(l Law) Events {
				return Events{
					NoticeAt: local(t, l, "2026-05-28 10:00"), AcknowledgedAt: ptr(local(t, l, "2026-05-29 10:00")),
					ProofOfLossAt: ptr(local(t, l, "2026-06-01 10:00")), DecidedAt: ptr(local(t, l, "2026-07-11 23:00")),
					AcceptedAt: ptr(local(t, l, "2026-07-11 23:00")), PaidAt: ptr(local(t, l, "2026-07-20 10:00")),
				}
			},
			want: []want{
				{"acknowledge", 15, "2026-05-28 10:00", "2026-06-13 00:00", "2026-05-29 10:00", false},
				{"decide", 40, "2026-06-01 10:00", "2026-07-12 00:00", "2026-07-11 23:00", false},
				{"pay", 30, "2026-07-11 23:00", "2026-08-11 00:00", "2026-07-20 10:00", false},
			},
		},
		{
			// §542.056(d): the letter within the 15 business days moves the
			// decision to the 45th day after the letter.
			name: "Texas extension earned", code: "US-TX", now: "2026-08-10 12:00",
			events: func(l Law) Events {
				return Events{
					NoticeAt: local(t, l, "2026-05-26 10:00"), AcknowledgedAt: ptr(local(t, l, "2026-05-27 10:00")),
					ProofOfLossAt: ptr(local(t, l, "2026-06-01 09:00")), StatusLetters: []time.Time{local(t, l, "2026-06-22 10:00")},
					DecidedAt: ptr(local(t, l, "2026-08-05 15:00")), AcceptedAt: ptr(local(t, l, "2026-08-05 15:00")),
					PaidAt: ptr(local(t, l, "2026-08-07 10:00")),
				}
			},
			want: []want{
				{"acknowledge", 15, "2026-05-26 10:00", "2026-06-11 00:00", "2026-05-27 10:00", false},
				{"decide", 45, "2026-06-22 10:00", "2026-08-07 00:00", "2026-08-05 15:00", false},
				{"pay", 5, "2026-08-05 15:00", "2026-08-13 00:00", "2026-08-07 10:00", false},
				{"status", 15, "2026-06-01 09:00", "2026-06-24 00:00", "2026-06-22 10:00", false},
			},
		},
		{
			name: "Texas letter too late earns nothing", code: "US-TX", now: "2026-08-10 12:00",
			events: func(l Law) Events {
				return Events{
					NoticeAt: local(t, l, "2026-05-26 10:00"), AcknowledgedAt: ptr(local(t, l, "2026-05-27 10:00")),
					ProofOfLossAt: ptr(local(t, l, "2026-06-01 09:00")), StatusLetters: []time.Time{local(t, l, "2026-06-24 08:00")},
					DecidedAt: ptr(local(t, l, "2026-08-05 15:00")), Denied: true,
				}
			},
			want: []want{
				{"acknowledge", 15, "2026-05-26 10:00", "2026-06-11 00:00", "2026-05-27 10:00", false},
				{"decide", 15, "2026-06-01 09:00", "2026-06-24 00:00", "2026-08-05 15:00", true},
				{"status", 15, "2026-06-01 09:00", "2026-06-24 00:00", "2026-06-24 08:00", true},
			},
		},
		{
			name: "denied: no pay clock", code: "US", now: "2026-07-01 12:00",
			events: func(l Law) Events {
				return Events{
					NoticeAt: local(t, l, "2026-06-01 10:00"), AcknowledgedAt: ptr(local(t, l, "2026-06-02 10:00")),
					ProofOfLossAt: ptr(local(t, l, "2026-06-05 10:00")), DecidedAt: ptr(local(t, l, "2026-06-12 10:00")), Denied: true,
				}
			},
			want: []want{
				{"acknowledge", 15, "2026-06-01 10:00", "2026-06-17 00:00", "2026-06-02 10:00", false},
				{"decide", 21, "2026-06-05 10:00", "2026-06-27 00:00", "2026-06-12 10:00", false},
			},
		},
		{
			name: "only notice: later clocks have not started", code: "US", now: "2026-06-02 10:00",
			events: func(l Law) Events { return Events{NoticeAt: local(t, l, "2026-06-01 10:00")} },
			want: []want{
				{"acknowledge", 15, "2026-06-01 10:00", "2026-06-17 00:00", "", false},
				{"decide", 21, "", "", "", false},
				{"pay", 30, "", "", "", false},
			},
		},
		{
			// Florida's pay-or-deny clock runs from notice, so an undecided
			// claim is late on both.
			name: "Florida undecided past 60 days", code: "US-FL", now: "2026-08-01 00:00",
			events: func(l Law) Events {
				return Events{
					NoticeAt: local(t, l, "2026-06-01 10:00"), AcknowledgedAt: ptr(local(t, l, "2026-06-03 10:00")),
					ProofOfLossAt: ptr(local(t, l, "2026-06-10 10:00")), StatusLetters: []time.Time{local(t, l, "2026-07-09 10:00")},
				}
			},
			want: []want{
				{"acknowledge", 7, "2026-06-01 10:00", "2026-06-09 00:00", "2026-06-03 10:00", false},
				{"decide", 60, "2026-06-01 10:00", "2026-08-01 00:00", "", true},
				{"pay", 60, "2026-06-01 10:00", "2026-08-01 00:00", "", true},
				{"status", 30, "2026-06-10 10:00", "2026-07-11 00:00", "2026-07-09 10:00", false},
				{"status", 30, "2026-07-09 10:00", "2026-08-09 00:00", "", false},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lawOf(t, tc.code)
			at := func(s string) *time.Time {
				if s == "" {
					return nil
				}
				return ptr(local(t, l, s))
			}
			got := l.Clocks(tc.events(l), local(t, l, tc.now))
			require.Len(t, got, len(tc.want))
			for i, w := range tc.want {
				g := got[i]
				assert.Equal(t, w.clock, g.Clock, "clock %d", i)
				assert.Equal(t, w.limit, g.Limit, "%s limit", w.clock)
				assert.Equal(t, at(w.started), inZone(g.StartedAt, l), "%s started_at", w.clock)
				assert.Equal(t, at(w.due), inZone(g.DueAt, l), "%s due_at", w.clock)
				assert.Equal(t, at(w.met), inZone(g.MetAt, l), "%s met_at", w.clock)
				assert.Equal(t, w.breached, g.Breached, "%s breached", w.clock)
				assert.NotEmpty(t, g.Cite, "%s cite", w.clock)
			}
		})
	}
}

func inZone(t *time.Time, l Law) *time.Time {
	if t == nil {
		return nil
	}
	return ptr(t.In(l.Location()))
}

func TestTexasExtensionCitesItself(t *testing.T) {
	l := lawOf(t, "US-TX")
	e := Events{
		NoticeAt: local(t, l, "2026-05-26 10:00"), ProofOfLossAt: ptr(local(t, l, "2026-06-01 09:00")),
		StatusLetters: []time.Time{local(t, l, "2026-06-22 10:00")},
	}
	decide := l.Clocks(e, local(t, l, "2026-06-30 10:00"))[1]
	assert.Equal(t, CalendarDays, decide.Unit)
	assert.Contains(t, decide.Cite, "§542.056(d)")
	_, more := l.NextStatus(e)
	assert.False(t, more, "Texas asks for the one notice, not a series")
}

func TestNextStatus(t *testing.T) {
	us := lawOf(t, "US")
	e := Events{NoticeAt: local(t, us, "2026-05-28 10:00"), ProofOfLossAt: ptr(local(t, us, "2026-06-01 10:00"))}
	type step struct {
		letter string // sent before asking; "" for none
		due    string
		ok     bool
	}
	for i, s := range []step{
		{"", "2026-06-23 00:00", true},                 // 21 days after proof of loss
		{"2026-06-20 15:00", "2026-08-05 00:00", true}, // then 45 days after each letter
		{"2026-08-03 09:00", "2026-09-18 00:00", true},
		{"2026-09-20 09:00", "2026-11-05 00:00", true}, // a late letter restarts the interval from itself
	} {
		if s.letter != "" {
			e.StatusLetters = append(e.StatusLetters, local(t, us, s.letter))
		}
		due, ok := us.NextStatus(e)
		assert.Equal(t, s.ok, ok, "step %d", i)
		assert.Equal(t, local(t, us, s.due), due, "step %d", i)
	}
	e.DecidedAt = ptr(local(t, us, "2026-10-01 10:00"))
	_, ok := us.NextStatus(e)
	assert.False(t, ok, "decided: no more letters")

	_, ok = us.NextStatus(Events{NoticeAt: local(t, us, "2026-05-28 10:00")})
	assert.False(t, ok, "no proof of loss yet: the status clock has not started")

	early := Events{NoticeAt: local(t, us, "2026-05-28 10:00"), ProofOfLossAt: ptr(local(t, us, "2026-06-01 10:00")),
		StatusLetters: []time.Time{local(t, us, "2026-05-30 10:00")}}
	due, ok := us.NextStatus(early)
	assert.True(t, ok)
	assert.Equal(t, local(t, us, "2026-06-23 00:00"), due, "a letter before proof of loss is not a status letter")

	rec, err := Shipped().Record("US")
	require.NoError(t, err)
	rec.Jurisdiction.StatusFirst, rec.Jurisdiction.StatusEvery = nil, nil
	none, err := rec.Law()
	require.NoError(t, err)
	_, ok = none.NextStatus(Events{NoticeAt: local(t, us, "2026-05-28 10:00"), ProofOfLossAt: ptr(local(t, us, "2026-06-01 10:00"))})
	assert.False(t, ok, "a rule set without status letters")
}

// The JSON is what `claimsctl exam` prints (DESIGN.md, "Statutory rules").
func TestClockStateJSON(t *testing.T) {
	l := lawOf(t, "US-TX")
	got := l.Clocks(Events{NoticeAt: time.Date(2026, 6, 1, 15, 0, 0, 0, time.UTC)}, time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC))
	data, err := json.Marshal(got[:2])
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"clock":"acknowledge","limit":15,"unit":"calendar_days","started_at":"2026-06-01T15:00:00Z","due_at":"2026-06-17T00:00:00-05:00","met_at":null,"breached":false,"cite":`+quote(t, got[0].Cite)+`},
		{"clock":"decide","limit":15,"unit":"business_days","started_at":null,"due_at":null,"met_at":null,"breached":false,"cite":`+quote(t, got[1].Cite)+`}
	]`, string(data))
}

func quote(t *testing.T, s string) string {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

// Elapsed counts as Due does: a clock met just before its due instant has
// elapsed exactly its limit, in its unit.
func TestElapsed(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		unit       Unit
		from, to   string
		want       int
	}{
		{"same day", "US-CA", CalendarDays, "2026-06-01 10:00", "2026-06-01 23:00", 0},
		{"next day", "US-CA", CalendarDays, "2026-06-01 23:59", "2026-06-02 00:01", 1},
		{"business days skip the weekend", "US-TX", BusinessDays, "2026-06-05 09:00", "2026-06-08 09:00", 1},
		{"Texas Christmas week", "US-TX", BusinessDays, "2026-12-22 16:00", "2026-12-31 12:00", 5},
		{"backwards is nothing", "US-CA", CalendarDays, "2026-06-02 10:00", "2026-06-01 10:00", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := lawOf(t, tc.code)
			assert.Equal(t, tc.want, l.Elapsed(tc.unit, local(t, l, tc.from), local(t, l, tc.to)))
		})
	}
	// Met on the last moment before Due: exactly the limit.
	tx := lawOf(t, "US-TX")
	j := tx.Jurisdiction()
	from := local(t, tx, "2026-11-16 09:00")
	assert.Equal(t, j.Decide.Days, tx.Elapsed(j.Decide.Unit, from, tx.Due(j.Decide, from).Add(-time.Minute)))
}

// Where the rules let timely status letters defer the decision, a claim
// written to on time is decided in time after the decision clock's own
// days; a late first letter defers nothing; Florida's 60 days stand.
func TestStatusLettersDefer(t *testing.T) {
	ca := lawOf(t, "US-CA")
	proof := local(t, ca, "2026-06-01 10:00")
	decided := local(t, ca, "2026-08-20 10:00") // day 80
	e := Events{NoticeAt: proof, ProofOfLossAt: &proof, DecidedAt: &decided,
		StatusLetters: []time.Time{local(t, ca, "2026-07-10 09:00"), local(t, ca, "2026-08-08 09:00")}}
	d := ca.Clocks(e, decided)[1]
	require.Equal(t, "decide", d.Clock)
	assert.False(t, d.Breached, "decided before the next letter was due")
	assert.Equal(t, local(t, ca, "2026-09-08 00:00"), *d.DueAt)
	assert.Contains(t, d.Cite, "deferred by timely status letters")

	e.StatusLetters = []time.Time{local(t, ca, "2026-07-12 09:00")} // after the 40 days
	d = ca.Clocks(e, decided)[1]
	assert.True(t, d.Breached, "a late letter defers nothing")
	assert.Equal(t, local(t, ca, "2026-07-12 00:00"), *d.DueAt)

	fl := lawOf(t, "US-FL")
	notice := local(t, fl, "2026-06-01 10:00")
	late := local(t, fl, "2026-08-05 10:00") // day 65
	f := Events{NoticeAt: notice, ProofOfLossAt: &notice, DecidedAt: &late,
		StatusLetters: []time.Time{local(t, fl, "2026-06-30 10:00"), local(t, fl, "2026-07-29 10:00")}}
	assert.True(t, fl.Clocks(f, late)[1].Breached, "Florida: pay or deny within 60 days, letters or not")
}

// A status letter sent early, whose next letter would fall due before the
// decision does, defers nothing: the decision keeps its own 40 days, never
// a shorter clock run from the letter.
func TestAnEarlyLetterNeverShortensTheDecision(t *testing.T) {
	ca := lawOf(t, "US-CA")
	proof := local(t, ca, "2026-06-01 10:00")
	decided := local(t, ca, "2026-07-08 10:00") // day 37
	e := Events{NoticeAt: proof, ProofOfLossAt: &proof, DecidedAt: &decided,
		StatusLetters: []time.Time{local(t, ca, "2026-06-05 09:00")}} // next due July 6
	d := ca.Clocks(e, decided)[1]
	require.Equal(t, "decide", d.Clock)
	assert.Equal(t, local(t, ca, "2026-07-12 00:00"), *d.DueAt)
	assert.Equal(t, 40, d.Limit)
	assert.False(t, d.Breached, "decided on day 37 of 40")
	assert.NotContains(t, d.Cite, "deferred")
}

// An extension is earned only by a first status letter sent before both
// the decision and the letter itself were due, and it never shortens the
// decision: each on its own, in a rule set whose status letter falls due
// before the decision (10 against 15 business days), and one whose
// extension is shorter than the decision's own clock.
func TestAnExtensionIsEarnedOnTimeAndNeverShortens(t *testing.T) {
	rec, err := Shipped().Record("US-TX")
	require.NoError(t, err)
	law := func(edit func(j *Jurisdiction)) Law {
		r := rec
		ext, first := *r.Jurisdiction.Extension, *r.Jurisdiction.StatusFirst
		r.Jurisdiction.Extension, r.Jurisdiction.StatusFirst = &ext, &first
		edit(&r.Jurisdiction)
		l, err := r.Law()
		require.NoError(t, err)
		return l
	}
	// Proof of loss on Monday June 1: 15 business days end Tuesday June 23
	// (June 19 is a holiday), 10 end Monday June 15.
	events := func(l Law, letter string) Events {
		return Events{NoticeAt: local(t, l, "2026-05-26 10:00"), ProofOfLossAt: ptr(local(t, l, "2026-06-01 09:00")),
			StatusLetters: []time.Time{local(t, l, letter)}}
	}

	early := law(func(j *Jurisdiction) { j.StatusFirst.Days = 10 })
	d := early.Clocks(events(early, "2026-06-17 10:00"), local(t, early, "2026-06-18 10:00"))[1]
	assert.Equal(t, BusinessDays, d.Unit, "a first letter after its own due date earns nothing")
	assert.Equal(t, 15, d.Limit)
	d = early.Clocks(events(early, "2026-06-12 10:00"), local(t, early, "2026-06-18 10:00"))[1]
	assert.Equal(t, CalendarDays, d.Unit, "on time: the extension")

	short := law(func(j *Jurisdiction) { j.Extension.Days = 3 })
	d = short.Clocks(events(short, "2026-06-03 10:00"), local(t, short, "2026-06-10 10:00"))[1]
	assert.Equal(t, BusinessDays, d.Unit, "an extension to June 6 would shorten a clock that ends June 23")
	assert.Equal(t, local(t, short, "2026-06-24 00:00"), *d.DueAt)
	assert.False(t, d.Breached)
}
