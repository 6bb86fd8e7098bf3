package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stripe/stripe-go/v76"
	stripeclient "github.com/stripe/stripe-go/v76/client"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/spoolwatch"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
	"github.com/durableclaims/durableclaims/workflows"
)

// discrepancy is one thing the soak found that should not be.
type discrepancy struct {
	Claim  string `json:"claim,omitempty"`
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

// claimFacts is everything the three records (Temporal, the claims store,
// the payment provider) say about one claim.
type claimFacts struct {
	planned    plannedClaim
	execStatus enumspb.WorkflowExecutionStatus
	took       time.Duration // start to close
	result     *workflows.ClaimResult
	hist       historyFacts
	record     store.Record
	modelCalls []store.ModelCall
	messages   []store.Message
	audit      []byte
	errs       []string // reads that failed: each is a discrepancy
}

// verifier checks a finished soak against every record it can read.
type verifier struct {
	client    client.Client
	dc        converter.DataConverter // decodes what the workers wrote (markers)
	store     *store.Store
	stripe    *stripeclient.API
	sim       *stripesim.Server
	chaos     *chaos
	plan      []plannedClaim
	decisions map[string]decision
	spool     string
	// workerOf names the worker that ran a process; spoolWatch counted
	// every message moved into the spool.
	workerOf   func(pid int) string
	spoolWatch *spoolwatch.Watch

	sum *summary
}

func (v *verifier) fail(id, check, format string, args ...any) {
	v.sum.Discrepancies = append(v.sum.Discrepancies, discrepancy{Claim: id, Check: check, Detail: fmt.Sprintf(format, args...)})
}

// run gathers the facts and checks them, filling the summary.
func (v *verifier) run(ctx context.Context) error {
	facts := v.gatherAll(ctx)
	transfers, err := v.allTransfers(ctx)
	if err != nil {
		return fmt.Errorf("list transfers: %w", err)
	}
	deliveries, err := v.spoolWatch.Counts()
	if err != nil {
		v.fail("", "e-mail", "%v", err)
	}
	for _, n := range deliveries {
		v.sum.Deliveries.Total += n
		v.sum.Deliveries.Resent += n - 1
	}
	byGroup := map[string][]*stripe.Transfer{}
	for _, t := range transfers {
		byGroup[t.TransferGroup] = append(byGroup[t.TransferGroup], t)
	}
	// paidBy is the transfer each claim's result says paid it: a paid
	// claim's, or a dead-lettered one's that failed after its payment.
	paidBy := map[string]string{}
	for _, f := range facts {
		id := f.planned.Claim.ID
		for _, e := range f.errs {
			v.fail(id, "read", "%s", e)
		}
		v.checkOutcome(f)
		if f.result != nil && f.result.TransferID != "" {
			paidBy[id] = f.result.TransferID
		}
		v.checkTransfers(f, byGroup[id])
		v.checkStore(f, deliveries)
		if f.took > time.Duration(v.sum.Slowest.Seconds*float64(time.Second)) {
			v.sum.Slowest.Claim, v.sum.Slowest.Seconds = id, f.took.Seconds()
		}
		v.checkModelCalls(f)
		v.countResumes(f)
	}
	v.checkOrphans(transfers, paidBy)
	v.countPayments(transfers)
	return nil
}

func (v *verifier) gatherAll(ctx context.Context) []*claimFacts {
	facts := make([]*claimFacts, len(v.plan))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, p := range v.plan {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			facts[i] = v.gather(ctx, p)
		}()
	}
	wg.Wait()
	return facts
}

func (v *verifier) gather(ctx context.Context, p plannedClaim) *claimFacts {
	id := p.Claim.ID
	f := &claimFacts{planned: p}
	bad := func(what string, err error) { f.errs = append(f.errs, fmt.Sprintf("%s: %v", what, err)) }
	d, err := v.client.DescribeWorkflow(ctx, id, "")
	if err != nil {
		bad("describe", err)
		return f
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	f.execStatus = info.GetStatus()
	if info.GetCloseTime() != nil {
		f.took = info.GetCloseTime().AsTime().Sub(info.GetStartTime().AsTime())
	}
	if f.execStatus == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		var res workflows.ClaimResult
		if err := v.client.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil {
			bad("workflow result", err)
		} else {
			f.result = &res
		}
	}
	if f.hist, err = readHistory(ctx, v.client, v.dc, id); err != nil {
		bad("history", err)
	}
	if f.record, err = v.store.GetClaim(ctx, id); err != nil {
		bad("claims store", err)
	}
	if f.modelCalls, err = v.store.ModelCalls(ctx, id); err != nil {
		bad("model ledger", err)
	}
	if f.messages, err = v.store.Messages(ctx, id); err != nil {
		bad("outbox", err)
	}
	f.audit, _ = v.store.Audit(ctx, id) // missing: reported by checkStore
	return f
}

// allTransfers lists every transfer stripesim holds, not only this run's
// groups: a transfer under any other group would be an orphan.
func (v *verifier) allTransfers(ctx context.Context) ([]*stripe.Transfer, error) {
	params := &stripe.TransferListParams{}
	params.Context = ctx
	params.Limit = stripe.Int64(100)
	var out []*stripe.Transfer
	it := v.stripe.Transfers.List(params)
	for it.Next() {
		out = append(out, it.Transfer())
	}
	return out, it.Err()
}

// checkOutcome: the workflow completed, its result is paid or rejected, and
// that is what the claim's path called for.
func (v *verifier) checkOutcome(f *claimFacts) {
	id, p, res := f.planned.Claim.ID, f.planned, f.result
	if f.execStatus != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		v.sum.Claims.NotFinished++
		v.fail(id, "terminal", "workflow is %s, not Completed", strings.ToLower(strings.TrimPrefix(f.execStatus.String(), "WORKFLOW_EXECUTION_STATUS_")))
		return
	}
	if res == nil {
		return
	}
	switch res.Status {
	case workflows.StatusPaid, workflows.StatusRejected:
	case workflows.StatusDeadLettered:
		v.sum.Claims.DeadLettered++
		v.fail(id, "outcome", "%s", deadLetterDetail(f))
		return
	case workflows.StatusExpired:
		v.sum.Claims.Expired++
		v.fail(id, "outcome", "expired: %s", res.Reason)
		return
	default:
		v.sum.Claims.Other++
		v.fail(id, "outcome", "ended %s: %s", res.Status, res.Reason)
		return
	}
	if !p.NeedsApproval {
		v.checkAuto(f)
		return
	}
	v.checkDecided(f)
}

// deadLetterDetail says where the run stopped and what the other records
// say happened before it did: one line instead of one per record.
func deadLetterDetail(f *claimFacts) string {
	res := f.result
	var b strings.Builder
	b.WriteString("dead-lettered")
	if dl := res.DeadLetter; dl != nil {
		fmt.Fprintf(&b, " at step %d (%s), %s: %s", dl.Step, dl.StepName, dl.ErrorType, dl.Error)
		if len(dl.UnknownEffects) > 0 {
			fmt.Fprintf(&b, "; unknown effects %v", dl.UnknownEffects)
		}
	} else {
		b.WriteString(": " + res.Reason)
	}
	if res.TransferID != "" {
		fmt.Fprintf(&b, "; it had already paid %s %s (%s)", res.Payout, res.Currency, res.TransferID)
	}
	if f.record.ClosedKey != "" {
		fmt.Fprintf(&b, "; the claims store has it closed as %q", f.record.Status)
	}
	var audit struct {
		Outcome string `json:"outcome"`
	}
	if json.Unmarshal(f.audit, &audit) == nil && audit.Outcome != "" {
		fmt.Fprintf(&b, "; an audit record saying %q is stored under its step-9 key", audit.Outcome)
	}
	return b.String()
}

func (v *verifier) checkAuto(f *claimFacts) {
	id, res := f.planned.Claim.ID, f.result
	if res.Status != workflows.StatusPaid || res.Approval != nil {
		v.fail(id, "outcome", "an auto-approve claim of %s ended %s (approval requested: %t): %s",
			f.planned.Claim.Amount(), res.Status, res.Approval != nil, res.Reason)
		return
	}
	v.sum.Claims.Auto++
	v.checkPayout(f)
}

// checkDecided: the approver's decision is the one the claim took, by the
// approver who sent it, and the outcome follows it.
func (v *verifier) checkDecided(f *claimFacts) {
	id, res := f.planned.Claim.ID, f.result
	d, ok := v.decisions[id]
	if !ok {
		v.fail(id, "approval", "ended %s but the approver never saw it waiting", res.Status)
		return
	}
	want := workflows.StatusRejected
	if d.Verdict == "approve" {
		want = workflows.StatusPaid
	}
	switch {
	case res.Approval == nil || res.Approval.Decision == nil:
		v.fail(id, "approval", "the approver sent %s, the result records no decision", d.Verdict)
	case string(res.Approval.Decision.Verdict) != d.Verdict || res.Approval.Decision.Approver != d.Approver:
		v.fail(id, "approval", "the approver sent %s as %s, the claim took %s by %s",
			d.Verdict, d.Approver, res.Approval.Decision.Verdict, res.Approval.Decision.Approver)
	}
	if res.Status != want {
		v.fail(id, "outcome", "the approver sent %s, the claim ended %s: %s", d.Verdict, res.Status, res.Reason)
	}
	switch res.Status {
	case workflows.StatusPaid:
		v.sum.Claims.Approved++
		v.checkPayout(f)
	case workflows.StatusRejected:
		v.sum.Claims.Rejected++
		if res.PayoutMinor != 0 || res.TransferID != "" {
			v.fail(id, "payout", "rejected, yet the result pays %s (transfer %q)", res.Payout, res.TransferID)
		}
	}
}

// checkPayout: pol-1001 covers every soak claim in full and the rules model
// recommends the covered amount, so the payout is the claimed amount.
func (v *verifier) checkPayout(f *claimFacts) {
	c, res := f.planned.Claim, f.result
	if res.PayoutMinor != c.AmountMinor || res.TransferID == "" {
		v.fail(c.ID, "payout", "paid %s (transfer %q) on a claim of %s covered in full", res.Payout, res.TransferID, c.Amount())
	}
}

// checkTransfers: exactly one transfer for a claim whose result names one
// (every paid claim), that one, paying the result's payout to the claimant
// under the step-6 key; none for any other (every rejected claim).
func (v *verifier) checkTransfers(f *claimFacts, group []*stripe.Transfer) {
	id, res := f.planned.Claim.ID, f.result
	if res == nil || res.TransferID == "" {
		if len(group) > 0 {
			v.fail(id, "transfers", "%d transfer(s) (first %s, %d %s) for a claim whose result names none", len(group), group[0].ID, group[0].Amount, group[0].Currency)
		}
		return
	}
	if len(group) != 1 {
		ids := make([]string, len(group))
		for i, t := range group {
			ids[i] = fmt.Sprintf("%s %d", t.ID, t.Amount)
		}
		v.fail(id, "transfers", "%s claim has %d transfers, want exactly 1: %v", res.Status, len(group), ids)
		return
	}
	t := group[0]
	dest := ""
	if t.Destination != nil {
		dest = t.Destination.ID
	}
	switch {
	case t.ID != res.TransferID:
		v.fail(id, "transfers", "transfer %s, the result names %s", t.ID, res.TransferID)
	case t.Amount != res.PayoutMinor || string(t.Currency) != res.Currency:
		v.fail(id, "transfers", "transfer %s pays %d %s, the result's payout is %d %s", t.ID, t.Amount, t.Currency, res.PayoutMinor, res.Currency)
	case dest != f.planned.Claim.Claimant.StripeAccount:
		v.fail(id, "transfers", "transfer %s pays %s, the claimant is %s", t.ID, dest, f.planned.Claim.Claimant.StripeAccount)
	case t.Metadata["idempotency_key"] != string(claim.StepKey(id, claim.StepPay)):
		v.fail(id, "transfers", "transfer %s was made under key %q", t.ID, t.Metadata["idempotency_key"])
	}
}

// checkOrphans: every transfer the provider holds is in the group of a
// claim of this run whose result says it was paid. (A second transfer in
// such a group is reported by checkTransfers.)
func (v *verifier) checkOrphans(transfers []*stripe.Transfer, paidBy map[string]string) {
	for _, t := range transfers {
		if paidBy[t.TransferGroup] == "" {
			v.fail(t.TransferGroup, "orphan transfer", "transfer %s (%d %s, group %q) belongs to no paid claim of this run", t.ID, t.Amount, t.Currency, t.TransferGroup)
		}
	}
}

// checkStore: the system of record closed the claim as the workflow ended
// it, under the step-8 key; one claimant e-mail went out and is in the
// spool; the audit record is written and agrees.
func (v *verifier) checkStore(f *claimFacts, deliveries map[string]int) {
	id, res, rec := f.planned.Claim.ID, f.result, f.record
	if res == nil || (res.Status != workflows.StatusPaid && res.Status != workflows.StatusRejected) {
		return // unfinished or dead-lettered: reported with the outcome
	}
	if rec.Status != res.Status || rec.ClosedKey != string(claim.StepKey(id, claim.StepClose)) || rec.TransferID != res.TransferID {
		v.fail(id, "claims store", "store has status %q, closed under %q, transfer %q; the result is %s, transfer %q",
			rec.Status, rec.ClosedKey, rec.TransferID, res.Status, res.TransferID)
	}
	v.checkEmail(f, deliveries)
	var audit struct {
		Outcome string `json:"outcome"`
	}
	if len(f.audit) == 0 || json.Unmarshal(f.audit, &audit) != nil || audit.Outcome != res.Status {
		v.fail(id, "audit", "audit record missing or says %q, the result is %s", audit.Outcome, res.Status)
	}
}

func (v *verifier) checkEmail(f *claimFacts, deliveries map[string]int) {
	id := f.planned.Claim.ID
	notify := string(claim.StepKey(id, claim.StepNotify))
	var sent []store.Message
	for _, m := range f.messages {
		if string(m.Key) == notify {
			sent = append(sent, m)
		}
	}
	if len(sent) != 1 || sent[0].Status != store.OutboxSent {
		v.fail(id, "e-mail", "outbox holds %d message(s) under %s, want one sent", len(sent), notify)
		return
	}
	// The spool names the file after the Message-ID; the soak's IDs are
	// all file-safe characters, so no mapping is needed.
	if _, err := os.Stat(filepath.Join(v.spool, sent[0].MessageID+".eml")); err != nil {
		v.fail(id, "e-mail", "outbox says sent, the spool has no %s.eml", sent[0].MessageID)
		return
	}
	// Sent once: moved into the spool once, however often the step ran.
	if n := deliveries[sent[0].MessageID+".eml"]; n != 1 {
		v.fail(id, "e-mail", "%s.eml was delivered into the spool %d times", sent[0].MessageID, n)
		return
	}
	v.sum.Emails++
}

// countResumes adds one claim's history to the totals.
func (v *verifier) countResumes(f *claimFacts) {
	r := &v.sum.Resumes
	h := f.hist
	resumed := h.wtTimeouts+h.stickyTimeouts+h.wtFailures > 0
	for typ, n := range h.activityResumes {
		r.ActivityResumes += n
		r.ActivityResumesByType[typ] += n
		resumed = true
	}
	r.WorkflowTaskTimeouts += h.wtTimeouts
	r.WorkflowTaskAttemptsLost += h.wtAttemptsLost
	r.StickyQueueTimeouts += h.stickyTimeouts
	r.WorkflowTaskFailures += h.wtFailures
	r.LocalActivityRetries += h.localRetries
	if resumed {
		r.ClaimsResumed++
	}
	if res := f.result; res != nil {
		for _, at := range res.Attempts {
			if at.Accepted {
				v.sum.Decisions.Accepted++
				continue
			}
			v.sum.Decisions.Refused++
			v.sum.Decisions.RefusedWhy[at.Refusal]++
			v.sum.RefusedLog = append(v.sum.RefusedLog, refusal{Claim: f.planned.Claim.ID, At: at.At, Name: at.Name, Approver: at.Approver, Refusal: at.Refusal})
		}
		if res.PaymentReplayed {
			v.sum.Transfers.PaymentsReplayed++
		}
	}
}

// countPayments totals the transfers and the provider's idempotency record.
func (v *verifier) countPayments(transfers []*stripe.Transfer) {
	t := &v.sum.Transfers
	t.Count = len(transfers)
	for _, tr := range transfers {
		t.TotalMinor += tr.Amount
	}
	t.Total = claim.FormatAmount(t.TotalMinor, "usd")
	stats, err := v.sim.AllKeyStats()
	if err != nil {
		v.fail("", "stripesim", "key stats: %v", err)
		return
	}
	for _, ks := range stats {
		t.KeyRequests += ks.Requests
		t.KeyReplays += ks.Replays
		t.KeyInUse += ks.InUse
		if ks.Conflicts > 0 {
			v.fail(strings.TrimSuffix(ks.Key, ":step6"), "stripesim", "key %s was reused with different parameters %d time(s)", ks.Key, ks.Conflicts)
		}
	}
}
