package activities

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/review"
	"github.com/durableclaims/durableclaims/internal/store"
)

// run executes one activity method with a real activity context, as a
// local activity of the claim workflow of the claim its input names (the
// test environment's own info names no claim's run).
func run[T any](t *testing.T, a *Activities, fn any, in any) (T, error) {
	t.Helper()
	return as[T](t, a, runOf(claimOf(t, in), testRun, true), fn, in)
}

func sampleClaim(t *testing.T) claim.Claim {
	t.Helper()
	data, err := os.ReadFile("../examples/claims/claim-0042.json")
	require.NoError(t, err)
	c, err := claim.Parse(data)
	require.NoError(t, err)
	return c
}

// crashAfterSend is the spool, counting what it is given, that panics once
// right after sending: the activity dies between changing the world and
// recording it, as in a SIGKILL (the worker's crash injection wraps the
// Mailer the same way).
type crashAfterSend struct {
	SpoolMailer
	armed bool
	sends int
}

func (c *crashAfterSend) Send(ctx context.Context, m Email) error {
	if err := c.SpoolMailer.Send(ctx, m); err != nil {
		return err
	}
	c.sends++
	if c.armed {
		c.armed = false
		panic("injected crash after the effect")
	}
	return nil
}

func TestNotifySendsOnceEvenAcrossACrashAfterSending(t *testing.T) {
	a := newActivities(t, nil)
	registered(t, a, sampleClaim(t))
	paidOut(t, a, "claim-0042", 184000, "tr_1")
	spool := a.Mailer.(SpoolMailer)
	mailer := &crashAfterSend{SpoolMailer: spool, armed: true}
	a.Mailer = mailer
	in := NotifyInput{Key: "claim-0042:step7", ClaimID: "claim-0042", To: "ada@example.com", Name: "Ada",
		Outcome: "paid", PayoutMinor: 184000, Currency: "usd", TransferID: "tr_1"}
	_, err := run[NotifyResult](t, a, a.NotifyClaimant, in)
	require.Error(t, err, "the injected crash")

	// The retry asks the spool, which holds the message: it is recorded
	// sent, not sent again.
	r, err := run[NotifyResult](t, a, a.NotifyClaimant, in)
	require.NoError(t, err)
	assert.True(t, r.Replayed)
	r, err = run[NotifyResult](t, a, a.NotifyClaimant, in) // a later retry finds it sent in the outbox
	require.NoError(t, err)
	assert.True(t, r.Replayed)
	assert.Equal(t, 1, mailer.sends, "handed to the spool once, whatever the retries")

	files, err := filepath.Glob(filepath.Join(spool.Dir, "*.eml"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one message, whatever the retries")
	body, err := os.ReadFile(files[0])
	require.NoError(t, err)
	assert.Contains(t, string(body), "Message-ID: <claim-0042.step7@durableclaims>")
	assert.Contains(t, string(body), "we have paid 1840.00 USD (transfer tr_1)")
	msgs, err := a.Store.Messages(context.Background(), "claim-0042")
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, 2, msgs[0].Attempts, "reserved twice (the crash window), sent once")
	assert.Equal(t, store.OutboxSent, msgs[0].Status)
}

// register registers c as the starter would, its documents stored in a
// blob store first (references only, never paths).
func register(t *testing.T, a *Activities, c *claim.Claim) {
	t.Helper()
	if a.Blobs == nil {
		docs, err := blobs.Open(context.Background(), "file://"+t.TempDir()+"?create_dir=true")
		require.NoError(t, err)
		t.Cleanup(func() { docs.Close() })
		a.Blobs = docs
	}
	for i, d := range c.Documents {
		ref, err := a.Blobs.Put(context.Background(), blobs.DocumentKey(c.ID, i, d.Path), strings.NewReader("content of "+d.Name))
		require.NoError(t, err)
		c.Documents[i] = claim.Document{Name: d.Name, URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size}
	}
	_, _, err := a.Store.PutClaim(context.Background(), *c)
	require.NoError(t, err)
}

// The worker never reads a local path a claim names, and refuses a
// reference outside the claim's own folder of the blob store.
func TestLoadReadsDocumentsOnlyByReference(t *testing.T) {
	a := newActivities(t, nil)
	c := sampleClaim(t)
	_, _, err := a.Store.PutClaim(context.Background(), c) // paths, as a hand-made record would have
	require.NoError(t, err)
	_, err = run[LoadClaimResult](t, a, a.LoadClaim, LoadClaimInput{Claim: c})
	assert.Equal(t, ErrInvalidInput, appErrType(err))
	assert.ErrorContains(t, err, "documents[0]")
	assert.ErrorContains(t, err, "never reads a local path")

	other := sampleClaim(t)
	other.ID = "claim-0099"
	register(t, a, &other)
	stolen := sampleClaim(t)
	stolen.ID = "claim-0100"
	stolen.Documents = other.Documents[:1] // another claim's evidence
	_, _, err = a.Store.PutClaim(context.Background(), stolen)
	require.NoError(t, err)
	_, err = run[LoadClaimResult](t, a, a.LoadClaim, LoadClaimInput{Claim: stolen})
	assert.Equal(t, ErrInvalidInput, appErrType(err))
	assert.ErrorContains(t, err, "is not under claims/claim-0100/")
}

// Intake reads what the review rules weigh: the claimant's other claims in
// the window, and the words of an excluded category in the claim's own
// description and documents.
func TestLoadFindsWhatTheReviewRulesWeigh(t *testing.T) {
	a := newActivities(t, nil)
	a.Rules = insurer.Defaults()
	for _, id := range []string{"claim-0201", "claim-0202"} {
		c := sampleClaim(t)
		c.ID, c.Documents = id, nil
		register(t, a, &c)
	}
	c := sampleClaim(t)
	c.PolicyID, c.Description = "pol-2002", "The boiler gave out"
	c.Documents = c.Documents[:1]
	register(t, a, &c)
	ref, err := a.Blobs.Put(context.Background(), blobs.DocumentKey(c.ID, 0, "report.txt"), strings.NewReader("Engineer's report: rust and old age, no sudden event"))
	require.NoError(t, err)
	c.Documents[0] = claim.Document{Name: "report.txt", URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size}
	_, err = a.Store.Amend(context.Background(), c.ID, "ops", func(x *claim.Claim) error { x.Documents = c.Documents; return nil })
	require.NoError(t, err)
	res, err := run[LoadClaimResult](t, a, a.LoadClaim, LoadClaimInput{Claim: c})
	require.NoError(t, err)
	require.NotNil(t, res.Review)
	assert.Equal(t, 2, res.Review.PriorClaims, "the same e-mail and account")
	assert.Equal(t, []review.ExclusionHit{{Category: "wear-and-tear", Terms: []string{"rust", "old age"}}}, res.Review.Exclusions,
		"the document's words, read from the blob store")
}

// The system of record decides what exists: intake refuses a claim it does
// not hold, and registers nothing.
func TestLoadRefusesUnregisteredClaims(t *testing.T) {
	a := newActivities(t, nil)
	c := sampleClaim(t)
	_, err := run[LoadClaimResult](t, a, a.LoadClaim, LoadClaimInput{Claim: c})
	assert.Equal(t, ErrNotRegistered, appErrType(err))
	assert.True(t, nonRetryableErr(err))
	_, err = a.Store.GetClaim(context.Background(), c.ID)
	assert.ErrorIs(t, err, store.ErrNotFound, "nothing registered")
}

func TestLoadCloseAndAuditAreIdempotent(t *testing.T) {
	a := newActivities(t, nil)
	a.Rules = insurer.Defaults()
	a.Rules.AutoApproveLimit = "750"
	c := sampleClaim(t)
	register(t, a, &c)
	loaded, err := run[LoadClaimResult](t, a, a.LoadClaim, LoadClaimInput{Claim: c})
	require.NoError(t, err)
	assert.Equal(t, "open", loaded.Status)
	require.NotNil(t, loaded.Policy)
	assert.Equal(t, "pol-1001", loaded.Policy.ID)
	require.NotNil(t, loaded.Rules, "the worker's policy is recorded with intake")
	assert.Equal(t, "750", loaded.Rules.AutoApproveLimit)
	// and its version, which is that of the policy as the result records it.
	recorded, err := json.Marshal(loaded)
	require.NoError(t, err)
	var back struct {
		Rules         json.RawMessage `json:"rules"`
		PolicyVersion string          `json:"policy_version"`
	}
	require.NoError(t, json.Unmarshal(recorded, &back))
	assert.Equal(t, insurer.VersionOfJSON(back.Rules), back.PolicyVersion)
	assert.NotEqual(t, insurer.Defaults().Version(), back.PolicyVersion, "the worker's policy, not the defaults")

	paidOut(t, a, c.ID, 184000, "tr_1")
	close := CloseInput{Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "paid", TransferID: "tr_1", PayoutMinor: 184000}
	r, err := run[CloseResult](t, a, a.CloseClaim, close)
	require.NoError(t, err)
	assert.False(t, r.Replayed)
	r, err = run[CloseResult](t, a, a.CloseClaim, close)
	require.NoError(t, err)
	assert.True(t, r.Replayed)
	close.Key = "claim-0042:step99"
	_, err = run[CloseResult](t, a, a.CloseClaim, close)
	assert.Equal(t, ErrIdempotencyConflict, appErrType(err))
	rec, err := a.Store.GetClaim(context.Background(), c.ID)
	require.NoError(t, err)
	assert.Equal(t, "paid", rec.Status)
	assert.Equal(t, int64(2), rec.Version)

	record := json.RawMessage(`{"claim_id":"claim-0042","outcome":"paid"}`)
	ar, err := run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9", ClaimID: c.ID, Record: record})
	require.NoError(t, err)
	again, err := run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9", ClaimID: c.ID, Record: record})
	require.NoError(t, err)
	assert.True(t, again.Replayed)
	assert.Equal(t, ar.SHA256, again.SHA256)
	_, err = run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9", ClaimID: c.ID, Record: json.RawMessage(`{"claim_id":"claim-0042","outcome":"paid","other":1}`)})
	assert.Equal(t, ErrIdempotencyConflict, appErrType(err))
}

func TestLoadRefusesInvalidClaimsAndKnowsUnknownPolicies(t *testing.T) {
	a := newActivities(t, nil)
	c := sampleClaim(t)
	c.PolicyID = "pol-0000"
	register(t, a, &c)
	res, err := run[LoadClaimResult](t, a, a.LoadClaim, LoadClaimInput{Claim: c})
	require.NoError(t, err)
	assert.Nil(t, res.Policy)

	c.Claimant.Email = "not an address"
	_, err = run[LoadClaimResult](t, a, a.LoadClaim, LoadClaimInput{Claim: c})
	assert.Equal(t, ErrInvalidInput, appErrType(err))
	assert.True(t, nonRetryableErr(err))
}

func TestModelCallsAreLedgered(t *testing.T) {
	a := newActivities(t, nil)
	c := registered(t, a, sampleClaim(t))
	tr, err := run[TriageResult](t, a, a.TriageClaim, TriageInput{Key: "claim-0042:step2", Claim: c})
	require.NoError(t, err)
	assert.Equal(t, "water-damage", tr.Output.Category)
	assert.Equal(t, "rules/v1", tr.Model)
	assert.Len(t, tr.OutputSHA256, 64)

	cov := claim.Cover(a.policy(t, c.PolicyID), c, tr.Output.Category)
	as, err := run[AssessResult](t, a, a.AssessClaim, AssessInput{Key: "claim-0042:step4",
		AssessRequest: AssessRequest{Claim: c, Triage: tr.Output, Coverage: cov}})
	require.NoError(t, err)
	assert.Equal(t, int64(184000), as.Output.RecommendedMinor)
	assert.False(t, as.Output.NeedsReview)

	calls, err := a.Store.ModelCalls(context.Background(), c.ID)
	require.NoError(t, err)
	require.Len(t, calls, 2)
	assert.Equal(t, claim.IdempotencyKey("claim-0042:step2"), calls[0].Key)
	assert.Equal(t, tr.OutputSHA256, calls[0].OutputSHA256)
	assert.Equal(t, claim.IdempotencyKey("claim-0042:step4"), calls[1].Key)
}

func (a *Activities) policy(t *testing.T, id string) *claim.Policy {
	p, ok := a.Policies[id]
	require.True(t, ok)
	return &p
}

func TestRulesModelIsDeterministic(t *testing.T) {
	c := sampleClaim(t)
	m := RulesModel{}
	t1, _ := m.Triage(context.Background(), c)
	t2, _ := m.Triage(context.Background(), c)
	assert.Equal(t, t1, t2)

	c.Description, c.Documents, c.AmountMinor = "urgent cash", nil, 300000
	r3, _ := m.Triage(context.Background(), c)
	t3 := r3.Output
	assert.ElementsMatch(t, []string{"thin-description", "round-amount", "pressure-language", "no-documents"}, t3.FraudSignals)
	assert.Equal(t, 100, t3.FraudScore)
	ra, _ := m.Assess(context.Background(), AssessRequest{Claim: c, Triage: t3, Coverage: claim.Coverage{CoveredMinor: 300000}})
	as := ra.Output
	assert.True(t, as.NeedsReview)
}

// bigModel answers like the rules model but with a long transcript, as a
// real model's prompt with documents' text would be.
type bigModel struct{ RulesModel }

func (m bigModel) Triage(ctx context.Context, c claim.Claim) (Reply[Triage], error) {
	r, err := m.RulesModel.Triage(ctx, c)
	r.Transcript = []byte(`{"prompt":"` + strings.Repeat("document text ", 10_000) + `"}`)
	return r, err
}

// A small transcript stays in the result; a large one goes to the blob
// store and the result (so history) holds its reference.
func TestTranscriptsOverTheThresholdGoToTheBlobStore(t *testing.T) {
	a := newActivities(t, nil)
	docs, err := blobs.Open(context.Background(), "file://"+t.TempDir()+"?create_dir=true")
	require.NoError(t, err)
	t.Cleanup(func() { docs.Close() })
	a.Blobs = docs
	c := registered(t, a, sampleClaim(t))

	small, err := run[TriageResult](t, a, a.TriageClaim, TriageInput{Key: "claim-0042:step2", Claim: c})
	require.NoError(t, err)
	assert.Contains(t, small.Transcript, "Classify claim claim-0042")
	assert.Nil(t, small.TranscriptRef)

	a.Model = bigModel{}
	big, err := run[TriageResult](t, a, a.TriageClaim, TriageInput{Key: "claim-0042:step2", Claim: c})
	require.NoError(t, err)
	assert.Empty(t, big.Transcript)
	require.NotNil(t, big.TranscriptRef)
	assert.Greater(t, big.TranscriptRef.Size, int64(100_000))
	require.NoError(t, docs.Verify(context.Background(), *big.TranscriptRef))
	assert.Equal(t, small.Output, big.Output, "the answer itself stays in history")
}

// The claimant's e-mail tells the outcome, not our internals: whatever the
// run's reason says (who rejected it, the model's rationale, fraud
// signals), none of it reaches the claimant.
func TestClaimantEmailsTellTheOutcomeNotOurInternals(t *testing.T) {
	a := newActivities(t, nil)
	registered(t, a, sampleClaim(t))
	paidOut(t, a, "claim-0042", 184000, "tr_1")
	_, err := a.Store.Withdraw(context.Background(), "claim-0042")
	require.NoError(t, err)
	for outcome, want := range map[string]string{
		"rejected":  "We are unable to pay your claim claim-0042.",
		"expired":   "could not complete the review",
		"withdrawn": "withdrawn, as asked",
		"paid":      "we have paid 1840.00 USD (transfer tr_1)",
	} {
		in := NotifyInput{Key: claim.IdempotencyKey("claim-0042:step7:" + outcome), ClaimID: "claim-0042", To: "ada@example.com", Name: "Ada",
			Outcome: outcome, PayoutMinor: 184000, Currency: "usd",
			Reason: "rejected by adjuster-17: fraud score 95 (pressure-language); the model's rationale: invoice looks altered"}
		if outcome == "paid" {
			in.TransferID = "tr_1"
		} else {
			in.PayoutMinor = 0
		}
		r, err := run[NotifyResult](t, a, a.NotifyClaimant, in)
		require.NoError(t, err)
		body, err := os.ReadFile(filepath.Join(a.Mailer.(SpoolMailer).Dir, fileSafe(r.MessageID)+".eml"))
		require.NoError(t, err)
		assert.Contains(t, string(body), want, outcome)
		for _, internal := range []string{"adjuster-17", "fraud", "rationale", "altered", "pressure"} {
			assert.NotContains(t, string(body), internal, "%s: the e-mail says %q", outcome, internal)
		}
	}
}

// Reminders and escalations link to the claim's page in the inbox.
func TestApprovalNoticesLinkToTheInbox(t *testing.T) {
	a := newActivities(t, nil)
	registered(t, a, sampleClaim(t))
	a.InboxURL = "https://inbox.insurer.example/"
	r, err := run[NotifyResult](t, a, a.EscalateApproval, NoticeInput{Key: "claim-0042:step5:escalate", ClaimID: "claim-0042",
		Amount: "1840.00", Currency: "usd", RequestSHA256: strings.Repeat("ab", 32), Deadline: time.Now()})
	require.NoError(t, err)
	body, err := os.ReadFile(filepath.Join(a.Mailer.(SpoolMailer).Dir, fileSafe(r.MessageID)+".eml"))
	require.NoError(t, err)
	assert.Contains(t, string(body), "Open it in the inbox: https://inbox.insurer.example/claims/claim-0042")
}

// An audit record must agree with the system of record it audits. A worker
// that lost its workflow task (cut off from the frontend) runs the task's
// local activities on regardless; when it re-reads a claim another worker
// has meanwhile paid and closed, its stale run dead-letters and would file
// a dead-letter record under the run's own key: a false "dead-lettered"
// beside the claim's true "paid" (found by make soak-faults). The write is
// refused, as is a final outcome the store has not closed the claim with.
func TestAnAuditThatContradictsTheClaimsRecordIsRefused(t *testing.T) {
	a := newActivities(t, nil)
	c := sampleClaim(t)
	register(t, a, &c)
	paidOut(t, a, c.ID, 184000, "tr_1")

	early := json.RawMessage(`{"claim_id":"claim-0042","outcome":"paid"}`)
	_, err := run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9", ClaimID: c.ID, Record: early})
	assert.Equal(t, ErrContradictsRecord, appErrType(err), "paid, yet the claim is not closed")

	_, err = run[CloseResult](t, a, a.CloseClaim, CloseInput{Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "paid", TransferID: "tr_1", PayoutMinor: 184000})
	require.NoError(t, err)
	stale := json.RawMessage(`{"claim_id":"claim-0042","outcome":"dead-lettered","reason":"step 5 (approval) failed: claim-0042 is closed (paid)"}`)
	_, err = run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9:dead-letter:run-2", ClaimID: c.ID, Record: stale})
	assert.Equal(t, ErrContradictsRecord, appErrType(err), "a dead letter for a claim closed paid")
	rejected := json.RawMessage(`{"claim_id":"claim-0042","outcome":"rejected"}`)
	_, err = run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9", ClaimID: c.ID, Record: rejected})
	assert.Equal(t, ErrContradictsRecord, appErrType(err), "rejected, for a claim closed paid")
	_, err = a.Store.Audit(context.Background(), c.ID)
	assert.ErrorIs(t, err, store.ErrNotFound, "nothing was written")

	_, err = run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9", ClaimID: c.ID, Record: early})
	require.NoError(t, err, "the claim's own outcome is written")
}
