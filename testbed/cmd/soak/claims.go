package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

// plannedClaim is one claim the soak starts, and what it expects of it.
type plannedClaim struct {
	Claim claim.Claim
	// NeedsApproval: the payout is above the auto-approve limit, so the
	// claim parks at step 5 until the approver decides.
	NeedsApproval bool
	// Verdict is what the approver will decide for it, chosen at random
	// when the claim is planned (so a seed reproduces the choices).
	Verdict string
}

// descriptions avoid the rules model's fraud words ("cash", "urgent",
// "wire") and are long enough not to be "thin", so only the amount decides
// whether a human must approve; all are covered in full by pol-1001.
var descriptions = []string{
	"A burst pipe flooded the kitchen overnight",
	"A kitchen fire left smoke damage in two rooms",
	"Bicycle stolen from the locked garage during a burglary",
	"Hail cracked the living room window and the glass door",
	"Storm damage to the roof and the garden fence",
}

// planClaims makes n claims, every third above the approval threshold.
// The rest vary between 120.00 and 900.00 so amounts are not all alike.
func planClaims(runID string, n int, photo string, rng *rand.Rand) ([]plannedClaim, error) {
	plan := make([]plannedClaim, 0, n)
	for i := 1; i <= n; i++ {
		needsApproval := i%3 == 0
		amount := claim.FormatAmount(12_000+rng.Int64N(90_000-12_000+1), "usd")
		if needsApproval {
			amount = "1840.00" // within adjuster-17's 5000.00 limit
		}
		id := fmt.Sprintf("soak-%s-%04d", runID, i)
		c, err := claim.File{ClaimID: id, PolicyID: "pol-1001",
			Claimant: claim.Claimant{Name: fmt.Sprintf("Soak Claimant %d", i), Email: fmt.Sprintf("soak%d@example.com", i),
				StripeAccount: fmt.Sprintf("acct_1Soak%s%04d", runID, i)},
			Amount: amount, Currency: "usd", Description: descriptions[rng.IntN(len(descriptions))],
			Documents: []claim.Document{{Name: "photo.jpg", Path: photo}}}.Claim()
		if err != nil {
			return nil, fmt.Errorf("plan %s: %w", id, err)
		}
		p := plannedClaim{Claim: c, NeedsApproval: needsApproval}
		if needsApproval {
			p.Verdict = []string{string(approvals.Approve), string(approvals.Reject)}[rng.IntN(2)]
		}
		plan = append(plan, p)
	}
	return plan, nil
}

// starter starts the planned claims at a steady rate.
type starter struct {
	client client.Client
	store  *store.Store
	docs   *blobs.Store
	rate   float64 // claims per second

	started     atomic.Int64
	retries     atomic.Int64 // start calls that failed and were tried again
	alreadyDone atomic.Int64 // starts answered "already started": an earlier call had landed
}

// run starts every claim at its slot in the schedule, each in its own
// goroutine: a start that blocks while the server restarts must not push back
// the ones after it, which catch up once it is back.
func (s *starter) run(ctx context.Context, plan []plannedClaim) error {
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(plan))
	for i, p := range plan {
		at := begin.Add(time.Duration(float64(i) / s.rate * float64(time.Second)))
		select {
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		case <-time.After(time.Until(at)):
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.start(ctx, p.Claim); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when none failed
}

// start registers the claim in the system of record (as bin/starter does)
// and starts its workflow, retrying through a database or server restart.
func (s *starter) start(ctx context.Context, c claim.Claim) error {
	if err := s.storeDocuments(ctx, &c); err != nil {
		return err
	}
	// Registering is idempotent, so it is retried through a database
	// restart like the start is through a server restart; different
	// content under the ID (a conflict) is a bug, never retried.
	for {
		_, _, err := s.store.PutClaim(ctx, c)
		if err == nil {
			break
		}
		if errors.Is(err, store.ErrConflict) || ctx.Err() != nil {
			return err
		}
		s.retries.Add(1)
		time.Sleep(500 * time.Millisecond)
	}
	in := workflows.ClaimInput{Claim: c}
	for {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := s.client.ExecuteWorkflow(callCtx, workflows.StartOptions(c.ID), workflows.WorkflowType, in)
		cancel()
		var already *serviceerror.WorkflowExecutionAlreadyStarted
		switch {
		case err == nil:
		case errors.As(err, &already):
			// The IDs carry this run's random ID, so the run under it is the
			// one an earlier attempt started before its answer was lost.
			s.alreadyDone.Add(1)
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			s.retries.Add(1)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		s.started.Add(1)
		return nil
	}
}

// storeDocuments puts each document named by path into the blob store
// under the claim's prefix and replaces the path with the reference, as
// bin/starter does: workers read documents only by reference.
func (s *starter) storeDocuments(ctx context.Context, c *claim.Claim) error {
	docs := slices.Clone(c.Documents)
	for i, d := range docs {
		if d.Path == "" {
			continue
		}
		f, err := os.Open(d.Path)
		if err != nil {
			return err
		}
		ref, err := s.docs.Put(ctx, blobs.DocumentKey(c.ID, i, d.Path), f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s documents[%d]: %w", c.ID, i, err)
		}
		docs[i] = claim.Document{Name: d.Name, URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size}
	}
	c.Documents = docs
	return nil
}
