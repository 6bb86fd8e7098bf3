package statute

import (
	"fmt"
	"slices"
	"time"
)

// Law is a recorded rule set made ready to count with: its zone loaded and
// its holidays parsed. Everything it computes is a pure function of its
// arguments (never the wall clock), so workflow code may call it and a
// replay gets the same answers. Make one with Recorded.Law.
type Law struct {
	jurisdiction Jurisdiction
	location     *time.Location
	holidays     map[civil]bool
}

// Law loads the recorded rule set's time zone and holidays.
func (r Recorded) Law() (Law, error) {
	loc, err := time.LoadLocation(r.Jurisdiction.TimeZone)
	if err != nil {
		return Law{}, fmt.Errorf("jurisdiction %q: time zone %q: %w", r.Code, r.Jurisdiction.TimeZone, err)
	}
	holidays := make(map[civil]bool, len(r.Holidays.Holidays))
	for _, h := range r.Holidays.Holidays {
		d, err := parseDate(h)
		if err != nil {
			return Law{}, fmt.Errorf("jurisdiction %q: holiday %q is not a date (YYYY-MM-DD)", r.Code, h)
		}
		holidays[d] = true
	}
	return Law{jurisdiction: r.Jurisdiction, location: loc, holidays: holidays}, nil
}

// Jurisdiction is the rule set the law was made from.
func (l Law) Jurisdiction() Jurisdiction { return l.jurisdiction }

// Location is the zone the jurisdiction's days are counted in.
func (l Law) Location() *time.Location { return l.location }

// BusinessDay reports whether t falls, in the jurisdiction's zone, on a
// day that is neither a Saturday, a Sunday nor a holiday of its calendar.
func (l Law) BusinessDay(t time.Time) bool {
	return l.businessDate(dateOf(t.In(l.location)))
}

func (l Law) businessDate(d civil) bool {
	switch d.weekday() {
	case time.Saturday, time.Sunday:
		return false
	}
	return !l.holidays[d]
}

// Due is the deadline of clock c started at from: the end of the c.Days-th
// calendar or business day after the day of from (the day of from itself
// does not count), that is the instant local midnight starts the next day
// in the jurisdiction's zone. An act is in time when it happens before Due.
func (l Law) Due(c Clock, from time.Time) time.Time {
	d := dateOf(from.In(l.location))
	switch c.Unit {
	case BusinessDays:
		for n := 0; n < c.Days; {
			d = d.add(1)
			if l.businessDate(d) {
				n++
			}
		}
	default:
		d = d.add(c.Days)
	}
	return time.Date(d.y, d.m, d.d+1, 0, 0, 0, 0, l.location)
}

// Elapsed counts the days of unit u from the day of from to the day of to,
// as Due counts them (the day of from itself does not count): the figure
// an examiner sets against a clock's limit. Negative spans count 0.
func (l Law) Elapsed(u Unit, from, to time.Time) int {
	d, end := dateOf(from.In(l.location)), dateOf(to.In(l.location))
	n := 0
	for d.before(end) {
		d = d.add(1)
		if u != BusinessDays || l.businessDate(d) {
			n++
		}
	}
	return n
}

// Events are what happened to a claim, as its workflow recorded them.
type Events struct {
	NoticeAt                                                     time.Time
	AcknowledgedAt, ProofOfLossAt, DecidedAt, AcceptedAt, PaidAt *time.Time
	Denied                                                       bool
	StatusLetters                                                []time.Time
}

// ClockState is one statutory clock of one claim, as `claimsctl exam`
// prints it (DESIGN.md, "Statutory rules").
type ClockState struct {
	Clock     string     `json:"clock"` // acknowledge, decide, pay, status
	Limit     int        `json:"limit"`
	Unit      Unit       `json:"unit"`
	StartedAt *time.Time `json:"started_at"` // nil: the event it runs from has not happened
	DueAt     *time.Time `json:"due_at"`
	MetAt     *time.Time `json:"met_at"`
	Breached  bool       `json:"breached"`
	Cite      string     `json:"cite"`
}

// Clocks is the state of every clock of a claim at now: "acknowledge",
// "decide", "pay" (none for a denied claim), then one "status" per letter
// that was due because the claim was still undecided when it fell due (the
// first from status_first, each next from the letter before it). A clock
// is breached when met at or after its due instant, or unmet and now has
// reached it. When a status letter went out in time and the rule set has
// an extension, the decide clock is the extension, run from that letter
// (or its own start event).
func (l Law) Clocks(e Events, now time.Time) []ClockState {
	j := l.jurisdiction
	out := []ClockState{
		l.state("acknowledge", j.Acknowledge, e.at(j.Acknowledge.Starts), e.AcknowledgedAt, now),
		l.decide(e, now),
	}
	if !e.Denied {
		out = append(out, l.state("pay", j.Pay, e.at(j.Pay.Starts), e.PaidAt, now))
	}
	return append(out, l.status(e, now)...)
}

func (l Law) state(name string, c Clock, start, met *time.Time, now time.Time) ClockState {
	cs := ClockState{Clock: name, Limit: c.Days, Unit: c.Unit, MetAt: met, Cite: c.Cite}
	if start != nil {
		s, due := *start, l.Due(c, *start)
		cs.StartedAt, cs.DueAt = &s, &due
		cs.Breached = late(met, due, now)
	}
	return cs
}

func late(met *time.Time, due, now time.Time) bool {
	if met != nil {
		return !met.Before(due)
	}
	return !now.Before(due)
}

func (l Law) decide(e Events, now time.Time) ClockState {
	start := e.at(l.jurisdiction.Decide.Starts)
	if c, from, ok := l.extended(e, start); ok {
		return l.state("decide", c, from, e.DecidedAt, now)
	}
	if c, from, ok := l.deferred(e, start); ok {
		return l.state("decide", c, from, e.DecidedAt, now)
	}
	return l.state("decide", l.jurisdiction.Decide, start, e.DecidedAt, now)
}

// deferred is the decide clock where status letters sent on time defer the
// decision (StatusDefers): the interval to the next letter, from the last
// of an unbroken chain of letters each sent before it was due, the first
// before the decision itself was due. False when there is no such chain.
func (l Law) deferred(e Events, start *time.Time) (Clock, *time.Time, bool) {
	j := l.jurisdiction
	if !j.StatusDefers || j.StatusFirst == nil || j.StatusEvery == nil || start == nil {
		return Clock{}, nil, false
	}
	statusStart := e.at(j.StatusFirst.Starts)
	if statusStart == nil {
		return Clock{}, nil, false
	}
	decideDue := l.Due(j.Decide, *start)
	var last *time.Time
	due := l.Due(*j.StatusFirst, *statusStart)
	if decideDue.Before(due) {
		due = decideDue
	}
	for _, letter := range e.letters(*statusStart) {
		if !letter.Before(due) {
			break // late: the chain ends, and the deferral with it
		}
		t := letter
		last = &t
		due = l.Due(*j.StatusEvery, letter)
	}
	if last == nil || !due.After(decideDue) {
		return Clock{}, nil, false
	}
	c := *j.StatusEvery
	c.Cite = "deferred by timely status letters: " + c.Cite
	return c, last, true
}

// extended is the decide clock's extension and where it runs from, when the
// rule set has one and the first status letter earned it: it went out
// before both the decision and the letter were due. An extension never
// shortens the clock.
func (l Law) extended(e Events, start *time.Time) (Clock, *time.Time, bool) {
	j := l.jurisdiction
	if j.Extension == nil || j.StatusFirst == nil || start == nil {
		return Clock{}, nil, false
	}
	statusStart := e.at(j.StatusFirst.Starts)
	if statusStart == nil {
		return Clock{}, nil, false
	}
	letters := e.letters(*statusStart)
	if len(letters) == 0 {
		return Clock{}, nil, false
	}
	letter, due := letters[0], l.Due(j.Decide, *start)
	if !letter.Before(due) || !letter.Before(l.Due(*j.StatusFirst, *statusStart)) {
		return Clock{}, nil, false
	}
	from := &letter
	if j.Extension.Starts != FromStatus {
		from = e.at(j.Extension.Starts)
	}
	if from == nil || !l.Due(*j.Extension, *from).After(due) {
		return Clock{}, nil, false
	}
	return *j.Extension, from, true
}

func (l Law) status(e Events, now time.Time) []ClockState {
	j := l.jurisdiction
	if j.StatusFirst == nil {
		return nil
	}
	start := e.at(j.StatusFirst.Starts)
	if start == nil {
		return nil
	}
	var out []ClockState
	letters := e.letters(*start)
	c, from := *j.StatusFirst, *start
	for k := 0; ; k++ {
		due := l.Due(c, from)
		if e.DecidedAt != nil && e.DecidedAt.Before(due) {
			return out // decided in time: no letter was needed
		}
		var met *time.Time
		if k < len(letters) {
			met = &letters[k]
		}
		out = append(out, l.state("status", c, &from, met, now))
		if met == nil || j.StatusEvery == nil {
			return out
		}
		c, from = *j.StatusEvery, *met
	}
}

// NextStatus is when the next "we need more time" letter is due while the
// claim is undecided: status_first from its start event, then status_every
// after the last letter sent. False when the claim is decided, the rule set
// has no status letters, their start event has not happened, or the one
// letter the rule set asks for has been sent.
func (l Law) NextStatus(e Events) (time.Time, bool) {
	j := l.jurisdiction
	if e.DecidedAt != nil || j.StatusFirst == nil {
		return time.Time{}, false
	}
	start := e.at(j.StatusFirst.Starts)
	if start == nil {
		return time.Time{}, false
	}
	letters := e.letters(*start)
	switch {
	case len(letters) == 0:
		return l.Due(*j.StatusFirst, *start), true
	case j.StatusEvery == nil:
		return time.Time{}, false
	}
	return l.Due(*j.StatusEvery, letters[len(letters)-1]), true
}

// at is when the event s happened, nil if it has not.
func (e Events) at(s Start) *time.Time {
	switch s {
	case FromNotice:
		if e.NoticeAt.IsZero() {
			return nil
		}
		t := e.NoticeAt
		return &t
	case FromProofOfLoss:
		return e.ProofOfLossAt
	case FromAcceptance:
		return e.AcceptedAt
	case FromDecision:
		return e.DecidedAt
	}
	return nil
}

// letters are the status letters sent at or after since, oldest first.
func (e Events) letters(since time.Time) []time.Time {
	var out []time.Time
	for _, t := range e.StatusLetters {
		if !t.Before(since) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// civil is a date without a zone.
type civil struct {
	y int
	m time.Month
	d int
}

func dateOf(t time.Time) civil { y, m, d := t.Date(); return civil{y, m, d} }

func (c civil) add(days int) civil {
	return dateOf(time.Date(c.y, c.m, c.d+days, 12, 0, 0, 0, time.UTC))
}

func (c civil) before(o civil) bool {
	return time.Date(c.y, c.m, c.d, 0, 0, 0, 0, time.UTC).Before(time.Date(o.y, o.m, o.d, 0, 0, 0, 0, time.UTC))
}

func (c civil) weekday() time.Weekday {
	return time.Date(c.y, c.m, c.d, 12, 0, 0, 0, time.UTC).Weekday()
}

func parseDate(s string) (civil, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return civil{}, err
	}
	return dateOf(t), nil
}
