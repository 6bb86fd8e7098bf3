package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/workflows"
)

// approvalWorkload is -only approval: approve → transfer latency.
type approvalWorkload struct {
	approvals int
}

func (*approvalWorkload) names() []string { return []string{"approval"} }

func (a *approvalWorkload) flags(fs *flag.FlagSet) {
	fs.IntVar(&a.approvals, "approvals", 50, "claims approved one at a time for the approve→transfer latency")
}

func (a *approvalWorkload) run(ctx context.Context, e *env, res *results) error {
	return e.approvalLatency(ctx, res, a.approvals)
}

// approvalLatency parks n claims, then approves them one at a time on an
// otherwise idle system and times approve signal → transfer committed.
func (e *env) approvalLatency(ctx context.Context, res *results, n int) error {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-approve-%05d-%d", i, seq.Add(1))
		if _, err := e.startClaim(ctx, ids[i], "1840.00"); err != nil {
			return err
		}
	}
	for _, id := range ids {
		if err := e.waitStatus(ctx, id, workflows.StatusWaiting, time.Minute); err != nil {
			return err
		}
	}
	time.Sleep(time.Second) // let the parking workflow tasks drain
	for _, id := range ids {
		committed, at := e.commits.when(string(claim.StepKey(id, claim.StepPay)))
		receipt, err := e.decision(ctx, id, approvals.Approve) // the approver has read the request before deciding
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := e.client.SignalWorkflow(ctx, id, "", "approve", receipt); err != nil {
			return err
		}
		select {
		case <-committed:
		case <-time.After(time.Minute):
			return fmt.Errorf("%s: no transfer a minute after approval", id)
		}
		res.add("approve_to_transfer_ms", float64(at().Sub(t0).Microseconds())/1000)
		if err := e.client.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "  approve→transfer over %d claims: p50 %.0f ms, p99 %.0f ms\n", len(ids),
		percentile(res.Samples["approve_to_transfer_ms"], 50), percentile(res.Samples["approve_to_transfer_ms"], 99))
	return nil
}
