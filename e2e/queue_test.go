package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// The approval queue is a projection the workflows keep, and the workflow
// is the truth: the queue lost whole (a claims database restored from an
// old backup), a run terminated while it waited, a row left at an old
// stage all heal from the workflows, with no claim's workflow asked where
// the queue and Temporal agree.
func TestTheApprovalQueueHealsFromTheWorkflows(t *testing.T) {
	w := newWorld(t)
	w.env = append(w.env, "QUEUE_HEAL_EVERY=1s")
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	ids := []string{"claim-e2e-q1", "claim-e2e-q2", "claim-e2e-q3"}
	for _, id := range ids {
		w.start(w.claimFile(id, "1840.00"))
	}
	out, err := testenv.Run(t, w.env, filepath.Join(w.bin, "starter"), "--approval-ttl", "3s", "--escalation-ttl", "1h",
		w.claimFile("claim-e2e-qesc", "2600.00"))
	require.NoError(t, err, out)
	for _, id := range ids {
		w.waitStatus(id, workflows.StatusWaiting)
	}
	w.waitStatus("claim-e2e-qesc", workflows.StatusEscalated)

	st, err := store.Open(w.store)
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	// What the workflows wrote themselves: each wait at the revision its
	// status query reports.
	queue := func() map[string]store.QueueRun {
		q, err := st.OpenQueue(ctx)
		require.NoError(t, err)
		return q
	}
	matches := func(want ...string) func() bool {
		return func() bool {
			q := queue()
			if len(q) != len(want) {
				return false
			}
			for _, id := range want {
				s := w.status(id)
				r, ok := q[id]
				if !ok || s.Approval == nil || r.Rev != s.Approval.Rev || r.Stage != string(s.Approval.Stage) || !r.Deadline.Equal(s.Approval.Deadline.Truncate(time.Millisecond)) {
					return false
				}
			}
			return true
		}
	}
	all := append([]string{"claim-e2e-qesc"}, ids...)
	require.Eventually(t, matches(all...), testTimeout, pollEvery, "the queue never matched the workflows: %v", queue())
	assert.Equal(t, "escalated", queue()["claim-e2e-qesc"].Stage)
	assert.EqualValues(t, 2, queue()["claim-e2e-qesc"].Rev, "opened, then escalated")

	// Lost: two rows (as after a restore from an old backup), and one set
	// back to an older stage.
	db, err := sql.Open("sqlite", w.store)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`DELETE FROM approval_queue WHERE claim_id IN ('claim-e2e-q1', 'claim-e2e-q2')`)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE approval_queue SET stage = 'waiting', rev = 1 WHERE claim_id = 'claim-e2e-qesc'`)
	require.NoError(t, err)
	// Rows as a backup holds them: written a while ago (the healer leaves
	// rows alone for their first 30 s, while visibility catches up).
	_, err = db.Exec(`UPDATE approval_queue SET updated_ms = updated_ms - 120000`)
	require.NoError(t, err)
	// Terminated while it waited: its run writes nothing more.
	require.NoError(t, w.client.TerminateWorkflow(ctx, "claim-e2e-q3", "", "an operator ended it"))

	healed := time.Now()
	require.Eventually(t, matches("claim-e2e-qesc", "claim-e2e-q1", "claim-e2e-q2"), testTimeout, pollEvery,
		"the queue never healed: %v", queue())
	t.Logf("healed in %s", time.Since(healed).Round(10*time.Millisecond))
	assert.Equal(t, "escalated", queue()["claim-e2e-qesc"].Stage)
	var open int
	require.NoError(t, db.QueryRow(`SELECT open FROM approval_queue WHERE claim_id = 'claim-e2e-q3'`).Scan(&open))
	assert.Zero(t, open, "the terminated wait's row is closed, not deleted at once")

	// The counts come from a tally the database keeps with the rows; one
	// written apart from them (restored from another backup) is set right
	// from the rows by the healer's next full pass.
	counts := func() store.QueueCounts {
		c, err := st.CountQueue(ctx, store.QueueFilter{})
		require.NoError(t, err)
		return c
	}
	want := store.QueueCounts{Total: 3, ByStage: map[string]int{"waiting": 2, "escalated": 1}, Matching: 3}
	require.Equal(t, want, counts())
	_, err = db.Exec(`UPDATE approval_queue_tally SET n = n + 5 WHERE n > 0`)
	require.NoError(t, err)
	require.NotEqual(t, want, counts())
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, counts()) }, testTimeout, pollEvery,
		"the counts were never set right: %+v", counts())

	// A decision ends the wait in the queue at once, healer or not.
	out, err = w.ctl("list", "--status", "waiting")
	require.NoError(t, err, out)
	assert.Contains(t, out, "3 waiting for a decision (2 waiting, 1 escalated); 2 match")
	out, err = w.cli("workflow", "signal", "--workflow-id", "claim-e2e-q1", "--name", "approve", "--input", w.receipt("approve", "claim-e2e-q1", "adjuster-17"))
	require.NoError(t, err, out)
	require.Equal(t, workflows.StatusPaid, w.result("claim-e2e-q1").Status)
	assert.NotContains(t, queue(), "claim-e2e-q1")
	out, err = w.ctl("list", "--status", "escalated", "--json")
	require.NoError(t, err, out)
	assert.Contains(t, out, fmt.Sprintf(`"claim_id":%q`, "claim-e2e-qesc"))
}

// The inbox with a few hundred claims waiting, in a browser: counts, fifty
// a page by deadline, filters, hand-offs on top, and a list that is what
// each claim's own page (which asks the workflow) says the approver may
// decide.
func TestTheInboxPagesFiltersAndCountsAFewHundredClaims(t *testing.T) {
	b := newBrowserWorld(t)
	began := time.Now()
	var files []string
	add := func(prefix string, n int, amount string, currency ...string) []string {
		var ids []string
		for i := range n {
			id := fmt.Sprintf("claim-e2e-%s-%03d", prefix, i)
			f := b.claimFile(id, amount)
			if len(currency) > 0 {
				f = b.claimFileIn(id, amount, currency[0], "pol-3003")
			}
			files = append(files, f)
			ids = append(ids, id)
		}
		return ids
	}
	small := add("small", 60, "1200.00")    // adjuster-9, adjuster-17, supervisor-3
	add("mid", 60, "1840.00")               // adjuster-17, supervisor-3
	big := add("big", 30, "6000.00")        // supervisor-3
	eur := add("eur", 40, "2000.00", "eur") // 1,500.00 eur after the deductible: adjuster-17, supervisor-3
	b.start(files...)
	files = nil
	quorum := add("quorum", 5, "1840.00")
	b.start(append([]string{"--four-eyes-above", "1500.00"}, files...)...)
	files = nil
	escalated := add("esc", 10, "1840.00")
	out, err := testenv.Run(t, b.env, filepath.Join(b.bin, "starter"), append([]string{"--approval-ttl", "3s", "--escalation-ttl", "1h"}, files...)...)
	require.NoError(t, err, out)
	st, err := store.Open(b.store)
	require.NoError(t, err)
	defer st.Close()
	t.Logf("205 claims started in %s", time.Since(began).Round(time.Second))
	var all store.QueueCounts
	require.Eventually(t, func() bool {
		all, err = st.CountQueue(context.Background(), store.QueueFilter{})
		return err == nil && all.ByStage["escalated"] == 10 && all.Total == 205
	}, 3*time.Minute, time.Second, "205 claims never all waited, 10 escalated: %+v", &all)
	t.Logf("and waiting after %s", time.Since(began).Round(time.Second))
	// adjuster-17 approves two of the four-eyes claims (they need a
	// second approver) and hands three small ones to adjuster-9.
	for _, id := range quorum[:2] {
		out, err := b.decideRaw(id, b.receipt("approve", id, "adjuster-17"))
		require.NoError(t, err, out)
	}
	for _, id := range small[:3] {
		out, err := b.decideRaw(id, b.receipt("handoff", id, "adjuster-17", "--to", "adjuster-9", "--note", "yours"))
		require.NoError(t, err, out)
	}
	require.Eventually(t, func() bool {
		c, err := st.CountQueue(context.Background(), store.QueueFilter{Viewer: &store.QueueViewer{ID: "adjuster-9", Limits: map[string]int64{"usd": 150000}}})
		return err == nil && c.AssignedToYou == 3
	}, time.Minute, pollEvery, "the hand-offs never reached the queue")

	// Every page of a list, by following "Next".
	pages := func(ctx context.Context, url string) (ids []string, n int) {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#counts"))))
		for {
			n++
			page, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#list .id")].map(e => e.textContent)`))
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), 50)
			ids = append(ids, page...)
			next, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("a.next")?.href ?? ""`))
			require.NoError(t, err)
			if next == "" {
				return ids, n
			}
			nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = chromedp.Do(nctx, chromedp.Navigate(next), chromedp.WaitVisible(chromedp.CSS("#counts")))
			cancel()
			if err != nil {
				body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : "(no body)"`))
				if len(body) > 2000 {
					body = body[:2000]
				}
				require.NoError(t, err, "page %d, %.300s:\n%s", n+1, next, body)
			}
		}
	}
	unique := func(ids []string) map[string]bool {
		m := map[string]bool{}
		for _, id := range ids {
			assert.False(t, m[id], "%s listed twice", id)
			m[id] = true
		}
		return m
	}

	adjuster := b.signIn("adjuster-17")
	counts := b.text(adjuster, "#counts")
	b.screenshot(adjuster, "inbox-paged")
	assert.Contains(t, counts, "163 claims you may decide: 163 waiting", "60 small + 60 mid + 40 eur + 3 of the 5 four-eyes")
	listed, n := pages(adjuster, b.inbox+"/")
	assert.Equal(t, 4, n, "163 claims, 50 a page")
	seen := unique(listed)
	assert.Len(t, seen, 163)
	for _, id := range append(append(append([]string{}, big...), escalated...), quorum[:2]...) {
		assert.False(t, seen[id], "%s is not adjuster-17's to decide", id)
	}
	for _, id := range append(append([]string{}, eur...), quorum[2:]...) {
		assert.True(t, seen[id], "%s is adjuster-17's to decide", id)
	}
	// The list is what each claim's own page says: a sample of both.
	for _, id := range []string{small[10], eur[0], quorum[3], quorum[0], big[0], escalated[0]} {
		require.NoError(t, chromedp.Do(adjuster, chromedp.Navigate(b.inbox+"/claims/"+id), chromedp.WaitVisible(chromedp.CSS("main"))))
		form, err := chromedp.Run(adjuster, chromedp.Evaluate[bool](`!!document.querySelector("#approve-form")`))
		require.NoError(t, err)
		assert.Equal(t, seen[id], form, "%s: listed %v, the claim page offers a decision %v", id, seen[id], form)
	}
	// Filters: currency, an amount band, a stage, handed to me; a band
	// without a currency is refused with the field and why.
	eurOnly, _ := pages(adjuster, b.inbox+"/?currency=eur")
	assert.ElementsMatch(t, eur, eurOnly)
	assert.Contains(t, b.text(adjuster, "#counts"), "40 match the filters")
	band, _ := pages(adjuster, b.inbox+"/?currency=usd&min=1500.01&max=5000")
	assert.Len(t, band, 63, "60 mid + 3 four-eyes at 1,840.00")
	require.NoError(t, chromedp.Do(adjuster, chromedp.Navigate(b.inbox+"/?min=100"), chromedp.WaitVisible(chromedp.CSS(".problem"))))
	assert.Contains(t, b.text(adjuster, ".problem"), "min: choose a currency for an amount band")

	small9 := b.signIn("adjuster-9")
	assert.Contains(t, b.text(small9, "#counts"), "60 claims you may decide: 60 waiting; 3 handed to you")
	assert.Contains(t, b.text(small9, ".claims.handed"), small[0])
	assert.Contains(t, b.text(small9, ".claims.handed"), "by adjuster-17")
	mine, _ := pages(small9, b.inbox+"/?mine=1")
	assert.ElementsMatch(t, small[:3], mine)
	all9, _ := pages(small9, b.inbox+"/")
	assert.ElementsMatch(t, small, all9)

	supervisor := b.signIn("supervisor-3")
	assert.Contains(t, b.text(supervisor, "#counts"), "205 claims you may decide: 195 waiting, 10 escalated")
	esc, _ := pages(supervisor, b.inbox+"/?stage=escalated")
	assert.ElementsMatch(t, escalated, esc)
}
