package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claimfile"
	"github.com/durableclaims/durableclaims/internal/statute"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

// claimsctl exam: the market-conduct report. For every claim closed in a
// window, from its claim file (so it works years after Temporal forgot the
// run): the jurisdiction, each date an examiner checks, every clock with
// the days elapsed against its limit, the letters sent and the breaches.

// examClaim is one claim as the report gives it (DESIGN.md's names).
type examClaim struct {
	ClaimID        string       `json:"claim_id"`
	Jurisdiction   string       `json:"jurisdiction"`
	RuleSet        string       `json:"rule_set"`
	Outcome        string       `json:"outcome"`
	NoticeAt       *time.Time   `json:"notice_at"`
	AcknowledgedAt *time.Time   `json:"acknowledged_at"`
	ProofOfLossAt  *time.Time   `json:"proof_of_loss_at"`
	DecidedAt      *time.Time   `json:"decided_at"`
	PaidAt         *time.Time   `json:"paid_at"`
	Clocks         []examClock  `json:"clocks"`
	Letters        []examLetter `json:"letters"`
	Breaches       []string     `json:"breaches"`
	// ReviewOf names, for a review claim, the claim whose automated outcome
	// a person reviewed at its claimant's request.
	ReviewOf string `json:"review_of,omitempty"`
}

// examClock is a clock as the claim file judged it, with the days elapsed
// from its start to its event (or to the close, when unmet), in its unit.
type examClock struct {
	statute.ClockState
	Elapsed *int `json:"elapsed"`
}

type examLetter struct {
	Kind   string    `json:"kind"`
	SentAt time.Time `json:"sent_at"`
	SHA256 string    `json:"sha256"`
}

func exam(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("exam", flag.ContinueOnError)
	from := fs.String("from", "", "first day of the window, YYYY-MM-DD (UTC): claims whose file was written then or after")
	to := fs.String("to", "", "last day of the window, YYYY-MM-DD (UTC), inclusive")
	only := fs.String("jurisdiction", "", "only claims of this jurisdiction (US-CA, …)")
	asJSON := fs.Bool("json", false, "one JSON object per claim, a line each (default: CSV with a header)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lo, hi, err := examWindow(*from, *to)
	if err != nil {
		return err
	}
	r, err := openRecords(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	claims, skipped, err := r.examine(ctx, lo, hi, *only)
	if err != nil {
		return err
	}
	if skipped > 0 {
		fmt.Fprintf(os.Stderr, "claimsctl exam: %d claim files in the window record no jurisdiction's rules (closed before them, or by a worker with JURISDICTION_RULES_FILE=none)\n", skipped)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		for _, c := range claims {
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
		return nil
	}
	return examCSV(out, claims)
}

// examWindow reads --from and --to as whole UTC days: [from, to+1 day).
func examWindow(from, to string) (time.Time, time.Time, error) {
	if from == "" || to == "" {
		return time.Time{}, time.Time{}, fmt.Errorf("exam: --from and --to are required (YYYY-MM-DD)")
	}
	lo, err := time.Parse(time.DateOnly, from)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("exam: --from %q: want YYYY-MM-DD", from)
	}
	hi, err := time.Parse(time.DateOnly, to)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("exam: --to %q: want YYYY-MM-DD", to)
	}
	if hi.Before(lo) {
		return time.Time{}, time.Time{}, fmt.Errorf("exam: --to %s is before --from %s", to, from)
	}
	return lo, hi.AddDate(0, 0, 1), nil
}

// examine reads the last claim file of every claim written in [lo, hi).
func (r *records) examine(ctx context.Context, lo, hi time.Time, only string) ([]examClaim, int, error) {
	rows, err := r.st.ClaimFiles(ctx)
	if err != nil {
		return nil, 0, err
	}
	last := map[string]store.ClaimFile{}
	for _, row := range rows {
		if row.WrittenAt.Before(lo) || !row.WrittenAt.Before(hi) {
			continue
		}
		if was, ok := last[row.ClaimID]; !ok || row.LogIndex > was.LogIndex {
			last[row.ClaimID] = row
		}
	}
	var claims []examClaim
	skipped := 0
	for _, row := range last {
		body, err := r.body(ctx, row)
		if err != nil {
			return nil, 0, err
		}
		c, ok, err := examOf(body)
		if err != nil {
			return nil, 0, fmt.Errorf("claim file of %s: %w", row.ClaimID, err)
		}
		if !ok {
			skipped++
			continue
		}
		if only == "" || c.Jurisdiction == only {
			claims = append(claims, c)
		}
	}
	slices.SortFunc(claims, func(a, b examClaim) int { return strings.Compare(a.ClaimID, b.ClaimID) })
	return claims, skipped, nil
}

// examOf is one claim file's report, false when it records no law.
func examOf(body []byte) (examClaim, bool, error) {
	var f claimfile.File
	if err := json.Unmarshal(body, &f); err != nil {
		return examClaim{}, false, err
	}
	var rec workflows.AuditRecord
	if err := json.Unmarshal(f.Record, &rec); err != nil {
		return examClaim{}, false, fmt.Errorf("its record: %w", err)
	}
	l := rec.Law
	if l == nil {
		return examClaim{}, false, nil
	}
	notice := l.NoticeAt
	c := examClaim{ClaimID: f.ClaimID, Jurisdiction: l.Jurisdiction, RuleSet: l.RuleSet, Outcome: rec.Outcome,
		NoticeAt: &notice, AcknowledgedAt: l.AcknowledgedAt, ProofOfLossAt: l.ProofOfLossAt, DecidedAt: l.DecidedAt,
		PaidAt: l.PaidAt, Breaches: l.Breaches, Letters: []examLetter{}}
	if rec.ReviewOf != nil {
		c.ReviewOf = rec.ReviewOf.Of
	}
	if c.Breaches == nil {
		c.Breaches = []string{}
	}
	law, hasLaw := recordedLaw(f)
	for _, cs := range l.Clocks {
		ec := examClock{ClockState: cs}
		if hasLaw && cs.StartedAt != nil {
			end := rec.ClosedAt
			if cs.MetAt != nil {
				end = *cs.MetAt
			}
			n := law.Elapsed(cs.Unit, *cs.StartedAt, end)
			ec.Elapsed = &n
		}
		c.Clocks = append(c.Clocks, ec)
	}
	for _, s := range l.Letters {
		c.Letters = append(c.Letters, examLetter{Kind: string(s.Kind), SentAt: s.SentAt, SHA256: s.SHA256})
	}
	return c, true, nil
}

// recordedLaw is the jurisdiction's rules as intake recorded them in the
// run, from the claim file's first step: the calendar the days are counted in.
func recordedLaw(f claimfile.File) (statute.Law, bool) {
	for _, s := range f.Steps {
		if s.Activity != "LoadClaim" {
			continue
		}
		var res activities.LoadClaimResult
		if json.Unmarshal(s.Output, &res) != nil || res.Law == nil {
			return statute.Law{}, false
		}
		law, err := res.Law.Law()
		return law, err == nil
	}
	return statute.Law{}, false
}

// examCSV writes the report as CSV: a row per claim, the three clocks in
// columns.
func examCSV(out io.Writer, claims []examClaim) error {
	w := csv.NewWriter(out)
	head := []string{"claim_id", "jurisdiction", "rule_set", "outcome", "notice_at", "acknowledged_at", "proof_of_loss_at", "decided_at", "paid_at"}
	clocks := []string{"acknowledge", "decide", "pay"}
	for _, c := range clocks {
		head = append(head, c+"_limit", c+"_unit", c+"_due_at", c+"_met_at", c+"_elapsed", c+"_breached")
	}
	head = append(head, "letters", "breaches", "review_of")
	if err := w.Write(head); err != nil {
		return err
	}
	at := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, c := range claims {
		row := []string{c.ClaimID, c.Jurisdiction, c.RuleSet, c.Outcome, at(c.NoticeAt), at(c.AcknowledgedAt), at(c.ProofOfLossAt), at(c.DecidedAt), at(c.PaidAt)}
		for _, name := range clocks {
			i := slices.IndexFunc(c.Clocks, func(k examClock) bool { return k.Clock == name })
			if i < 0 {
				row = append(row, "", "", "", "", "", "")
				continue
			}
			k := c.Clocks[i]
			elapsed := ""
			if k.Elapsed != nil {
				elapsed = strconv.Itoa(*k.Elapsed)
			}
			row = append(row, strconv.Itoa(k.Limit), string(k.Unit), at(k.DueAt), at(k.MetAt), elapsed, strconv.FormatBool(k.Breached))
		}
		var kinds []string
		for _, l := range c.Letters {
			kinds = append(kinds, l.Kind)
		}
		row = append(row, strings.Join(kinds, ";"), strings.Join(c.Breaches, ";"), c.ReviewOf)
		if err := w.Write(row); err != nil {
			return err
		}
	}
	w.Flush()
	return w.Error()
}
