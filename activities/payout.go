package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/review"
	"github.com/durableclaims/durableclaims/internal/store"
)

// The payment's own lock. The workflow decides whether a claim is paid and
// how much, and checks every decision receipt; this is the second,
// independent lock, at the point where money moves. PayClaimant pays only:
//
//   - a claim its run owns (forClaim), open, under the claim's own step-6 key;
//   - to the payee and in the currency the system of record holds;
//   - at most the ceiling it recomputes from the store's claim and the
//     worker's policy book (claimed amount, deductible, limit, max payout);
//   - with the decision receipts themselves, re-verified here against the
//     approver directory as it stands now, wherever the worker's policy or
//     the deterministic review rules say a human must decide;
//   - once per claim, ever: a payout reserved in the store before the
//     payment provider is called, honoured by every run and worker.

// PayApproval is what authorised a payout the rules do not allow alone:
// the request the approvers were shown (its hash is what they signed) and
// their receipts; or the policy's final outcome; or, under the development
// switch, plain decisions.
type PayApproval struct {
	Request  approvals.Request `json:"request"`
	Receipts []string          `json:"receipts,omitempty"`
	// ByPolicy: nobody decided, and the policy's final outcome approved.
	ByPolicy bool `json:"by_policy,omitempty"`
	// Unsigned names the approvers of plain decisions accepted under the
	// development switch (ALLOW_UNSIGNED_DECISIONS).
	Unsigned []string `json:"unsigned,omitempty"`
}

// payout says whether in is a payout the system of record and the signed
// decisions allow, and returns its reservation: held (and the same) when a
// run of this claim reserved it before.
func (a *Activities) authorisePayout(ctx context.Context, c Caller, rec store.Record, in PayInput) (store.Payout, error) {
	no := func(code, format string, args ...any) (store.Payout, error) {
		return store.Payout{}, a.refuse(ctx, c, rec.Claim.ID, code, ErrPaymentUnauthorised, "payment of claim %s refused: "+format,
			append([]any{rec.Claim.ID}, args...)...)
	}
	cl := rec.Claim
	switch {
	case in.Key != claim.StepKey(cl.ID, claim.StepPay):
		return no("bad-key", "a claim is paid under its own key %s, not %s", claim.StepKey(cl.ID, claim.StepPay), in.Key)
	case rec.Status != store.StatusOpen:
		return no("not-open", "the claim is %s", rec.Status)
	case in.Destination != cl.Claimant.StripeAccount || in.Currency != cl.Currency:
		return no("payee", "the system of record pays %s in %s, not %s in %s", cl.Claimant.StripeAccount, cl.Currency, in.Destination, in.Currency)
	}
	policy, ok := a.Policies[cl.PolicyID]
	if !ok {
		return no("no-policy", "policy %s is not in the worker's policy book", cl.PolicyID)
	}
	ceiling := claim.Cover(&policy, cl, "")
	if !ceiling.Covered {
		return no("not-covered", "%s", ceiling.Reason)
	}
	limit := ceiling.CoveredMinor
	if a.Rules.MaxPayout != "" {
		if max, err := claim.ParseAmount(a.Rules.MaxPayout, cl.Currency); err == nil && max < limit {
			limit = max
		}
	}
	if in.AmountMinor > limit {
		return no("over-ceiling", "%s is above what the claim and its policy allow (%s)", money(in.AmountMinor, cl.Currency), money(limit, cl.Currency))
	}

	why, err := a.humanNeeded(ctx, rec, &policy, in.AmountMinor)
	if err != nil {
		return store.Payout{}, err
	}
	if why != "" {
		if err := a.approved(ctx, c, rec, in, why); err != nil {
			return store.Payout{}, err
		}
	}

	held, err := a.Store.ReservePayout(ctx, store.Payout{ClaimID: cl.ID, Key: in.Key, RunID: c.RunID, AmountMinor: in.AmountMinor,
		Currency: in.Currency, Destination: in.Destination})
	switch {
	case errors.Is(err, store.ErrConflict) && held.Key == in.Key:
		// The same key for another payment: a bug or tampering, never a
		// provider problem; the alert of every idempotency conflict.
		return store.Payout{}, alertOnConflict(ctx, in.Key, nonRetryable(fmt.Errorf("payment of claim %s refused: its key %s already reserved %s to %s, not %s to %s",
			cl.ID, in.Key, money(held.AmountMinor, held.Currency), held.Destination, money(in.AmountMinor, in.Currency), in.Destination), ErrIdempotencyConflict))
	case errors.Is(err, store.ErrConflict):
		return no("second-payout", "the claim's payout is already reserved (%s %s under %s): a claim is paid once", money(held.AmountMinor, held.Currency),
			held.Status, held.Key)
	}
	return held, err
}

// humanNeeded says why a human must have decided this payout, or "": the
// review rules (package review) on the facts of the system of record, not
// on what the model said, which is advice and the workflow's to weigh:
// above the worker's auto-approve limit, a fraud signal flagged on the
// claim, the claimant's prior claims, excluded words in the claim. The
// facts are read cheapest first, and only until a rule fires.
func (a *Activities) humanNeeded(ctx context.Context, rec store.Record, p *claim.Policy, amount int64) (string, error) {
	cl := rec.Claim
	auto, err := claim.ParseAmount(a.Rules.AutoApproveLimit, cl.Currency)
	if err != nil {
		return "", fmt.Errorf("the worker's auto-approve limit: %w", err)
	}
	rules := review.RulesOf(a.Rules)
	in := review.Input{Currency: cl.Currency, PayoutMinor: amount, AutoApproveMinor: auto, Rules: &rules, ReviewOf: cl.ReviewOf}
	first := func() string {
		if why := review.Reasons(in); len(why) > 0 {
			return why[0]
		}
		return ""
	}
	if why := first(); why != "" {
		return why, nil
	}
	flags, err := a.Store.FraudFlags(ctx, cl.ID)
	if err != nil {
		return "", err
	}
	for _, f := range flags {
		in.Flags = append(in.Flags, f.Signal)
	}
	if why := first(); why != "" {
		return why, nil
	}
	texts, err := a.checkDocuments(ctx, cl)
	if err != nil {
		return "", err
	}
	// Prior claims registered before this one: a count that can only be
	// smaller than the one intake made, so this lock is never stricter than
	// the workflow's rule for a claim registered later.
	rv, err := a.review(ctx, cl, p, texts, rec.CreatedAt)
	if err != nil {
		return "", err
	}
	in.Facts = *rv
	return first(), nil
}

// approved checks what the payment carries as its authority: the decision
// receipts, verified here again; the policy's final outcome, only after the
// policy's whole wait; plain decisions, only under the development switch.
func (a *Activities) approved(ctx context.Context, c Caller, rec store.Record, in PayInput, why string) error {
	cl := rec.Claim
	no := func(code, format string, args ...any) error {
		return a.refuse(ctx, c, cl.ID, code, ErrPaymentUnauthorised, "payment of claim %s refused (%s): "+format,
			append([]any{cl.ID, why}, args...)...)
	}
	ap := in.Approval
	if ap == nil {
		return no("no-approval", "a human must decide it, and it carries no decision")
	}
	req := ap.Request
	switch {
	case req.ClaimID != cl.ID || req.Payee != cl.Claimant.StripeAccount || req.Currency != cl.Currency:
		return no("request", "the request approved was for claim %s paying %s in %s", req.ClaimID, req.Payee, req.Currency)
	case in.AmountMinor > req.AmountMinor:
		return no("request", "it pays %s, more than the %s requested", money(in.AmountMinor, cl.Currency), money(req.AmountMinor, cl.Currency))
	}
	switch {
	case ap.ByPolicy:
		return a.approvedByPolicy(ctx, rec, no)
	case len(ap.Receipts) == 0 && len(ap.Unsigned) > 0 && a.Rules.AllowUnsignedDecisions:
		logger(ctx).Warn("DEVELOPMENT SWITCH: paid on unsigned decisions", "claim", cl.ID, "approvers", ap.Unsigned)
		return nil
	case len(ap.Receipts) == 0:
		return no("no-receipt", "a human must decide it, and it carries no signed receipt")
	}
	who, err := a.receiptApprovers(c, rec, in, no)
	if err != nil {
		return err
	}
	fourEyes, err := claim.ParseAmount(a.Rules.FourEyesAbove, cl.Currency)
	if err != nil {
		return fmt.Errorf("the worker's four-eyes threshold: %w", err)
	}
	if fourEyes > 0 && in.AmountMinor > fourEyes {
		if len(who) < 2 || !slices.ContainsFunc(who, func(x authority.Approver) bool { return x.Role == authority.Supervisor }) {
			return no("four-eyes", "above %s two approvers must agree, one a supervisor", money(fourEyes, cl.Currency))
		}
	}
	return nil
}

// refusal refuses a payment: the code names the rule, the rest says why.
type refusal func(code, format string, args ...any) error

// approvedByPolicy allows a payment the policy's final outcome approved:
// only where the worker's policy approves so, and only once the claim has
// waited the policy's whole wait.
func (a *Activities) approvedByPolicy(ctx context.Context, rec store.Record, no refusal) error {
	wait := time.Duration(a.Rules.ApprovalTTL) + time.Duration(a.Rules.EscalationTTL)
	if a.Rules.FinalOutcome != string(approvals.Approve) {
		return no("policy", "the worker's policy does not approve by its final outcome")
	}
	if time.Since(rec.CreatedAt) < wait {
		return no("policy", "the policy approves only after its whole wait (%s), and the claim was registered %s ago", wait, time.Since(rec.CreatedAt).Round(time.Second))
	}
	logger(ctx).Warn("paid by the policy's final outcome", "claim", rec.Claim.ID)
	return nil
}

// receiptApprovers verifies every receipt the approval carries against the
// approver directory now, and returns who approved, once each.
func (a *Activities) receiptApprovers(c Caller, rec store.Record, in PayInput, no refusal) ([]authority.Approver, error) {
	book, err := authority.Load(a.ApproversFile)
	if err != nil {
		return nil, err // retryable: fixing the directory lets the claim carry on
	}
	audiences := []string{approvals.ReceiptAudience} // runs before receipts named their deployment
	if c.Namespace != "" {
		audiences = append(audiences, approvals.Audience(c.Namespace, a.Rules.Deployment))
	}
	var who []authority.Approver
	for i, tok := range in.Approval.Receipts {
		approver, err := a.receiptApprover(book, audiences, rec, in, i, tok, no)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(who, func(x authority.Approver) bool { return x.ID == approver.ID }) {
			return nil, no("same-approver", "%s approved twice", approver.ID)
		}
		who = append(who, approver)
	}
	return who, nil
}

// receiptApprover verifies receipts[i] and returns the approver it proves,
// or refuses the payment.
func (a *Activities) receiptApprover(book authority.Book, audiences []string, rec store.Record, in PayInput, i int, tok string, no refusal) (authority.Approver, error) {
	cl, req := rec.Claim, in.Approval.Request
	_, peek, ok := approvals.PeekReceipt(tok)
	if !ok {
		return authority.Approver{}, no("receipt", "receipts[%d] is not a receipt", i)
	}
	// A receipt's life bounded when the workflow could accept it; the
	// payment may come later (a retry, a worker down meanwhile), so it
	// is verified as of its issue: signature, form and audience, here,
	// against the directory now (a revoked key fails).
	issued := time.Unix(peek.IssuedAt, 0)
	if issued.After(time.Now().Add(time.Minute)) || issued.Before(rec.CreatedAt.Add(-time.Minute)) {
		return authority.Approver{}, no("receipt", "receipts[%d] was issued at %s, outside the claim's life", i, issued.UTC().Format(time.RFC3339))
	}
	if !slices.Contains(audiences, peek.Audience) {
		return authority.Approver{}, no("receipt", "receipts[%d] is for %q, not this namespace and deployment", i, clip(peek.Audience, 80))
	}
	v, err := approvals.VerifyReceipt(tok, book, peek.Audience, issued, time.Duration(a.Rules.ReceiptMaxTTL))
	if err != nil {
		return authority.Approver{}, no("receipt", "receipts[%d]: %v", i, err)
	}
	r := v.Receipt
	approver, ok := book.Approvers.Find(r.Subject)
	approvedMinor := req.AmountMinor
	if r.AmountMinor > 0 {
		approvedMinor = r.AmountMinor
	}
	switch {
	case r.ClaimID != cl.ID || r.RequestSHA256 != req.SHA256():
		return authority.Approver{}, no("receipt", "receipts[%d] is for claim %s request %s, not this request", i, clip(r.ClaimID, 80), clip(r.RequestSHA256, 12))
	case r.Verdict != approvals.Approve:
		return authority.Approver{}, no("receipt", "receipts[%d] says %s", i, r.Verdict)
	case !ok:
		return authority.Approver{}, no("receipt", "receipts[%d]: %s is not in the approver directory", i, clip(r.Subject, 80))
	case approver.Is(cl.Claimant.Email) || approver.Is(cl.Claimant.StripeAccount):
		return authority.Approver{}, no("self-approval", "self-approval: %s is the claimant or the payee", approver.ID)
	case slices.ContainsFunc(rec.AmendedBy, approver.Is):
		return authority.Approver{}, no("amender", "%s amended the claim", approver.ID)
	case in.AmountMinor > approvedMinor:
		return authority.Approver{}, no("receipt", "%s approved %s, not %s", approver.ID, money(approvedMinor, cl.Currency), money(in.AmountMinor, cl.Currency))
	case approver.Limits[cl.Currency] < approvedMinor:
		return authority.Approver{}, no("over-limit", "%s may approve up to %s", approver.ID, money(approver.Limits[cl.Currency], cl.Currency))
	}
	return approver, nil
}

// outcomeHolds checks an outcome against its facts before it is told or
// recorded: paid needs the claim's payout paid by that transfer, withdrawn
// a claim the store says was withdrawn.
func (a *Activities) outcomeHolds(ctx context.Context, c Caller, rec store.Record, outcome, transferID string, payoutMinor int64) error {
	no := func(format string, args ...any) error {
		return a.refuse(ctx, c, rec.Claim.ID, "outcome", ErrForeignRun, "claim %s: outcome %s refused: "+format, append([]any{rec.Claim.ID, outcome}, args...)...)
	}
	switch outcome {
	case "paid":
		return a.paidBy(ctx, rec, transferID, payoutMinor, no)
	case "withdrawn":
		if rec.Status != store.StatusWithdrawn {
			return no("the claim is %s in the system of record", rec.Status)
		}
	case "rejected", "expired":
	default:
		return no("not an outcome (paid, rejected, expired, withdrawn)")
	}
	if transferID != "" || payoutMinor != 0 {
		return no("it names a payment")
	}
	return nil
}

// paidBy checks that the claim's payout was paid by transferID, for
// payoutMinor: from the payout reservation, or, for a claim paid before
// reservations existed, from the payment provider.
func (a *Activities) paidBy(ctx context.Context, rec store.Record, transferID string, payoutMinor int64, no func(string, ...any) error) error {
	p, err := a.Store.Payout(ctx, rec.Claim.ID)
	switch {
	case err == nil:
		if p.Status != store.PayoutPaid || p.TransferID != transferID || p.AmountMinor != payoutMinor {
			return no("the claim's payout is %s %s by %q, not %s by %q", money(p.AmountMinor, p.Currency), p.Status, p.TransferID,
				money(payoutMinor, rec.Claim.Currency), transferID)
		}
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	case transferID == "":
		return no("no transfer is named")
	case a.Stripe == nil:
		return no("the claim has no payout on record")
	}
	tr, found, err := a.getTransfer(ctx, transferID)
	if err != nil {
		return err
	}
	key := claim.StepKey(rec.Claim.ID, claim.StepPay)
	if !found || tr.TransferGroup != rec.Claim.ID || tr.Metadata["idempotency_key"] != string(key) || tr.Amount != payoutMinor {
		return no("the payment provider has no transfer %s of %s under %s", transferID, money(payoutMinor, rec.Claim.Currency), key)
	}
	return nil
}

func money(minor int64, currency string) string {
	return claim.FormatAmount(minor, currency) + " " + strings.ToUpper(currency)
}
