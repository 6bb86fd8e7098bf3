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

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/claimfile"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	claimstory "github.com/durableclaims/durableclaims/story"
	"github.com/durableclaims/durableclaims/workflows"
)

// story is a claim run read from its event history (package story), with
// the model calls the usage ledger counts.
type story struct {
	*claimstory.Story
	TraceURL   string         `json:"trace_url,omitempty"`
	ModelCalls map[string]int `json:"model_calls"`
	// ReviewOf is, for a review claim, the claim it reviews and the
	// claimant's request; Review, for a claim whose claimant asked for a
	// person's review, that request and its review claim.
	ReviewOf *claim.Review `json:"review_of,omitempty"`
	Review   *store.Review `json:"review,omitempty"`
}

func show(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := store.Open(config.ClaimsDB())
	if err != nil {
		return err
	}
	defer st.Close()
	dc, err := config.DataConverter() // decrypts when codec keys are configured
	if err != nil {
		return err
	}
	for _, id := range fs.Args() {
		read, err := claimstory.Read(ctx, c, dc, id)
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			// Temporal forgot the run (retention): the claim file tells it.
			if err := showFromFile(ctx, id, *asJSON, out); err != nil {
				return fmt.Errorf("%s: the run's history is gone and %w", id, err)
			}
			continue
		}
		if err != nil {
			return err
		}
		s := &story{Story: read, TraceURL: config.TraceURL(read.TraceID)}
		calls, err := st.ModelCalls(ctx, id)
		if err != nil {
			return err
		}
		if err := s.reviews(ctx, st, id); err != nil {
			return err
		}
		s.ModelCalls = map[string]int{"triage": 0, "assess": 0}
		for _, mc := range calls {
			switch {
			case mc.Key.Within(claim.StepKey(id, claim.StepTriage)):
				s.ModelCalls["triage"]++
			case mc.Key.Within(claim.StepKey(id, claim.StepAssess)):
				s.ModelCalls["assess"]++
			}
		}
		if *asJSON {
			if err := json.NewEncoder(out).Encode(s); err != nil {
				return err
			}
			continue
		}
		s.print(out)
	}
	return nil
}

// reviews finds what the claims store holds of a claimant's review: the
// claim's own link to the claim it reviews, and a review asked of it.
func (s *story) reviews(ctx context.Context, st *store.Store, id string) error {
	rec, err := st.GetClaim(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	s.ReviewOf = rec.Claim.ReviewOf
	rv, err := st.ReviewOf(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	s.Review = &rv
	return nil
}

// printReviews says what the claim reviews, or who asked for its review.
func (s *story) printReviews(out io.Writer) {
	if rv := s.ReviewOf; rv != nil {
		fmt.Fprintf(out, "  a person's review of %s's automated outcome (%s of %s paid), asked for by %s at %s: %s\n", rv.Of,
			claim.FormatAmount(rv.PaidMinor, s.currency()), claim.FormatAmount(rv.ClaimedMinor, s.currency()), rv.By, rv.At.Format(time.RFC3339), rv.Reason)
	}
	if rv := s.Review; rv != nil {
		fmt.Fprintf(out, "  review asked for by %s at %s (decided by %s at %s, window to %s): %s, %s\n", rv.By, rv.At.Format(time.RFC3339),
			rv.DecidedBy, rv.DecidedAt.Format(time.RFC3339), rv.WindowEnds.Format(time.RFC3339), rv.ReviewID, rv.Reason)
	}
}

func (s *story) currency() string {
	if s.Result != nil && s.Result.Currency != "" {
		return s.Result.Currency
	}
	return "usd"
}

func (s *story) print(out io.Writer) {
	r := s.Result
	if r != nil {
		line := fmt.Sprintf("%s: %s", s.ClaimID, r.Status)
		if r.TransferID != "" {
			line += fmt.Sprintf(", %s %s paid by transfer %s", r.Payout, r.Currency, r.TransferID)
		}
		if r.Reason != "" {
			line += " (" + r.Reason + ")"
		}
		fmt.Fprintln(out, line)
	} else {
		fmt.Fprintf(out, "%s: %s\n", s.ClaimID, s.State)
	}
	if s.TraceID != "" {
		fmt.Fprintf(out, "  trace %s %s\n", s.TraceID, s.TraceURL)
	}
	s.printReviews(out)
	currency := s.currency()
	line := func(rec *claimstory.Step) {
		fmt.Fprintf(out, "  step %d %-9s %s\n", rec.Step, rec.StepName, describe(rec, currency))
	}
	for step := claim.StepIntake; step <= claim.StepAudit; step++ {
		for _, rec := range s.Steps {
			if rec.Step == int(step) && !rec.Reread {
				line(rec)
			}
		}
		switch {
		case step == claim.StepCoverage && len(s.Steps) > 2:
			fmt.Fprintf(out, "  step 3 %-9s computed in workflow code: no I/O, nothing to checkpoint\n", step)
		case step == claim.StepApproval && r != nil && r.Approval != nil:
			ap := r.Approval
			if d := ap.Decision; d != nil {
				fmt.Fprintf(out, "  step 5 %-9s parked %s (%s), then %s by %s via %s%s\n", step,
					d.DecidedAt.Sub(ap.RequestedAt).Round(time.Millisecond), d.Stage, decided(d.Verdict), d.Approver, d.Channel, proof(d))
				if d.BuildID != "" || d.PolicyVersion != "" {
					fmt.Fprintf(out, "         %-9s accepted on build %s under policy %s\n", "", dash(d.BuildID), dash(version(d.PolicyVersion)))
				}
			} else if ap.Expired {
				fmt.Fprintf(out, "  step 5 %-9s nobody decided: escalated, then expired at %s\n", step, ap.Deadline.Format(time.RFC3339))
			}
			quorum(out, ap)
		case step == claim.StepApproval && r == nil && s.Pending != nil && s.Pending.Decision == nil:
			ap := s.Pending
			fmt.Fprintf(out, "  step 5 %-9s waiting (%s) for a decision on %s %s, request sha256 %s, deadline %s\n", step, ap.Stage,
				ap.Request.Amount, strings.ToUpper(ap.Request.Currency), ap.RequestSHA256[:12], ap.Deadline.Format(time.RFC3339))
			quorum(out, ap)
		}
		for _, rec := range s.Steps {
			if rec.Step == int(step) && rec.Reread {
				line(rec)
			}
		}
	}
	if r != nil && r.Decided != nil {
		fmt.Fprintf(out, "  %s\n", decidedLine(r.Decided))
	} else if r != nil && r.PolicyVersion != "" {
		fmt.Fprintf(out, "  policy %s\n", version(r.PolicyVersion))
	}
	for _, sig := range s.Signals {
		fmt.Fprintf(out, "  signal %s\n", sig)
	}
	for _, w := range s.TaskLosses {
		fmt.Fprintf(out, "  %s\n", w)
	}
	fmt.Fprintf(out, "  model calls: %d (triage %d, assess %d)\n", s.ModelCalls["triage"]+s.ModelCalls["assess"], s.ModelCalls["triage"], s.ModelCalls["assess"])
}

// decidedLine says what decided the outcome: how, on which build, under
// which policy, on which model answers.
func decidedLine(d *workflows.Decided) string {
	by := "by the rules"
	switch d.By {
	case workflows.DecidedByApprover:
		by = "by an approver"
	case workflows.DecidedByPolicy:
		by = "by the policy's final outcome"
	}
	line := fmt.Sprintf("decided: %s %s, on build %s, under policy %s", decided(d.Verdict), by, dash(d.BuildID), dash(version(d.PolicyVersion)))
	if len(d.ModelAnswers) > 0 {
		answers := make([]string, len(d.ModelAnswers))
		for i, a := range d.ModelAnswers {
			answers[i] = short(a)
		}
		line += ", on model answers " + strings.Join(answers, ", ")
	} else {
		line += ", on no model answer"
	}
	return line
}

// answeredBy names what gave a model answer: the model, its prompt version
// and the build of the worker that asked (each when recorded).
func answeredBy(model, prompt, build string) string {
	s := model
	if prompt != "" {
		s += ", prompt " + version(prompt)
	}
	if build != "" {
		s += ", build " + build
	}
	return s
}

// version is a prompt or policy version as a person reads it: "sha256:"
// and 12 hex digits, or a hand-numbered version whole.
func version(v string) string {
	if rest, ok := strings.CutPrefix(v, "sha256:"); ok {
		return "sha256:" + short(rest)
	}
	return v
}

// proof says what proved a decision's approver.
func proof(d *approvals.Decision) string {
	switch d.Proof {
	case approvals.ProofReceipt:
		if d.VouchedBy != "" {
			return fmt.Sprintf(" (receipt signed by %s's key %s)", d.VouchedBy, d.KeyID)
		}
		return fmt.Sprintf(" (receipt signed with %s)", d.KeyID)
	case approvals.ProofUnauthenticated:
		return " (UNAUTHENTICATED: accepted under the development switch)"
	}
	return ""
}

// quorum prints a four-eyes approval's votes so far.
func quorum(out io.Writer, ap *approvals.Approval) {
	for _, h := range ap.Handoffs {
		note := ""
		if h.Note != "" {
			note = ": " + h.Note
		}
		fmt.Fprintf(out, "         %-9s handed on by %s to %s at %s%s\n", "", h.From, h.To, h.At.Format(time.RFC3339), note)
	}
	if ap.Quorum < 2 {
		return
	}
	var who []string
	for _, v := range ap.Votes {
		who = append(who, v.Approver)
	}
	fmt.Fprintf(out, "         %-9s four eyes: %d of %d approvals (%s)\n", "", len(ap.Votes), ap.Quorum, strings.Join(who, ", "))
}

// describe says what a step did and what it recorded.
func describe(rec *claimstory.Step, currency string) string {
	var b strings.Builder
	if rec.Attempt > 1 {
		fmt.Fprintf(&b, "RESUMED: attempt %d on %s after %q; ", rec.Attempt, rec.Worker, rec.LastFailure)
	}
	b.WriteString(rec.Outcome)
	if rec.Local {
		b.WriteString(" (local)")
	}
	if detail := detail(rec, currency); detail != "" {
		b.WriteString(": " + detail)
	}
	return b.String()
}

func detail(rec *claimstory.Step, currency string) string {
	if rec.Output == nil {
		return ""
	}
	switch rec.Activity {
	case "LoadClaim":
		var o activities.LoadClaimResult
		if json.Unmarshal(rec.Output, &o) == nil {
			what := "claim"
			if rec.Reread {
				what = "claim re-read after the wait"
			}
			line := fmt.Sprintf("%s version %d, %s %s, %s", what, o.Version, o.Claim.Amount(), o.Claim.Currency, o.Status)
			if o.PolicyVersion != "" && !rec.Reread {
				line += ", policy " + version(o.PolicyVersion)
			}
			return line
		}
	case "TriageClaim":
		var o activities.TriageResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return fmt.Sprintf("%s, %s severity, fraud score %d (%s, output %s)", o.Output.Category, o.Output.Severity, o.Output.FraudScore,
				answeredBy(o.Model, o.PromptVersion, o.BuildID), short(o.OutputSHA256))
		}
	case "TriageTurn":
		var o activities.TurnResult
		if json.Unmarshal(rec.Output, &o) == nil {
			cost := fmt.Sprintf("%d+%d tokens, $%.6f", o.Usage.TokensIn, o.Usage.TokensOut, float64(o.Usage.CostMicros)/1e6)
			if t := o.Triage; t != nil {
				what := fmt.Sprintf("%s, %s severity, fraud score %d", t.Category, t.Severity, t.FraudScore)
				if t.NeedsReview {
					what = "needs a human: " + t.ReviewReason
				}
				return fmt.Sprintf("%s (%s, %s, output %s)", what, answeredBy(o.Model, o.PromptVersion, o.BuildID), cost, short(o.OutputSHA256))
			}
			names := make([]string, 0, len(o.ToolCalls))
			for _, tc := range o.ToolCalls {
				names = append(names, tc.Name)
			}
			return fmt.Sprintf("asks for %s (%s, %s)", strings.Join(names, ", "), answeredBy(o.Model, o.PromptVersion, o.BuildID), cost)
		}
	case "CallTool":
		var o activities.ToolResult
		if json.Unmarshal(rec.Output, &o) == nil {
			content := o.Content
			if len(content) > 80 {
				content = content[:77] + "..."
			}
			return fmt.Sprintf("tool %s: %s", o.Name, content)
		}
	case "AssessClaim":
		var o activities.AssessResult
		if json.Unmarshal(rec.Output, &o) == nil {
			what := fmt.Sprintf("recommends %s %s", claim.FormatAmount(o.Output.RecommendedMinor, currency), currency)
			if o.Output.NeedsReview {
				what += ", asks for a human"
			}
			cost := ""
			if o.Usage.CostMicros > 0 {
				cost = fmt.Sprintf(", %d+%d tokens, $%.6f", o.Usage.TokensIn, o.Usage.TokensOut, float64(o.Usage.CostMicros)/1e6)
			}
			return fmt.Sprintf("%s (%s%s, output %s)", what, answeredBy(o.Model, o.PromptVersion, o.BuildID), cost, short(o.OutputSHA256))
		}
	case "OpenApproval":
		var o activities.OpenApprovalResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return fmt.Sprintf("approver directory read (%d approvers)", len(o.Approvers))
		}
	case "RemindApprovers":
		return "reminder to the adjusters"
	case "EscalateApproval":
		return "escalation notice to the supervisors"
	case "PayClaimant":
		var o activities.PayResult
		if json.Unmarshal(rec.Output, &o) == nil {
			s := "transfer " + o.TransferID
			if o.Replayed {
				s += fmt.Sprintf(" REPLAYED (the original transfer, found by %s; no new money moved)", o.ReplayedBy)
			}
			return s
		}
	case "NotifyClaimant":
		var o activities.NotifyResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return "message " + o.MessageID
		}
	case "CloseClaim":
		var o activities.CloseResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return "closed at " + o.ClosedAt.Format(time.RFC3339)
		}
	case "WriteAudit":
		var o activities.AuditResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return "audit record " + short(o.SHA256)
		}
	}
	return ""
}

func short(sum string) string { return sum[:min(12, len(sum))] }

// decided is what a verdict did, in words: "approved", "rejected".
func decided(v approvals.Verdict) string {
	switch v {
	case approvals.Approve:
		return "approved"
	case approvals.Reject:
		return "rejected"
	case approvals.Handoff:
		return "handed on"
	}
	return string(v)
}

// showFromFile tells a claim's story from its claim file, for a run the
// Temporal server no longer holds, and says so.
func showFromFile(ctx context.Context, id string, asJSON bool, out io.Writer) error {
	r, err := openRecords(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	row, body, err := r.read(ctx, id)
	if err != nil {
		return fmt.Errorf("no claim file can be read: %w", err)
	}
	var f claimfile.File
	if err := json.Unmarshal(body, &f); err != nil {
		return fmt.Errorf("its claim file is not readable: %w", err)
	}
	if asJSON {
		return json.NewEncoder(out).Encode(map[string]any{"source": "claim file", "claim_file": row, "file": f})
	}
	fmt.Fprintf(out, "%s: %s (read from its claim file %s, log index %d, written %s: the run's history is gone from Temporal)\n",
		id, f.Outcome, short(row.SHA256), row.LogIndex, f.WrittenAt.Format(time.RFC3339))
	fmt.Fprintf(out, "  basis: %s\n", f.Basis)
	if f.TraceID != "" {
		fmt.Fprintf(out, "  trace %s %s\n", f.TraceID, config.TraceURL(f.TraceID))
	}
	var rec workflows.AuditRecord
	if json.Unmarshal(f.Record, &rec) == nil {
		if d := rec.Decided; d != nil {
			fmt.Fprintf(out, "  %s\n", decidedLine(&workflows.Decided{By: d.By, Verdict: approvals.Verdict(d.Verdict), BuildID: d.BuildID,
				PolicyVersion: d.PolicyVersion, ModelAnswers: d.ModelAnswers}))
		} else if rec.PolicyVersion != "" {
			fmt.Fprintf(out, "  policy %s\n", version(rec.PolicyVersion))
		}
		for _, m := range rec.Models {
			if m.PromptVersion != "" || m.BuildID != "" {
				fmt.Fprintf(out, "  model    step %d turn %d: %s, output %s\n", m.Step, m.Turn, answeredBy(m.Model, m.PromptVersion, m.BuildID), short(m.OutputSHA256))
			}
		}
	}
	for _, st := range f.Steps {
		kind := "activity"
		if st.Local {
			kind = "local"
		}
		line := fmt.Sprintf("  %-8s %-17s %s", kind, st.Activity, st.Outcome)
		if st.Attempt > 1 {
			line += fmt.Sprintf(" (attempt %d)", st.Attempt)
		}
		if st.Failure != "" {
			line += ": " + st.Failure
		}
		fmt.Fprintln(out, line)
	}
	for _, m := range f.Messages {
		fmt.Fprintf(out, "  %s %s at %s from %s: %s\n", m.Kind, m.Name, m.At.Format(time.RFC3339), m.From, dash(m.Outcome))
	}
	fmt.Fprintf(out, "  %d history events, %d documents, kept until %s\n", len(f.Timeline), len(f.Documents), f.RetainUntil.Format("2006-01-02"))
	return nil
}
