package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/workflows"
)

// The catastrophe week's two pressures on the model (opt-in, -only
// priority / -only ratelimit; priority.go, ratelimit.go), and what they
// share:
//
//   - priority: a worker whose model is modelsim at 1–2 s a call, with
//     -pressure-claims new claims in flight (triage and assessment backing
//     up the activity queue), approves -pressure-approvals parked claims
//     one after another and times approve → transfer committed at
//     stripesim. Payments run at task priority 1, model calls at 4
//     (workflows/checkpoint.go); the same workload on a worker built
//     without them is the yardstick. It runs twice: on the worker's
//     defaults, then on the catastrophe week's settings (below).
//   - ratelimit: -ratelimit-workers workers share one model budget
//     (MODEL_TOKENS_PER_MINUTE) against modelsim limited to the same
//     tokens per minute (-ratelimit-tpm); -ratelimit-claims claims run on
//     the auto path, more than the limit allows at once. Every claim must
//     be paid (none dead-lettered), and the tokens modelsim serves per
//     minute, in the steady part of the run, are the figure against the
//     limit. Then the same without the shared budget, each worker on its
//     own against the provider's 429s.

const pressureQueue = "claims-pressure"

// serveModelsim serves sim on a loopback port until stop.
// startModelsim serves a modelsim with a tokens-per-minute limit (0: none)
// that answers in lat.
func startModelsim(tpm int64, lat modelsim.Latency) (sim *modelsim.Server, url string, stop func(), err error) {
	sim = modelsim.New("")
	sim.TokensPerMinute = tpm
	sim.Latency = lat
	url, stop, err = serveModelsim(sim)
	return sim, url, stop, err
}

func serveModelsim(sim *modelsim.Server) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String() + "/v1", func() { srv.Close() }, nil
}

// runClaims starts n claims of amount under prefix on queue, 32 starts at a
// time (the bench's SQLite store is shared with the workers), all in
// flight together, and waits until every one has ended: it counts them by
// ClaimStatus in visibility every 2 s (a long poll per claim would be
// thousands of them) and returns the count of each end.
func (e *env) runClaims(ctx context.Context, queue, prefix, amount string, n, priority int) (map[string]int, error) {
	if err := parallel(n, 32, func(i int) error {
		_, err := e.startClaimAt(ctx, e.store, e.client, queue, fmt.Sprintf("%s%05d", prefix, i), amount, workflows.Options{}, priority)
		return err
	}); err != nil {
		return nil, err
	}
	return e.waitEnded(ctx, prefix, n, 30*time.Minute)
}

// waitEnded waits until the n claims under prefix have ended, counting them
// by ClaimStatus in visibility every 2 s, and returns the count of each end.
func (e *env) waitEnded(ctx context.Context, prefix string, n int, within time.Duration) (map[string]int, error) {
	ends := []string{workflows.StatusPaid, workflows.StatusDeadLettered, workflows.StatusRejected, workflows.StatusExpired, workflows.StatusWithdrawn}
	for deadline := time.Now().Add(within); ; {
		ended, total := map[string]int{}, 0
		for _, status := range ends {
			c, err := e.countStatus(ctx, prefix, status)
			if err != nil {
				return nil, err
			}
			if c > 0 {
				ended[status] = int(c)
				total += int(c)
			}
		}
		if total >= n {
			return ended, nil
		}
		if time.Now().After(deadline) {
			return ended, fmt.Errorf("%d of %d claims ended after %s", total, n, within)
		}
		time.Sleep(2 * time.Second)
	}
}
