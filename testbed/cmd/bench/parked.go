package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"
)

// parkedWorkload is -only parked: the claims worker's memory and
// goroutines with claims parked for approval, on a fresh worker.
type parkedWorkload struct {
	parked int
}

func (*parkedWorkload) names() []string { return []string{"parked"} }

func (p *parkedWorkload) flags(fs *flag.FlagSet) {
	fs.IntVar(&p.parked, "parked", 2000, "claims parked for approval when measuring worker memory")
}

func (p *parkedWorkload) run(ctx context.Context, e *env, res *results) error {
	e.claims.stop()
	var err error
	if e.claims, err = e.spawnClaimsWorker("claims-worker-parked"); err != nil {
		return err
	}
	return e.parkedMemory(ctx, res, e.claims, p.parked)
}

// parkedMemory compares the worker's RSS and goroutines idle with the same
// after n claims have parked for approval.
func (e *env) parkedMemory(ctx context.Context, res *results, w *proc, n int) error {
	before, err := e.idleAfter(ctx, w, "park-warm", n)
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("bench-parked-%d-", seq.Add(1))
	begin := time.Now()
	if _, err := e.park(ctx, prefix, 0, n); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	after, err := w.vars()
	if err != nil {
		return err
	}
	res.Values["rss_idle_mib"] = float64(before.RSSBytes) / (1 << 20)
	res.Values["rss_parked_mib"] = float64(after.RSSBytes) / (1 << 20)
	res.Values["rss_parked_ratio"] = float64(after.RSSBytes) / float64(before.RSSBytes)
	res.Values["goroutines_idle"] = float64(before.Goroutines)
	res.Values["goroutines_parked"] = float64(after.Goroutines)
	res.Values["parked_claims"] = float64(n)
	fmt.Fprintf(os.Stderr, "  %d parked in %s: RSS %.1f → %.1f MiB, goroutines %d → %d\n", n, time.Since(begin).Round(time.Second),
		res.Values["rss_idle_mib"], res.Values["rss_parked_mib"], before.Goroutines, after.Goroutines)
	return nil
}
