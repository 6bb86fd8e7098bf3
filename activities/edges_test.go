package activities

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/review"
	"github.com/durableclaims/durableclaims/internal/store"
)

// Each check of the activities that act for a claim, on its own: who may
// call, what a notice and a tool answer, what intake and reconciliation
// read.

// An activity acts only for a caller that is an activity of a run with a
// workflow ID and a run ID: each missing on its own is refused.
func TestAnActivityNeedsARunToActFor(t *testing.T) {
	a := newActivities(t, nil)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	for name, caller := range map[string]Caller{
		"not an activity": {WorkflowID: c.ID, RunID: testRun},
		"no workflow":     {RunID: testRun},
		"no run":          {WorkflowID: c.ID},
	} {
		ok := name != "not an activity"
		_, err := as[OpenApprovalResult](t, a, func(context.Context) (Caller, bool) { return caller, ok }, a.OpenApproval, OpenApprovalInput{ClaimID: c.ID})
		assert.Equal(t, ErrForeignRun, appErrType(err), name)
	}
	r, err := as[OpenApprovalResult](t, a, runOf(c.ID, testRun, false), a.OpenApproval, OpenApprovalInput{ClaimID: c.ID})
	require.NoError(t, err)
	book, err := authority.Load("")
	require.NoError(t, err)
	assert.Equal(t, book.Approvers, r.Approvers, "the directory the insurer holds")
}

// A run takes a claim over only when the server says it is a running claim
// workflow on this worker's queue, asked within the activity's own time:
// each of those alone is not enough.
func TestOnlyARunningClaimWorkflowOfOursTakesAClaimOver(t *testing.T) {
	a := newActivities(t, nil)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	srv := runs(a)
	srv.runs[c.ID+"/ended"] = RunFacts{WorkflowType: "ClaimWorkflow", TaskQueue: "claims", Running: false}
	_, err := as[OpenApprovalResult](t, a, runOf(c.ID, "ended", false), a.OpenApproval, OpenApprovalInput{ClaimID: c.ID})
	assert.Equal(t, ErrForeignRun, appErrType(err), "a run that has ended")

	queue := a.Runs.TaskQueue
	a.Runs.TaskQueue = ""
	_, err = as[OpenApprovalResult](t, a, srv.start(c.ID, "no-queue", "ClaimWorkflow"), a.OpenApproval, OpenApprovalInput{ClaimID: c.ID})
	assert.Equal(t, ErrForeignRun, appErrType(err), "a worker with no queue named owns no run")
	a.Runs.TaskQueue = queue

	describe := a.Runs.Describe
	a.Runs.Describe = func(ctx context.Context, id, runID string) (RunFacts, error) {
		if d, ok := ctx.Deadline(); !ok || time.Until(d) < 5*time.Second {
			return RunFacts{}, context.DeadlineExceeded // as the real client answers a context with no time left
		}
		return describe(ctx, id, runID)
	}
	_, err = as[OpenApprovalResult](t, a, srv.start(c.ID, "reset", "ClaimWorkflow"), a.OpenApproval, OpenApprovalInput{ClaimID: c.ID})
	require.NoError(t, err, "a reset run of ours takes it over, asked in time")
}

// A claimant's spool file name keeps letters, digits and -._@ and nothing
// else: no path separator, no character a file system treats specially.
func TestSpoolFileNamesAreSafe(t *testing.T) {
	assert.Equal(t, "azAZ09-._@", fileSafe("azAZ09-._@"))
	assert.Equal(t, "__________", fileSafe("/\\:[`{ <>?"), "the characters just outside each kept range")
	assert.Equal(t, "claim-0042.step7@durableclaims", fileSafe("claim-0042.step7@durableclaims"))
}

// A letter that does not pay says how to ask again; one that pays or
// confirms a withdrawal does not.
func TestOnlyAnUnpaidOutcomeInvitesAReply(t *testing.T) {
	for outcome, invites := range map[string]bool{"paid": false, "withdrawn": false, "rejected": true, "expired": true} {
		body := claimantLetter(NotifyInput{ClaimID: "claim-0042", Name: "Ada", Outcome: outcome, PayoutMinor: 100, Currency: "usd", TransferID: "tr_1"})
		assert.Equal(t, invites, strings.Contains(body, "reply to this e-mail"), outcome)
	}
}

// An approval notice goes out for an open claim, under the approval step's
// key: a closed or withdrawn claim, or another step's key, each gets none.
func TestApprovalNoticesOnlyForAnOpenClaimsWait(t *testing.T) {
	a := newActivities(t, nil)
	notice := func(id string, key claim.IdempotencyKey) error {
		_, err := as[NotifyResult](t, a, runOf(id, testRun, false), a.EscalateApproval, NoticeInput{Key: key, ClaimID: id, Amount: "1840.00", Currency: "usd"})
		return err
	}
	open := registerFor(t, a, "claim-0042", 184000, testRun)
	assert.Equal(t, ErrForeignRun, appErrType(notice(open.ID, claim.StepKey(open.ID, claim.StepNotify))), "another step's key")
	require.NoError(t, notice(open.ID, claim.StepKey(open.ID, claim.StepApproval).Sub("escalate")))

	closed := registerFor(t, a, "claim-0043", 184000, testRun)
	_, _, err := a.Store.CloseClaim(context.Background(), closed.ID, claim.StepKey(closed.ID, claim.StepClose), "rejected", "", 0)
	require.NoError(t, err)
	assert.Equal(t, ErrForeignRun, appErrType(notice(closed.ID, claim.StepKey(closed.ID, claim.StepApproval).Sub("escalate"))), "closed")

	withdrawn := registerFor(t, a, "claim-0044", 184000, testRun)
	_, err = a.Store.Withdraw(context.Background(), withdrawn.ID)
	require.NoError(t, err)
	assert.Error(t, notice(withdrawn.ID, claim.StepKey(withdrawn.ID, claim.StepApproval).Sub("escalate")), "withdrawn")
	files, err := filepath.Glob(filepath.Join(a.Mailer.(SpoolMailer).Dir, "*.eml"))
	require.NoError(t, err)
	assert.Len(t, files, 1, "one notice, the open claim's")
}

// A call costs its tokens at the model's price, rounded up to a whole
// micro-dollar: nothing for nothing, one for any part of one.
func TestACallCostsItsTokensRoundedUp(t *testing.T) {
	p := Price{InMicrosPerMTok: 2_500_000, OutMicrosPerMTok: 10_000_000}
	assert.Equal(t, int64(0), p.Cost(0, 0))
	assert.Equal(t, int64(3), p.Cost(1, 0), "2.5 rounded up")
	assert.Equal(t, int64(10), p.Cost(0, 1))
	assert.Equal(t, int64(2_500_000+10_000_000), p.Cost(1_000_000, 1_000_000))
	assert.Equal(t, int64(1), Price{InMicrosPerMTok: 1}.Cost(1, 0))
	assert.Equal(t, int64(2), Price{InMicrosPerMTok: 1}.Cost(1_000_001, 0))
}

// flag_fraud_signal takes a signal of 1 to 200 characters.
func TestAFraudSignalIsOneTo200Characters(t *testing.T) {
	a := newActivities(t, nil)
	c := registered(t, a, sampleClaim(t))
	call := func(signal string) ToolResult {
		r, err := ReadTools{Store: a.Store}.Call(context.Background(), ToolInput{Key: claim.StepKey(c.ID, claim.StepTriage).Sub("t"), Scope: ScopeOf(c),
			Call: ToolCall{ID: "1", Name: ToolFlagFraudSignal, Arguments: `{"signal":"` + signal + `"}`}})
		require.NoError(t, err)
		return r
	}
	assert.True(t, call("").IsError)
	assert.True(t, call(strings.Repeat("s", 201)).IsError)
	assert.False(t, call(strings.Repeat("s", 200)).IsError)
}

// get_document_text on a document the blob store does not hold says so; it
// is no refusal. A whole text document is not marked truncated.
func TestDocumentTextOfAWholeAndAMissingDocument(t *testing.T) {
	a := newActivities(t, nil)
	docs := withBlobs(t, a)
	ref, err := docs.Put(context.Background(), "claims/claim-0042/0-report.txt", strings.NewReader("Plumber's report"))
	require.NoError(t, err)
	out, err := documentText(context.Background(), docs, "claim-0042", claim.Document{Name: "report.txt", URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size})
	require.NoError(t, err)
	m := out.(map[string]any)
	assert.Equal(t, "Plumber's report", m["text"])
	assert.NotContains(t, m, "truncated")
	out, err = documentText(context.Background(), docs, "claim-0042", claim.Document{Name: "photo.jpg"})
	require.NoError(t, err)
	assert.Equal(t, "the document is not in the blob store", out.(map[string]any)["note"])
}

// Text for the rules: valid UTF-8 without NUL bytes; a read cut inside a
// character drops the part, and only a cut read does.
func TestAsText(t *testing.T) {
	for name, tc := range map[string]struct {
		in        string
		truncated bool
		want      string
		ok        bool
	}{
		"text":             {"rust and old age", false, "rust and old age", true},
		"a NUL":            {"PK\x03\x04\x00", false, "", false},
		"cut in a char":    {"caf\xc3", true, "caf", true},
		"invalid, whole":   {"caf\xc3", false, "", false},
		"cut after 3 of 4": {"x\xf0\x9f\x98", true, "x", true},
	} {
		got, ok := asText([]byte(tc.in), tc.truncated)
		assert.Equal(t, tc.ok, ok, name)
		assert.Equal(t, tc.want, got, name)
	}
}

// A model error that is not a wait for capacity is returned as it came.
func TestOnlyACapacityWaitCarriesItsAttempt(t *testing.T) {
	plain := errors.New("connection reset")
	assert.Same(t, plain, withAttempt(context.Background(), plain))
	other := temporal.NewApplicationError("refused", "ModelRefused")
	assert.Same(t, other, withAttempt(context.Background(), other))
}

// The re-read after a wait names the signing keys the directory no longer
// lists, and only those.
func TestTheReReadNamesRevokedKeys(t *testing.T) {
	a := newActivities(t, nil)
	k := keys(t, a)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	gone, err := authority.GenerateKey("adjuster-17", false)
	require.NoError(t, err)
	res, err := as[LoadClaimResult](t, a, runOf(c.ID, testRun, true), a.LoadClaim, LoadClaimInput{Claim: c,
		Keys: []string{k["adjuster-17"].Key.KeyID, gone.Key.KeyID}})
	require.NoError(t, err)
	assert.Equal(t, []string{gone.Key.KeyID}, res.Revoked)
}

// Intake weighs an excluded category only when the claim's words hit it.
func TestNoExclusionWithoutItsWords(t *testing.T) {
	a := newActivities(t, nil)
	c := sampleClaim(t)
	c.PolicyID, c.Description, c.Documents = "pol-2002", "A burst pipe flooded the kitchen", nil
	register(t, a, &c)
	res, err := run[LoadClaimResult](t, a, a.LoadClaim, LoadClaimInput{Claim: c})
	require.NoError(t, err)
	require.NotNil(t, res.Review)
	assert.Empty(t, res.Review.Exclusions)
}

// Which claim a transfer pays: its group, else its workflow_id, else the
// claim part of its idempotency_key.
func TestWhichClaimATransferPays(t *testing.T) {
	for want, tr := range map[string]*stripe.Transfer{
		"claim-1": {TransferGroup: "claim-1", Metadata: map[string]string{"workflow_id": "claim-2"}},
		"claim-2": {Metadata: map[string]string{"workflow_id": "claim-2", "idempotency_key": "claim-3:step6"}},
		"claim-3": {Metadata: map[string]string{"idempotency_key": "claim-3:step6"}},
		"":        {Metadata: map[string]string{"idempotency_key": ":step6"}},
	} {
		assert.Equal(t, want, transferClaim(tr))
	}
}

// A reconciliation window is a real interval: each bound missing, or the
// two equal, is refused on its own.
func TestAReconciliationWindowIsAnInterval(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	for name, edit := range map[string]func(*ReconcilePaymentsInput){
		"no start": func(in *ReconcilePaymentsInput) { in.Since = time.Time{} },
		"no end":   func(in *ReconcilePaymentsInput) { in.Until = time.Time{} },
		"empty":    func(in *ReconcilePaymentsInput) { in.Since = in.Until },
	} {
		in := window("w:" + name)
		edit(&in)
		_, err := a.ReconcilePayments(context.Background(), in)
		assert.Equal(t, ErrInvalidInput, appErrType(err), name)
	}
}

// Reconciliation runs only for this worker's reconciliation workflow, for
// itself: a claim workflow, or a reconciliation naming another, gets no
// report.
func TestReconciliationIsTheWorkersOwn(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	in := window("r:reconcile")
	_, err := as[ReconcileReport](t, a, runs(a).start("claim-0042", "run-1", "ClaimWorkflow"), a.ReconcilePayments, in)
	assert.Equal(t, ErrForeignRun, appErrType(err), "a claim workflow")
	_, err = as[ReconcileReport](t, a, runs(a).start("reconcile-other", "run-2", "ReconcileWorkflow"), a.ReconcilePayments, in)
	assert.Equal(t, ErrForeignRun, appErrType(err), "another reconciliation's input")
}

// A listing the provider fails is retried; no report is stored.
func TestAFailedListingStoresNoReport(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	f.failList = true
	in := window("failed:reconcile")
	_, err := as[ReconcileReport](t, a, runs(a).start(in.WorkflowID, "run-r", "ReconcileWorkflow"), a.ReconcilePayments, in)
	require.Error(t, err)
	assert.False(t, nonRetryableErr(err), "%v", err)
	f.failList = false
	rep, _, _ := reconcile(t, a, in)
	assert.False(t, rep.Replayed, "the retry writes the first report")
}

// A report of exactly MaxEntries discrepancies is whole; one more is cut.
func TestAReportOfExactlyMaxEntriesIsWhole(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	r := recon{t, a}
	r.pay("claim-o1", 100)
	r.pay("claim-o2", 200)
	in := window("max:reconcile")
	in.MaxEntries = 2
	rep, _, _ := reconcile(t, a, in)
	assert.Equal(t, 2, rep.Unmatched)
	assert.False(t, rep.Truncated)
	for _, e := range rep.Entries {
		assert.Equal(t, "usd", e.Currency, "an orphan's currency is its transfer's")
	}
	in = window("max1:reconcile")
	in.MaxEntries = 1
	rep, _, _ = reconcile(t, a, in)
	assert.True(t, rep.Truncated)
	assert.Len(t, rep.Entries, 1)
}

// A recorded transfer found outside the window that names no claim is the
// claim's, as the step log says: matched, not missing.
func TestARecordedTransferWithoutMetadataIsTheClaims(t *testing.T) {
	var skew atomic.Int64
	a := newActivities(t, newSkewedStripe(t, &skew))
	r := recon{t, a}
	r.register("claim-bare")
	skew.Store(int64(3 * time.Hour))
	tr := r.transfer("", 30000, "")
	skew.Store(0)
	r.close("claim-bare", store.StatusPaid, tr, 30000)
	rep, _, _ := reconcile(t, a, window("bare:reconcile"))
	assert.Equal(t, 0, rep.Unmatched, "%+v", rep.Entries)
	assert.Equal(t, 1, rep.Counts["matched"])
}

// A record of a transfer never made counts its claim as checked.
func TestAnUnmadeTransferCountsItsClaim(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	r := recon{t, a}
	r.register("claim-forged")
	_, _, err := a.Store.WriteAudit(context.Background(), "claim-forged:step9:dead-letter:run-1", "claim-forged",
		[]byte(`{"claim_id":"claim-forged","outcome":"dead-lettered","transfer_id":"tr_forged"}`))
	require.NoError(t, err)
	rep, _, _ := reconcile(t, a, window("forged:reconcile"))
	assert.Equal(t, 1, rep.ClaimsChecked)
}

// What history keeps inline is at most the limit, exactly the limit
// included; a byte more goes to the blob store by reference.
func TestInlineLimitsAreInclusive(t *testing.T) {
	a := newActivities(t, nil)
	withBlobs(t, a)
	ctx := context.Background()
	key := claim.StepKey("claim-0042", claim.StepTriage).Sub("turn1")
	msgs := []Message{{Role: "user", Content: "A burst pipe flooded the kitchen"}}
	b, err := json.Marshal(msgs)
	require.NoError(t, err)
	a.TranscriptInlineMax = len(b)
	conv, err := a.keepConversation(ctx, key, msgs)
	require.NoError(t, err)
	assert.Nil(t, conv.Ref, "a conversation of exactly the limit")
	inline, ref, err := a.keepTranscript(ctx, key, b)
	require.NoError(t, err)
	assert.Nil(t, ref, "a transcript of exactly the limit")
	assert.Equal(t, string(b), inline)

	a.TranscriptInlineMax = len(b) - 1
	conv, err = a.keepConversation(ctx, key, msgs)
	require.NoError(t, err)
	assert.NotNil(t, conv.Ref)
	_, ref, err = a.keepTranscript(ctx, key, b)
	require.NoError(t, err)
	assert.NotNil(t, ref)
}

// Intake reads the approver directory only to check keys it is asked
// about: a first read, which asks about none, does not depend on it.
func TestAFirstReadNeedsNoDirectory(t *testing.T) {
	a := newActivities(t, nil)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	a.ApproversFile = filepath.Join(t.TempDir(), "no-such-directory.json")
	_, err := as[LoadClaimResult](t, a, runOf(c.ID, testRun, true), a.LoadClaim, LoadClaimInput{Claim: c})
	require.NoError(t, err)
	_, err = as[LoadClaimResult](t, a, runOf(c.ID, testRun, true), a.LoadClaim, LoadClaimInput{Claim: c, Keys: []string{"adjuster-17-abc"}})
	assert.Error(t, err, "a re-read asking about keys needs the directory")
}

// A text document is read up to MaxScannedText even when the cut falls
// inside a character, and a document that is not text is not read as
// words (claims.go, checkDocuments' truncated flag): the exclusion rules
// find "rust" in a long report, and not "old age" in a binary file that
// only ends like text.
func TestALongReportIsReadAndABinaryFileIsNot(t *testing.T) {
	a := newActivities(t, nil)
	withBlobs(t, a)
	c := sampleClaim(t)
	c.PolicyID, c.Description = "pol-2002", "The boiler gave out"
	contents := map[string]string{
		"report.txt": "Engineer's report: rust. " + strings.Repeat("€", MaxScannedText), // cut inside a €
		"photo.bin":  "old age\xff",
	}
	c.Documents = nil
	for i, name := range []string{"report.txt", "photo.bin"} {
		ref, err := a.Blobs.Put(context.Background(), blobs.DocumentKey(c.ID, i, name), strings.NewReader(contents[name]))
		require.NoError(t, err)
		c.Documents = append(c.Documents, claim.Document{Name: name, URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size})
	}
	require.Greater(t, c.Documents[0].Size, int64(MaxScannedText))
	_, _, err := a.Store.PutClaim(context.Background(), c)
	require.NoError(t, err)
	res, err := run[LoadClaimResult](t, a, a.LoadClaim, LoadClaimInput{Claim: c})
	require.NoError(t, err)
	require.NotNil(t, res.Review)
	assert.Equal(t, []review.ExclusionHit{{Category: "wear-and-tear", Terms: []string{"rust"}}}, res.Review.Exclusions)
}
