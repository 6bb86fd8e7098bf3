package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/store"
)

// claimsctl deadlines: the claims waiting for a person, against the
// regulator's decision clock their run drew the wait inside (the wait's
// due_by), soonest first, with who has them: the operations view of the
// law's clock (docs/law.md). Closed claims are exam's.

// deadlineRow is one waiting claim and its statutory due date.
type deadlineRow struct {
	ClaimID      string    `json:"claim_id"`
	Jurisdiction string    `json:"jurisdiction"`
	Stage        string    `json:"stage"`
	Overdue      bool      `json:"overdue"`
	DueBy        time.Time `json:"due_by"`
	Left         string    `json:"left"`
	PastDue      bool      `json:"past_due"`
	Adjuster     string    `json:"adjuster"`
}

func deadlines(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("deadlines", flag.ContinueOnError)
	within := fs.Duration("within", 0, "only claims due within this long (0: every waiting claim with a statutory date)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	st, err := openStore()
	if err != nil {
		return 0, err
	}
	defer st.Close()
	rows, err := st.ApprovalQueue(ctx, store.QueueFilter{}, nil, 100_000)
	if err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	var due []deadlineRow
	for _, r := range rows {
		var a approvals.Approval
		if json.Unmarshal(r.Summary, &a) != nil || a.DueBy.IsZero() {
			continue
		}
		left := a.DueBy.Sub(now)
		if *within > 0 && left > *within {
			continue
		}
		who := r.AssignedTo
		if who == "" {
			who = "(" + r.Stage + " queue)"
		}
		due = append(due, deadlineRow{ClaimID: r.ClaimID, Jurisdiction: a.DueUnder, Stage: r.Stage, Overdue: !a.OverdueAt.IsZero(),
			DueBy: a.DueBy.UTC(), Left: left.Round(time.Minute).String(), PastDue: left <= 0, Adjuster: who})
	}
	slices.SortFunc(due, func(a, b deadlineRow) int { return a.DueBy.Compare(b.DueBy) })
	past := slices.ContainsFunc(due, func(d deadlineRow) bool { return d.PastDue })
	code := 0
	if past {
		code = 3
	}
	if *asJSON {
		return code, json.NewEncoder(out).Encode(due)
	}
	printDeadlines(out, due)
	return code, nil
}

func printDeadlines(out io.Writer, due []deadlineRow) {
	byJur, byWho := map[string]int{}, map[string]int{}
	for _, d := range due {
		byJur[d.Jurisdiction]++
		byWho[d.Adjuster]++
	}
	count := func(m map[string]int) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(out, "%d claims wait for a person against a statutory decision date, soonest first\n", len(due))
	if len(due) == 0 {
		return
	}
	fmt.Fprintf(out, "by jurisdiction: %s\nby adjuster: %s\n", count(byJur), count(byWho))
	fmt.Fprintf(out, "%-28s %-6s %-10s %-20s %-12s %s\n", "CLAIM", "JUR", "STAGE", "DUE BY", "LEFT", "WITH")
	for _, d := range due {
		stage, left := d.Stage, d.Left
		if d.Overdue {
			stage += "*"
		}
		if d.PastDue {
			left = "PAST DUE"
		}
		fmt.Fprintf(out, "%-28s %-6s %-10s %-20s %-12s %s\n", d.ClaimID, d.Jurisdiction, stage, d.DueBy.Format(time.RFC3339), left, d.Adjuster)
	}
	fmt.Fprintln(out, "(* held overdue: the wait's own deadlines passed; a supervisor decides)")
}
