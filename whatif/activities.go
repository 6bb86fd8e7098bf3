package whatif

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/claimfile"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/model"
)

// Activities are everything a what-if worker can do: read a claim file,
// ask the candidate model, answer a tool call from the stores read-only.
// There is no payment provider, mailer or writable store here to reach.
type Activities struct {
	// Model is the candidate; Price turns its usage into spend.
	Model model.Model
	Price activities.Price
	// Store must be opened read-only (store.OpenReadOnly): the database
	// refuses any write.
	Store    *store.Store
	Blobs    *blobs.Store
	Policies map[string]claim.Policy
	// WhatIf is the ID of the one what-if this worker serves: its
	// activities act only for that what-if's claim workflows.
	WhatIf string
	// Parent says which workflow started a run (the Temporal server's
	// answer); nil skips the check (unit tests).
	Parent func(ctx context.Context, workflowID, runID string) (string, error)

	mu      sync.Mutex
	parents map[string]bool
}

// Errors the what-if's activities end with.
const (
	// ErrNotOurs: the caller is not a claim workflow of this what-if.
	ErrNotOurs = "WhatIfForeignRun"
	// ErrNoClaimFile: the claim has no claim file to replay (not closed, or
	// its file is gone): the claim is reported, not evaluated.
	ErrNoClaimFile = "WhatIfNoClaimFile"
)

// ours refuses a caller that is not one of this what-if's claim workflows.
func (a *Activities) ours(ctx context.Context) error {
	info := activity.GetInfo(ctx)
	wf := info.WorkflowExecution
	switch {
	case info.WorkflowType == nil || info.WorkflowType.Name != ClaimWorkflowName:
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("the what-if's activities act only for %s runs", ClaimWorkflowName), ErrNotOurs, nil)
	case !strings.HasPrefix(wf.ID, a.WhatIf+"/"):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("this worker serves what-if %s only, not %s", a.WhatIf, wf.ID), ErrNotOurs, nil)
	case a.Parent == nil:
		return nil
	}
	a.mu.Lock()
	known := a.parents[wf.RunID]
	a.mu.Unlock()
	if known {
		return nil
	}
	parent, err := a.Parent(ctx, wf.ID, wf.RunID)
	if err != nil {
		return fmt.Errorf("who started %s: %w", wf.ID, err) // retryable: the server will answer
	}
	if parent != a.WhatIf {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s was not started by what-if %s (its parent: %q)", wf.ID, a.WhatIf, parent), ErrNotOurs, nil)
	}
	a.mu.Lock()
	if a.parents == nil {
		a.parents = map[string]bool{}
	}
	a.parents[wf.RunID] = true
	a.mu.Unlock()
	return nil
}

// LoadRecorded reads a closed claim's claim file and what its run saw. The
// file's digest must be the one the claim-file log holds for it.
func (a *Activities) LoadRecorded(ctx context.Context, claimID string) (Recorded, error) {
	if err := a.ours(ctx); err != nil {
		return Recorded{}, err
	}
	row, err := a.Store.ClaimFile(ctx, claimID)
	if errors.Is(err, store.ErrNotFound) {
		return Recorded{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("claim %s has no claim file: it is not closed, or was never a claim", claimID), ErrNoClaimFile, nil)
	}
	if err != nil {
		return Recorded{}, err
	}
	key, ok := a.Blobs.Key(row.URI)
	if !ok {
		return Recorded{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("claim file of %s: %s is not in this blob store", claimID, row.URI), ErrNoClaimFile, nil)
	}
	body, err := a.Blobs.ReadKey(ctx, key, blobs.DefaultMaxSize)
	if errors.Is(err, os.ErrNotExist) {
		return Recorded{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("claim file of %s: %s is gone from the blob store", claimID, row.URI), ErrNoClaimFile, nil)
	}
	if err != nil {
		return Recorded{}, fmt.Errorf("claim file of %s: %w", claimID, err)
	}
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != row.SHA256 {
		return Recorded{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("claim file of %s does not match the digest the claim-file log holds (%s): it was changed; `claimsctl verify %s`",
			claimID, row.SHA256, claimID), ErrNoClaimFile, nil)
	}
	var f claimfile.File
	if err := json.Unmarshal(body, &f); err != nil {
		return Recorded{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("claim file of %s: %v", claimID, err), ErrNoClaimFile, nil)
	}
	rec, err := FromClaimFile(f)
	if err != nil {
		return Recorded{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrNoClaimFile, nil)
	}
	return rec, nil
}

// TurnInput is one turn of the candidate's triage loop.
type TurnInput struct {
	Claim    claim.Claim     `json:"claim"`
	Turn     int             `json:"turn"`
	Final    bool            `json:"final,omitempty"`
	Messages []model.Message `json:"messages,omitempty"`
}

// Answer is what one candidate call answered, and what it cost.
type Answer struct {
	Model         string        `json:"model"`
	PromptVersion string        `json:"prompt_version"`
	Usage         model.Usage   `json:"usage"`
	Latency       time.Duration `json:"latency_ns"`
}

// TurnResult is one candidate turn.
type TurnResult struct {
	Turn model.Turn `json:"turn"`
	Answer
}

// Turn asks the candidate for one turn of the triage loop.
func (a *Activities) Turn(ctx context.Context, in TurnInput) (TurnResult, error) {
	if err := a.ours(ctx); err != nil {
		return TurnResult{}, err
	}
	start := time.Now()
	reply, err := a.Model.TriageTurn(ctx, model.TurnRequest{Claim: in.Claim, Turn: in.Turn, Messages: in.Messages, Final: in.Final})
	if err != nil {
		return TurnResult{}, err
	}
	out := TurnResult{Turn: reply.Output, Answer: a.answer(reply.Usage, start)}
	if len(out.Turn.ToolCalls) > 0 {
		out.Turn.Triage = nil // tools first, as the claim workflow's loop
	}
	return out, nil
}

// AssessResult is the candidate's assessment.
type AssessResult struct {
	Assessment model.Assessment `json:"assessment"`
	Answer
}

// Assess asks the candidate for step 4's assessment.
func (a *Activities) Assess(ctx context.Context, req model.AssessRequest) (AssessResult, error) {
	if err := a.ours(ctx); err != nil {
		return AssessResult{}, err
	}
	start := time.Now()
	reply, err := a.Model.Assess(ctx, req)
	if err != nil {
		return AssessResult{}, err
	}
	return AssessResult{Assessment: reply.Output, Answer: a.answer(reply.Usage, start)}, nil
}

func (a *Activities) answer(u model.Usage, start time.Time) Answer {
	u.CostMicros = a.Price.Cost(u.TokensIn, u.TokensOut)
	return Answer{Model: a.Model.Name(), PromptVersion: a.Model.PromptVersion(), Usage: u, Latency: time.Since(start)}
}

// ToolInput is a tool call the candidate made that the recorded run did
// not: answered now, read-only.
type ToolInput struct {
	ClaimID string               `json:"claim_id"`
	Call    model.ToolCall       `json:"call"`
	Scope   activities.ToolScope `json:"scope"`
}

// Tool answers a tool call from the stores as they are now, writing
// nothing: a raised fraud signal is answered as the live tool answers it,
// and not recorded. The scope is the recorded claim's.
func (a *Activities) Tool(ctx context.Context, in ToolInput) (ToolAnswer, error) {
	if err := a.ours(ctx); err != nil {
		return ToolAnswer{}, err
	}
	if in.Scope.ClaimID != in.ClaimID || !strings.HasSuffix(activity.GetInfo(ctx).WorkflowExecution.ID, "/"+in.ClaimID) {
		return ToolAnswer{}, temporal.NewNonRetryableApplicationError("a what-if's tool call reads its own claim only", ErrNotOurs, nil)
	}
	tools := activities.ReadTools{Store: a.Store, Policies: a.Policies, Blobs: a.Blobs}
	res, err := tools.Call(ctx, activities.ToolInput{Key: claim.IdempotencyKey(in.ClaimID + ":whatif"), Scope: in.Scope, Call: in.Call})
	if errors.Is(err, os.ErrNotExist) {
		// A document that expired from the blob store: the model is told,
		// and the report says the answer was not the recorded one.
		res, err = activities.ToolResult{CallID: in.Call.ID, Name: in.Call.Name, IsError: true,
			Content: `{"error":"the document is no longer in the blob store"}`}, nil
	}
	if err != nil {
		return ToolAnswer{}, err
	}
	source := SourceLive
	if in.Call.Name == activities.ToolFlagFraudSignal {
		source = SourceSimulated
	}
	return ToolAnswer{Name: in.Call.Name, Arguments: in.Call.Arguments, Content: res.Content, IsError: res.IsError, Source: source}, nil
}
