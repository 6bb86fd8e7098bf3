package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/workflows"
)

// ratelimitWorkload is the second pressure on the model (pressure.go):
// first with the workers' shared budget, then without.
type ratelimitWorkload struct {
	ratelimitTPM, ratelimitClaims, ratelimitWorkers int
}

func (*ratelimitWorkload) names() []string { return []string{"ratelimit"} }

func (rl *ratelimitWorkload) flags(fs *flag.FlagSet) {
	fs.IntVar(&rl.ratelimitTPM, "ratelimit-tpm", 180000, "the ratelimit workload (-only ratelimit): modelsim's tokens per minute, and the workers' shared budget")
	fs.IntVar(&rl.ratelimitClaims, "ratelimit-claims", 150, "the ratelimit workload: claims run at once on the auto path")
	fs.IntVar(&rl.ratelimitWorkers, "ratelimit-workers", 3, "the ratelimit workload: workers sharing the budget")
}

func (rl *ratelimitWorkload) run(ctx context.Context, e *env, res *results) error {
	for _, shared := range []bool{true, false} {
		if err := rl.runShared(ctx, e, res, shared); err != nil {
			return fmt.Errorf("ratelimit: %w", err)
		}
	}
	return nil
}

const ratelimitQueue = "claims-ratelimit"

func (rl *ratelimitWorkload) runShared(ctx context.Context, e *env, res *results, shared bool) error {
	tag := "shared"
	if !shared {
		tag = "alone"
	}
	sim, url, stop, err := startModelsim(int64(rl.ratelimitTPM), modelsim.Latency{Min: 200 * time.Millisecond, Max: 400 * time.Millisecond})
	if err != nil {
		return err
	}
	defer stop()
	budget := "MODEL_TOKENS_PER_MINUTE=0"
	if shared {
		budget = fmt.Sprintf("MODEL_TOKENS_PER_MINUTE=%d", rl.ratelimitTPM)
	}
	queue := fmt.Sprintf("%s-%s-%d", ratelimitQueue, tag, seq.Add(1))
	for i := range rl.ratelimitWorkers {
		w, err := e.spawnClaimsWorker(fmt.Sprintf("claims-worker-ratelimit-%s-%d", tag, i), "MODEL_PROVIDER=openai", "MODEL_BASE_URL="+url,
			"MODEL_NAME=sim-1", "MODEL_BUDGET="+queue, "CLAIMS_TASK_QUEUE="+queue, budget)
		if err != nil {
			return err
		}
		defer w.stop()
	}
	prefix := fmt.Sprintf("bench-ratelimit-%s-%d-", tag, seq.Add(1))
	begin := time.Now()
	ended, err := e.runClaims(ctx, queue, prefix, "640.00", rl.ratelimitClaims, 0)
	took := time.Since(begin)
	if err != nil && shared {
		return fmt.Errorf("ratelimit (%s): %w (%v)", tag, err, ended)
	}

	// The steady part: from 10 s after the first answer (the bucket's
	// burst spent) to the last answer.
	var answered []modelsim.Call
	refused := 0
	for _, c := range sim.Calls() {
		switch {
		case c.RateLimited:
			refused++
		case c.Tokens > 0:
			answered = append(answered, c)
		}
	}
	sort.Slice(answered, func(i, j int) bool { return answered[i].At.Before(answered[j].At) })
	var rate float64
	if len(answered) > 1 {
		from, to := answered[0].At.Add(10*time.Second), answered[len(answered)-1].At
		var tokens int64
		for _, c := range answered {
			if !c.At.Before(from) {
				tokens += c.Tokens
			}
		}
		if to.After(from) {
			rate = float64(tokens) / to.Sub(from).Minutes()
		}
	}
	deadLettered := rl.ratelimitClaims - ended[workflows.StatusPaid]
	k := "ratelimit_" + tag + "_"
	res.Values[k+"tokens_per_min"] = rate
	res.Values[k+"ratio"] = rate / float64(rl.ratelimitTPM)
	res.Values[k+"refused_429"] = float64(refused)
	res.Values[k+"not_paid"] = float64(deadLettered)
	res.Values[k+"claims_per_min"] = float64(ended[workflows.StatusPaid]) / took.Minutes()
	fmt.Fprintf(os.Stderr, "  ratelimit, %d workers %s: %d claims in %.0f s (%v); modelsim served %.0f tokens a minute against a limit of %d (×%.2f) and refused %d calls with 429\n",
		rl.ratelimitWorkers, map[bool]string{true: "sharing one budget", false: "each on its own"}[shared], rl.ratelimitClaims, took.Seconds(), ended,
		rate, rl.ratelimitTPM, rate/float64(rl.ratelimitTPM), refused)
	if shared && deadLettered > 0 {
		return fmt.Errorf("ratelimit: %d claims not paid with a shared budget: %v", deadLettered, ended)
	}
	return nil
}
