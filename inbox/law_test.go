package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/approvals"
)

// A claim under a jurisdiction's rules shows its statutory decision date
// in the list; one held overdue says so instead of an expiry, and a date
// that passed is shown as past due: a breach is never silent.
func TestTheListShowsTheLawsClock(t *testing.T) {
	pages, err := parsePages()
	require.NoError(t, err)
	book := sampleBook(t)
	sup, _ := book.Approvers.Find("supervisor-3")
	v := &viewer{Approver: sup, book: book, format: newFormat(sup, "")}
	now := time.Now()
	mk := func(id string, due time.Time, overdue bool) entry {
		a := &approvals.Approval{Request: approvals.Request{ClaimID: id, AmountMinor: 184000, Currency: "usd"},
			Stage: approvals.StageEscalated, Deadline: now.Add(time.Hour), ExpiresAt: now.Add(time.Hour), DueBy: due, DueUnder: "US-CA"}
		if overdue {
			a.OverdueAt = now.Add(-time.Hour)
		}
		return entry{ClaimID: id, Approval: a}
	}
	var b strings.Builder
	require.NoError(t, pages["inbox"].ExecuteTemplate(&b, "layout", page{Title: "t", Viewer: v, Data: listing{Entries: []entry{
		mk("claim-in-time", now.Add(72*time.Hour), false),
		mk("claim-held", now.Add(-2*time.Hour), true),
		mk("claim-no-law", time.Time{}, false),
	}}}))
	html := b.String()
	section := func(id string) string {
		for _, li := range strings.Split(html, `<li class="claim`)[1:] {
			if strings.Contains(li, id+`"`) || strings.Contains(li, id+"<") {
				return li
			}
		}
		t.Fatalf("%s is not listed", id)
		return ""
	}
	inTime, held, noLaw := section("claim-in-time"), section("claim-held"), section("claim-no-law")
	assert.Contains(t, inTime, "Due by law")
	assert.Contains(t, inTime, "(US-CA)")
	assert.NotContains(t, inTime, "PAST DUE")
	assert.Contains(t, held, "held for a supervisor")
	assert.Contains(t, held, "PAST DUE")
	assert.NotContains(t, held, "Expires")
	assert.NotContains(t, noLaw, "Due by law")
	assert.Contains(t, noLaw, "Expires")
}
