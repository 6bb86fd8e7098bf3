package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// The law's clock on a real dev server (docs/law.md): a California claim
// nobody answers is escalated, held for a supervisor (never denied by
// silence), and paid when one approves. Its acknowledgment letter is sent
// once although the worker is SIGKILLed right after the mail relay took
// it; the approval letter is the claimant's e-mail; both are in the mail
// spool once and in the claim file with hashes that match the mail; and
// claimsctl exam reads the dates back from the claim file as the run
// recorded them.
func TestLawLettersAreSentOnceAndExamined(t *testing.T) {
	w := newWorld(t)
	id := "claim-e2e-law"
	worker := testenv.Supervise(t, append(w.env, "APPROVAL_TTL=2s", "ESCALATION_TTL=2s"), filepath.Join(w.bin, "worker"),
		"--crash-at", id+":5/letter/acknowledgment:after-effect", "--crash-state", filepath.Join(t.TempDir(), "crash-fired"))
	w.start(w.claimFile(id, "1840.00"))

	// Escalated after 2 s, held after 2 s more: the wait says it is overdue.
	var st workflows.Status
	require.Eventually(t, func() bool {
		v, err := w.client.QueryWorkflow(t.Context(), id, "", workflows.QueryStatus)
		return err == nil && v.Get(&st) == nil && st.Approval != nil && !st.Approval.OverdueAt.IsZero()
	}, 2*time.Minute, 200*time.Millisecond, "the wait was never held overdue")
	assert.Equal(t, workflows.StatusEscalated, st.State, "held with the supervisors, not expired")
	assert.Equal(t, "US-CA", st.Approval.DueUnder)
	assert.True(t, st.Approval.DueBy.After(time.Now().Add(30*24*time.Hour)), "California decides within 40 days")
	assert.Equal(t, 1, worker.Kills(), "the worker was killed right after the acknowledgment was mailed")

	// Operations see it against its statutory date, held for a supervisor.
	out, err := w.ctl("deadlines", "--json")
	require.NoError(t, err, out)
	var due []struct {
		ClaimID      string    `json:"claim_id"`
		Jurisdiction string    `json:"jurisdiction"`
		Overdue      bool      `json:"overdue"`
		PastDue      bool      `json:"past_due"`
		DueBy        time.Time `json:"due_by"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &due), out)
	require.Len(t, due, 1, out)
	assert.Equal(t, id, due[0].ClaimID)
	assert.Equal(t, "US-CA", due[0].Jurisdiction)
	assert.True(t, due[0].Overdue, "held overdue")
	assert.False(t, due[0].PastDue, "but well inside the law's 40 days")
	assert.True(t, due[0].DueBy.Equal(st.Approval.DueBy))

	w.approve(id, "supervisor-3")
	r := w.result(id)
	require.Equal(t, workflows.StatusPaid, r.Status)
	n, _ := w.transfers(id)
	assert.Equal(t, 1, n)

	// Each letter in the spool once; the supervisors told once it was overdue.
	spool := func(key string) []string {
		files, err := filepath.Glob(filepath.Join(w.mail, key+"@durableclaims.eml"))
		require.NoError(t, err)
		return files
	}
	ack, decision := spool(id+".step5.letter.acknowledgment"), spool(id+".step7")
	require.Len(t, ack, 1)
	require.Len(t, decision, 1)
	assert.Len(t, spool(id+".step5.overdue"), 1)

	// The claim file keeps each letter, with the hash of the mail sent.
	out, err = w.ctl("checkpoint")
	require.NoError(t, err, out)
	out, err = w.ctl("verify", id)
	require.NoError(t, err, out)
	out, err = w.ctl("exam", "--from", time.Now().UTC().Format(time.DateOnly), "--to", time.Now().UTC().Format(time.DateOnly), "--json")
	require.NoError(t, err, out)
	var exam struct {
		ClaimID        string     `json:"claim_id"`
		Jurisdiction   string     `json:"jurisdiction"`
		NoticeAt       *time.Time `json:"notice_at"`
		AcknowledgedAt *time.Time `json:"acknowledged_at"`
		DecidedAt      *time.Time `json:"decided_at"`
		PaidAt         *time.Time `json:"paid_at"`
		Clocks         []struct {
			Clock    string `json:"clock"`
			Breached bool   `json:"breached"`
			Elapsed  *int   `json:"elapsed"`
		} `json:"clocks"`
		Letters []struct {
			Kind   string    `json:"kind"`
			SentAt time.Time `json:"sent_at"`
			SHA256 string    `json:"sha256"`
		} `json:"letters"`
		Breaches []string `json:"breaches"`
	}
	line := strings.TrimSpace(out[strings.Index(out, "{"):])
	require.NoError(t, json.Unmarshal([]byte(line), &exam), out)
	assert.Equal(t, id, exam.ClaimID)
	assert.Equal(t, "US-CA", exam.Jurisdiction)
	assert.Empty(t, exam.Breaches)
	require.Len(t, exam.Letters, 2)
	assert.Equal(t, "acknowledgment", exam.Letters[0].Kind)
	assert.Equal(t, "approval", exam.Letters[1].Kind)
	assert.Equal(t, mailHash(t, ack[0]), exam.Letters[0].SHA256, "the acknowledgment sent is the one on file")
	assert.Equal(t, mailHash(t, decision[0]), exam.Letters[1].SHA256, "the approval letter sent is the one on file")
	require.NotNil(t, exam.AcknowledgedAt)
	assert.True(t, exam.AcknowledgedAt.Equal(exam.Letters[0].SentAt))
	require.NotNil(t, exam.DecidedAt)
	require.NotNil(t, exam.PaidAt)
	// paid_at is when the provider created the transfer, to its second.
	assert.False(t, exam.PaidAt.Before(exam.DecidedAt.Truncate(time.Second)))
	assert.WithinDuration(t, time.Now(), *exam.PaidAt, 5*time.Minute)
	for _, c := range exam.Clocks {
		assert.False(t, c.Breached, c.Clock)
		if assert.NotNil(t, c.Elapsed, c.Clock) {
			assert.Zero(t, *c.Elapsed, "%s: met the day it started", c.Clock)
		}
	}

	// The dates are the run's: the decision is when the approval reached
	// it, in the history.
	decided := approvalAccepted(t, w, id)
	assert.WithinDuration(t, decided, *exam.DecidedAt, 2*time.Second)
}

// mailHash is a letter's hash as the claim file records it: the subject, a
// blank line and the body, with the spool's CRLF line endings made LF.
func mailHash(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	msg := strings.ReplaceAll(string(raw), "\r\n", "\n")
	head, body, ok := strings.Cut(msg, "\n\n")
	require.True(t, ok, path)
	var subject string
	for _, h := range strings.Split(head, "\n") {
		if s, ok := strings.CutPrefix(h, "Subject: "); ok {
			subject = s
		}
	}
	sum := sha256.Sum256([]byte(subject + "\n\n" + strings.TrimSuffix(body, "\n")))
	return hex.EncodeToString(sum[:])
}

// approvalAccepted is when the run's history received the approve signal.
func approvalAccepted(t *testing.T, w *world, id string) time.Time {
	t.Helper()
	it := w.client.GetWorkflowHistory(t.Context(), id, "", false, 0)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == "approve" {
			return e.GetEventTime().AsTime()
		}
	}
	t.Fatal("no approve signal in the history")
	return time.Time{}
}
