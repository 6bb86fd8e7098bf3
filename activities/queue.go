package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/store"
)

// QueueInput is an approval wait's state for the approval queue, at its
// revision (approvals.Approval.Rev).
type QueueInput struct {
	ClaimID  string             `json:"claim_id"`
	Open     bool               `json:"open"`
	Approval approvals.Approval `json:"approval"`
}

// QueueResult says whether the row was written (false: the queue holds a
// newer revision already).
type QueueResult struct {
	Applied bool `json:"applied"`
	Meta
}

// PublishApproval writes a wait's state to the approval queue, the
// projection the inbox lists (store.QueueEntry): only for the run that owns
// the claim, whose run ID is the caller's as the server reports it.
func (a *Activities) PublishApproval(ctx context.Context, in QueueInput) (QueueResult, error) {
	_, c, err := a.forClaim(ctx, in.ClaimID)
	if err != nil {
		return QueueResult{}, err
	}
	e, err := QueueEntry(in.ClaimID, c.RunID, in.Open, in.Approval)
	if err == nil && in.Approval.Rev <= 0 {
		err = fmt.Errorf("the approval of %s has no revision", in.ClaimID)
	}
	if err != nil {
		return QueueResult{}, a.refuse(ctx, c, in.ClaimID, "bad-queue-entry", ErrInvalidInput, "PublishApproval: %v", err)
	}
	ok, err := a.Store.PutQueueEntry(ctx, e)
	if err != nil {
		return QueueResult{}, err
	}
	return QueueResult{Applied: ok, Meta: meta(ctx)}, nil
}

// QueueEntry is the queue's row for a wait of run: its indexed columns and
// the summary the inbox lists it by (approvals.Approval.Listing, bounded).
// The queue healer writes the same row from the status query.
func QueueEntry(claimID, runID string, open bool, a approvals.Approval) (store.QueueEntry, error) {
	e := store.QueueEntry{ClaimID: claimID, RunID: runID, Rev: a.Rev, Open: open && a.Decision == nil, Stage: string(a.Stage),
		Deadline: a.Deadline, Currency: a.Request.Currency, AmountMinor: a.Request.AmountMinor, Quorum: max(a.Quorum, 1),
		AssignedTo: a.AssignedTo(), UpdatedAt: time.Now().UTC()}
	for _, v := range a.Votes {
		e.Voters = append(e.Voters, v.Approver)
	}
	l := a.Listing()
	b, err := json.Marshal(l)
	if err == nil && len(b) > store.MaxQueueSummary {
		// A rationale or reasons too long to list: the claim page has them.
		l.Request.Rationale, l.Request.Reasons = "", []string{"(reasons too long to list: see the claim)"}
		b, err = json.Marshal(l)
	}
	if err != nil {
		return e, err
	}
	e.Summary = b
	return e, nil
}
