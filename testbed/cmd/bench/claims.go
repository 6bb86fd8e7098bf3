package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

var seq atomic.Int64

// benchClaim is a claim under the auto-approve limit unless amount says
// otherwise, with one photo already in the blob store.
func benchClaim(id, amount string, doc claim.Document) claim.Claim {
	// One claimant per claim: many claims by one claimant is a review rule.
	account := "acct_1B" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, id)
	c, err := claim.File{ClaimID: id, PolicyID: "pol-1001",
		Claimant: claim.Claimant{Name: "Bench Claimant", Email: id + "@example.com", StripeAccount: account},
		Amount:   amount, Currency: "usd", Description: "A burst pipe flooded the kitchen overnight",
		Documents: []claim.Document{doc}}.Claim()
	if err != nil {
		panic(err)
	}
	return c
}

// startClaim registers a claim in the system of record and starts it, as
// the starter does.
func (e *env) startClaim(ctx context.Context, id, amount string) (client.WorkflowRun, error) {
	return e.startClaimOn(ctx, e.store, e.client, workflows.TaskQueue, id, amount, workflows.Options{})
}

// startClaimOn is startClaim with the store, server, task queue and the
// claim's options given.
// The photo goes into the blob store under the claim's own folder first,
// as the starter puts it: intake refuses (dead-letters) a document outside
// claims/<id>/.
func (e *env) startClaimOn(ctx context.Context, st *store.Store, c client.Client, queue, id, amount string, opts workflows.Options) (client.WorkflowRun, error) {
	return e.startClaimAt(ctx, st, c, queue, id, amount, opts, 0)
}

// startClaimAt is startClaimOn at a task priority (0: the default), as
// starter --priority starts it.
func (e *env) startClaimAt(ctx context.Context, st *store.Store, c client.Client, queue, id, amount string, opts workflows.Options, priority int) (client.WorkflowRun, error) {
	ref, err := e.docs.Put(ctx, blobs.DocumentKey(id, 0, "photo.jpg"), strings.NewReader("a bench photo"))
	if err != nil {
		return nil, err
	}
	cl := benchClaim(id, amount, claim.Document{Name: "photo.jpg", URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size})
	if _, _, err := st.PutClaim(ctx, cl); err != nil {
		return nil, err
	}
	start := workflows.StartOptions(id)
	start.TaskQueue = queue
	start.Priority = temporal.Priority{PriorityKey: priority}
	return c.ExecuteWorkflow(ctx, start, workflows.WorkflowType, workflows.ClaimInput{Claim: cl, Options: opts})
}

// parallel calls f for 0..n-1, workers at a time; a worker whose call
// fails stops, the others go on, and the first error is returned.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// outcome waits for run and checks it ended in status want, if given.
func outcome(ctx context.Context, run client.WorkflowRun, want string) error {
	if want == "" {
		return run.Get(ctx, nil)
	}
	var r workflows.ClaimResult
	if err := run.Get(ctx, &r); err != nil {
		return err
	}
	if r.Status != want {
		return fmt.Errorf("%s ended %s, not %s: %s", run.GetID(), r.Status, want, r.Reason)
	}
	return nil
}

func (e *env) waitStatus(ctx context.Context, id, status string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		v, err := e.client.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		if err == nil {
			var s workflows.Status
			if v.Get(&s) == nil && s.State == status {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not reach %s within %s", id, status, within)
}

// countStatus counts claims with a ClaimStatus, from visibility.
func (e *env) countStatus(ctx context.Context, prefix, status string) (int64, error) {
	resp, err := e.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`ClaimStatus = %q AND WorkflowId STARTS_WITH %q`, status, prefix),
	})
	if err != nil {
		return 0, err
	}
	return resp.GetCount(), nil
}

// idleAfter is the worker's memory idle after n claims on the auto path,
// as many at a time as the workload will park: "idle" is a worker that
// has just run as much work, so a difference is what parked claims hold
// and not what any burst of work leaves behind (a larger heap goal the
// runtime keeps for minutes).
func (e *env) idleAfter(ctx context.Context, w *proc, tag string, n int) (workerVars, error) {
	if _, err := e.throughput(ctx, e.autoClaims(tag), n); err != nil {
		return workerVars{}, err
	}
	time.Sleep(5 * time.Second)
	return w.vars()
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// park starts claims from..to-1 under prefix (1,840.00: a human decides)
// the way an insurer starts a surge: claim files in a directory, with a
// photo each, given to bin/starter (--concurrency 32); it returns the pace
// the starter kept (claims a minute) once to of them wait.
func (e *env) park(ctx context.Context, prefix string, from, to int) (float64, error) {
	dir := filepath.Join(e.dir, fmt.Sprintf("%sintake-%d", prefix, to))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, "photo.jpg"), []byte("a bench photo"), 0o600); err != nil {
		return 0, err
	}
	for i := from; i < to; i++ {
		id := fmt.Sprintf("%s%05d", prefix, i)
		c := benchClaim(id, "1840.00", claim.Document{Name: "photo.jpg", Path: "photo.jpg"})
		f := claim.File{ClaimID: c.ID, PolicyID: c.PolicyID, Claimant: c.Claimant, Amount: "1840.00", Currency: "usd",
			Description: c.Description, Documents: c.Documents}
		b, err := json.Marshal(f)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, id+".json"), b, 0o600); err != nil {
			return 0, err
		}
	}
	starter := exec.CommandContext(ctx, filepath.Join(filepath.Dir(e.o.workerBin), "starter"), "--concurrency", "32", "--progress", "0", dir)
	starter.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+e.server.FrontendHostPort(), "TEMPORAL_NAMESPACE=default", "LOG_LEVEL=warn",
		"CLAIMS_DB="+filepath.Join(e.dir, "claims.db"), "BLOB_URL="+e.blobURL())
	var errs strings.Builder
	starter.Stderr = &errs
	t := time.Now()
	if err := starter.Run(); err != nil {
		return 0, fmt.Errorf("starter: %w: %.500s", err, errs.String())
	}
	perMin := float64(to-from) / time.Since(t).Minutes()
	begin := time.Now()
	for {
		n, err := e.countStatus(ctx, prefix, workflows.StatusWaiting)
		if err != nil {
			return 0, err
		}
		if n >= int64(to) {
			return perMin, nil
		}
		if time.Since(begin) > 30*time.Minute {
			return 0, fmt.Errorf("only %d of %d claims parked after 30 minutes", n, to)
		}
		fmt.Fprintf(os.Stderr, "  parked %d/%d\r", n, to)
		time.Sleep(2 * time.Second)
	}
}
