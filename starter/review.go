package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/statute"
	"github.com/durableclaims/durableclaims/internal/store"
)

// review is `starter --review-of CLAIM --reason "…" [--by WHO]`: the
// claimant asks a person to review a claim the rules decided alone against
// them (docs/law.md). The claims store records the request and registers
// the review claim CLAIM-review (Store.RequestReview, which refuses what
// may not be reviewed, naming why); then the review claim's run starts
// like any claim's, under its own ID. Run again, it finds the request and
// the run already there, and starts neither twice.
type review struct {
	of, reason, by string
}

func (rv *review) define(fs interface {
	StringVar(p *string, name, value, usage string)
}) {
	fs.StringVar(&rv.of, "review-of", "", "ask a person to review this claim's automated outcome: registers and starts CLAIM-review (with --reason)")
	fs.StringVar(&rv.reason, "reason", "", "with --review-of: why the claimant disagrees, in their words")
	fs.StringVar(&rv.by, "by", "", "with --review-of: who asks (default: the claim's claimant, by e-mail)")
}

// Exit codes of a refused review: the request may not be granted.
const exitRefused = 3

// runReview asks for the review and starts its run.
func runReview(o options, stdout, stderr io.Writer) int {
	policy, err := insurer.Load(config.Get("POLICY_FILE", ""), os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return exitInvalid
	}
	ends, err := reviewWindow(config.Get("JURISDICTION_RULES_FILE", ""), time.Duration(policy.ReviewWindow))
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return exitInvalid
	}
	l, err := connect()
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return exitFailed
	}
	defer l.close()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	by := o.review.by
	if by == "" {
		orig, err := l.st.GetClaim(ctx, o.review.of)
		if err != nil {
			fmt.Fprintln(stderr, "starter:", err)
			return exitRefused
		}
		by = orig.Claim.Claimant.Email
	}
	rv, existed, err := l.st.RequestReview(ctx, store.ReviewRequest{ClaimID: o.review.of, By: by, Reason: o.review.reason, WindowEnds: ends})
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrReviewNotClosed), errors.Is(err, store.ErrReviewByPerson),
		errors.Is(err, store.ErrReviewNotAdverse), errors.Is(err, store.ErrReviewWindow), errors.Is(err, store.ErrReviewInvalid):
		fmt.Fprintln(stderr, "starter: no review:", err)
		return exitRefused
	case err != nil:
		fmt.Fprintln(stderr, "starter:", err)
		return exitFailed
	}
	said := "requested"
	if existed {
		said = "was already requested"
	}
	fmt.Fprintf(stdout, "review of %s %s by %s at %s (decided by %s at %s; the window ends %s)\n", rv.ClaimID, said, rv.By,
		rv.At.Format(time.RFC3339), rv.DecidedBy, rv.DecidedAt.Format(time.RFC3339), rv.WindowEnds.Format(time.RFC3339))
	rec, err := l.st.GetClaim(ctx, rv.ReviewID)
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return exitFailed
	}
	in, err := o.input(rec.Claim)
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return exitInvalid
	}
	if _, err := start(ctx, l.c, l.st, in, o.priority, stdout, true); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", rv.ReviewID, err)
		return outcomeCode(err)
	}
	return exitOK
}

func outcomeCode(err error) int {
	if outcomeOf(err) == conflict {
		return exitInvalid
	}
	return exitFailed
}

// reviewWindow says when the review window of a claim decided at decided
// ends: under a jurisdiction's rules, the rule set's review_window counted
// from the decision as every statutory clock is (the days the decision
// letter states); where none applied, the insurer's policy's
// review_window. The rule sets are the worker's (JURISDICTION_RULES_FILE:
// the shipped ones when unset).
func reviewWindow(rulesFile string, policyWindow time.Duration) (func(string, time.Time) (time.Time, error), error) {
	var rules *statute.Rules
	if rulesFile != "none" {
		r, err := statute.Load(rulesFile)
		if err != nil {
			return nil, fmt.Errorf("JURISDICTION_RULES_FILE: %w", err)
		}
		rules = &r
	}
	return func(jurisdiction string, decided time.Time) (time.Time, error) {
		if jurisdiction == "" {
			return decided.Add(policyWindow), nil
		}
		if rules == nil {
			return time.Time{}, fmt.Errorf("the claim was decided under %s's rules, and JURISDICTION_RULES_FILE is none", jurisdiction)
		}
		rec, err := rules.Record(jurisdiction)
		if err != nil {
			return time.Time{}, err
		}
		law, err := rec.Law()
		if err != nil {
			return time.Time{}, err
		}
		return law.Due(law.Jurisdiction().ReviewWindow, decided), nil
	}, nil
}
