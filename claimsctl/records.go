package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

func openStore() (*store.Store, error) { return store.Open(config.ClaimsDB()) }

// withdraw marks claims withdrawn in the system of record. A claim waiting
// for approval is told (the changed signal), reads the claim again and ends
// withdrawn, unpaid, at once; one that missed the signal does so when its
// wait ends.
func withdraw(ctx context.Context, ids []string, out io.Writer) error {
	st, err := openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	for _, id := range ids {
		rec, err := st.Withdraw(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: withdrawn (version %d)%s\n", id, rec.Version, tell(ctx, id))
	}
	return nil
}

// tell sends a claim's run the changed signal after its record changed, so
// that a wait reads the claim again now rather than at the next decision.
// The record is what counts and it is written: a run that cannot be told
// (none is open, Temporal is down) reads it at its next step all the same,
// so a failure here is reported and is not an error.
func tell(ctx context.Context, id string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return "; its run was not told (" + err.Error() + "): it reads the change at its next step"
	}
	defer c.Close()
	err = c.SignalWorkflow(ctx, id, "", approvals.SignalChanged, nil)
	var notFound *serviceerror.NotFound
	switch {
	case err == nil:
		return "; its run was told"
	case errors.As(err, &notFound):
		return "; no run is open"
	}
	return "; its run was not told (" + err.Error() + "): it reads the change at its next step"
}

// amend changes an open claim's amount or payee. An approval given for the
// old version is void: the run, told at once, raises a new request with a
// new hash.
func amend(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("amend", flag.ContinueOnError)
	amount := fs.String("amount", "", "new claimed amount, a decimal string")
	account := fs.String("account", "", "new payee Stripe account (acct_…)")
	by := fs.String("by", "", "who amends the claim (an approver ID or an e-mail): they may not approve it")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || (*amount == "" && *account == "") || *by == "" {
		return errors.New("usage: claimsctl amend CLAIM --by WHO [--amount 2100.00] [--account acct_…]")
	}
	st, err := openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	rec, err := st.Amend(ctx, fs.Arg(0), *by, func(c *claim.Claim) error {
		if *amount != "" {
			minor, err := claim.ParseAmount(*amount, c.Currency)
			if err != nil {
				return fmt.Errorf("--amount: %w", err)
			}
			c.AmountMinor = minor
		}
		if *account != "" {
			c.Claimant.StripeAccount = *account
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: amended by %s to %s %s, payee %s (version %d)%s\n", rec.Claim.ID, *by, rec.Claim.Amount(), rec.Claim.Currency,
		rec.Claim.Claimant.StripeAccount, rec.Version, tell(ctx, rec.Claim.ID))
	return nil
}

// audit prints a claim's decision trail: every attempt that reached the
// workflow (from the audit record, or the live status while it runs) and
// every update refused before history, from the store.
func audit(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: claimsctl audit [--json] CLAIM")
	}
	id := fs.Arg(0)
	st, err := openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	trail, err := readTrail(ctx, st, id)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(trail)
	}
	trail.print(out)
	return nil
}

// auditTrail is a claim's decisions: the requests and their approvals, each
// attempt to decide, and the updates refused before they reached history.
type auditTrail struct {
	ClaimID   string                `json:"claim_id"`
	Source    string                `json:"source"`
	Outcome   string                `json:"outcome,omitempty"`
	Approvals []*approvals.Approval `json:"approvals,omitempty"`
	Attempts  []approvals.Attempt   `json:"decision_attempts"`
	Refused   []store.Refusal       `json:"refused_updates"`
}

// readTrail reads a claim's trail from its audit record (step 9), or, for
// a claim still running, from its live status.
func readTrail(ctx context.Context, st *store.Store, id string) (auditTrail, error) {
	trail := auditTrail{ClaimID: id}
	if rec, err := st.Audit(ctx, id); err == nil {
		var ar workflows.AuditRecord
		if err := json.Unmarshal(rec, &ar); err != nil {
			return trail, err
		}
		trail.Source, trail.Outcome, trail.Approvals, trail.Attempts = "audit record (step 9)", ar.Outcome, ar.Approvals, ar.Attempts
	} else if errors.Is(err, store.ErrNotFound) {
		s, err := claimStatus(ctx, id)
		switch {
		case err == nil:
			trail.Source, trail.Attempts = "live status (the claim is still running)", s.Attempts
			if s.Approval != nil {
				trail.Approvals = []*approvals.Approval{s.Approval}
			}
		default:
			if _, gerr := st.GetClaim(ctx, id); gerr != nil {
				return trail, fmt.Errorf("%s has no audit record yet, and %w", id, err)
			}
			// A registered claim whose run answers no query (dead-lettered
			// as tampered, or stuck): what the store recorded is still its.
			trail.Source = fmt.Sprintf("claims store only: no audit record yet, and %v", err)
		}
	} else {
		return trail, err
	}
	var err error
	trail.Refused, err = st.Refusals(ctx, id)
	return trail, err
}

// print writes the trail for a person: each request and its decision,
// then every attempt, accepted or refused.
func (trail auditTrail) print(out io.Writer) {
	id := trail.ClaimID
	fmt.Fprintf(out, "%s — from the %s", id, trail.Source)
	if trail.Outcome != "" {
		fmt.Fprintf(out, "; outcome %s", trail.Outcome)
	}
	fmt.Fprintln(out)
	for i, ap := range trail.Approvals {
		fmt.Fprintf(out, "  request %d: %s %s to %s, sha256 %s, requested %s\n", i+1, ap.Request.Amount, ap.Request.Currency,
			ap.Request.Payee, ap.RequestSHA256[:12], ap.RequestedAt.Format(time.RFC3339))
		if ap.Quorum > 1 {
			fmt.Fprintf(out, "    four eyes: %d of %d approvals\n", len(ap.Votes), ap.Quorum)
			for _, v := range ap.Votes {
				fmt.Fprintf(out, "      approved by %s (%s) via %s at %s%s\n", v.Approver, v.Role, v.Channel, v.DecidedAt.Format(time.RFC3339), proofLine(&v))
			}
		}
		if d := ap.Decision; d != nil {
			bound := "not bound to a hash"
			if d.HashBound {
				bound = "bound to the request hash"
			}
			fmt.Fprintf(out, "    decision: %s by %s (%s) via %s at %s, %s\n", d.Verdict, d.Approver, d.Role, d.Channel, d.DecidedAt.Format(time.RFC3339), bound)
			if p := proofLine(d); p != "" {
				fmt.Fprintf(out, "     %s\n", p)
			}
			if d.Approved != nil {
				fmt.Fprintf(out, "      approved at a lower amount: %s %s (request sha256 %s)\n", d.Approved.Amount, d.Approved.Currency, d.ApprovedSHA256[:12])
			}
		}
		if ap.Voided != "" {
			fmt.Fprintf(out, "    voided: %s\n", ap.Voided)
		}
	}
	fmt.Fprintln(out, "  attempts:")
	for _, at := range trail.Attempts {
		verdict := "ACCEPTED"
		if !at.Accepted {
			verdict = "refused: " + at.Refusal
			if at.Code != "" && !strings.HasPrefix(at.Refusal, at.Code) {
				verdict = "refused (" + at.Code + "): " + at.Refusal
			}
		}
		fmt.Fprintf(out, "    %s %-6s %-7s %-14s %-10s %s\n", at.At.Format(time.RFC3339), at.Channel, at.Decision, dash(at.Approver), dash(at.Role), verdict)
	}
	for _, r := range trail.Refused {
		fmt.Fprintf(out, "    %s %-6s %-7s %-14s %-10s refused before history: %s\n", r.At.Format(time.RFC3339), r.Channel, r.Decision, dash(r.Approver), "-", r.Reason)
	}
}

// proofLine says what proved a decision.
func proofLine(d *approvals.Decision) string {
	switch d.Proof {
	case approvals.ProofReceipt:
		line := fmt.Sprintf(" proven by a receipt signed with %s, jti %s", d.KeyID, d.ReceiptID)
		if d.VouchedBy != "" {
			line += fmt.Sprintf(" (the %s service vouching for %s)", d.VouchedBy, d.Approver)
		}
		return line
	case approvals.ProofUnauthenticated:
		return " UNAUTHENTICATED: a plain decision accepted under the development switch"
	}
	return ""
}

// claimStatus asks a claim's workflow for its status.
func claimStatus(ctx context.Context, id string) (workflows.Status, error) {
	var s workflows.Status
	c, err := dial(ctx)
	if err != nil {
		return s, err
	}
	defer c.Close()
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return s, fmt.Errorf("its status query failed: %w", err)
	}
	return s, v.Get(&s)
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// parseInterspersed lets flags come before or after the claim ID.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(pos)
}
