// Command soak is a chaos soak of durableclaims: it runs hundreds of claims
// through real processes while it breaks them, then checks from every record
// that nothing was paid twice, paid wrongly, or lost.
//
//	soak [-claims 500] [-rate 2] [-workers 2] [-restart-at 0.5] [-timeout 12m] [-json var/soak/latest.json]
//	soak -cluster -workers 3 [-postgres-restart-at 0.3] …
//	soak -faults -workers 3 [-partition 60s] …
//
// It starts a Temporal server (by default a dev server, a CLI process it
// restarts mid-run on the same port and database; with -cluster a real
// Temporal server on PostgreSQL, which also holds the claims store, and
// which it restarts mid-run, as it crashes PostgreSQL once), stripesim
// in-process, and bin/worker processes under supervisors that restart them;
// a killer SIGKILLs a random worker every 1–3 s. Claims start at a steady
// rate, a third above the approval threshold; an approver decides those at
// random with the real `temporal workflow signal`. Once every claim is
// terminal it checks the workflow results, the claims store and the payment
// provider against each other, prints a summary and exits non-zero on any
// discrepancy.
//
// With -faults it kills nothing and restarts nothing: every connection a
// worker makes (the frontend, PostgreSQL, Stripe, the model, the blob
// store) goes through toxiproxy, and the network breaks on a seeded
// schedule it prints first (faults.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// options are the soak's flags; they are recorded in the JSON summary.
type options struct {
	Claims            int           `json:"claims"`
	Rate              float64       `json:"rate_per_s"`
	Workers           int           `json:"workers"`
	RestartAt         float64       `json:"restart_at"`
	Cluster           bool          `json:"cluster"`
	Rollout           bool          `json:"rollout"`
	Faults            bool          `json:"faults"`
	Partition         time.Duration `json:"partition_ns"`
	V3Ramp            float64       `json:"v3_ramp_percent"`
	Store             string        `json:"store"`
	PostgresRestartAt float64       `json:"postgres_restart_at"`
	Timeout           time.Duration `json:"timeout_ns"`
	DecideWithin      time.Duration `json:"decide_within_ns"`
	KillMin           time.Duration `json:"kill_min_ns"`
	KillMax           time.Duration `json:"kill_max_ns"`
	Seed              uint64        `json:"seed"`
	WorkerBin         string        `json:"worker"`
	Temporal          string        `json:"temporal"`
	JSONOut           string        `json:"json"`
	Dir               string        `json:"dir"`
	Keep              bool          `json:"keep"`
	Verbose           bool          `json:"verbose"`
	WorkerLogLevel    string        `json:"worker_log_level"`
}

func main() {
	var o options
	flag.IntVar(&o.Claims, "claims", 500, "claims to run")
	flag.Float64Var(&o.Rate, "rate", 2, "claims started per second (500 at 2/s start over about 4 minutes)")
	flag.IntVar(&o.Workers, "workers", 2, "worker processes, each under its own supervisor")
	flag.Float64Var(&o.RestartAt, "restart-at", 0.5, "restart the Temporal server once at this fraction of the expected duration (0: never)")
	flag.BoolVar(&o.Cluster, "cluster", false, "run against a real Temporal server on PostgreSQL (make temporal-server) instead of the dev server; implies -store postgres")
	flag.BoolVar(&o.Rollout, "rollout", false, "rehearse a deploy instead (implies -cluster, no server or PostgreSQL restart): v1 workers, v2 beside them replay-checked and ramped, v1 drained, a bad v3 refused by the replay check, ramped anyway, rolled back and its runs reset (rollout.go)")
	flag.BoolVar(&o.Faults, "faults", false, "break the network instead (implies -cluster, no kills, no restarts): every worker's connections through toxiproxy, faulted on a seeded schedule printed first (faults.go; make toxiproxy builds its server)")
	flag.DurationVar(&o.Partition, "partition", time.Minute, "with -faults: how long one worker is cut off from the frontend, and one from PostgreSQL")
	flag.Float64Var(&o.V3Ramp, "v3-ramp", 50, "with -rollout: the percentage of claims the bad build v3 is ramped to before it is rolled back")
	flag.StringVar(&o.Store, "store", "", "the claims store: sqlite or postgres (default: postgres with -cluster, else sqlite)")
	flag.Float64Var(&o.PostgresRestartAt, "postgres-restart-at", 0.3, "with the PostgreSQL store: crash PostgreSQL once (immediate shutdown) at this fraction of the expected duration (0: never)")
	flag.DurationVar(&o.Timeout, "timeout", 12*time.Minute, "give up waiting for claims to finish after this long from the start")
	flag.DurationVar(&o.DecideWithin, "decide-within", 8*time.Second, "the approver decides a waiting claim after a random delay up to this")
	flag.DurationVar(&o.KillMin, "kill-min", time.Second, "shortest gap between SIGKILLs")
	flag.DurationVar(&o.KillMax, "kill-max", 3*time.Second, "longest gap between SIGKILLs")
	flag.Uint64Var(&o.Seed, "seed", 0, "seed for amounts and decisions (0: random; the summary prints the one used)")
	flag.StringVar(&o.WorkerBin, "worker", "bin/worker", "the claims worker binary")
	flag.StringVar(&o.Temporal, "temporal", os.Getenv("TEMPORAL"), "the Temporal CLI (dev server and signals); default: PATH, then GOPATH/bin")
	flag.StringVar(&o.JSONOut, "json", "var/soak/latest.json", "where to write the summary as JSON (empty: nowhere)")
	flag.StringVar(&o.Dir, "dir", "", "working directory for databases and logs (default var/soak/<run id>)")
	flag.BoolVar(&o.Keep, "keep", false, "keep the working directory after a passing run (a failing run always keeps it)")
	flag.BoolVar(&o.Verbose, "v", false, "log every kill and retry")
	flag.StringVar(&o.WorkerLogLevel, "worker-log-level", "warn", "the workers' LOG_LEVEL (debug shows a task completion the server refused); their logs are in the working directory")
	flag.Parse()
	os.Exit(run(o))
}

// Exit codes.
const (
	exitPass        = 0
	exitDiscrepancy = 1
	exitError       = 2
	exitInterrupted = 130
)

func run(o options) int {
	level := slog.LevelInfo
	if o.Verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "soak")
	if err := o.resolve(); err != nil {
		log.Error("bad options", "error", err)
		return exitError
	}

	// The first Ctrl-C stops the soak cleanly (every process it started is
	// stopped); a second one, after stop() restores the default, kills it,
	// and Pdeathsig takes its children with it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()

	s := newSoak(o, log)
	sum, err := s.run(ctx)
	s.tearDown()
	switch {
	case ctx.Err() != nil:
		log.Warn("interrupted; every process the soak started is stopped", "dir", s.dir)
		return exitInterrupted
	case err != nil:
		log.Error("soak failed", "error", err, "dir", s.dir)
		return exitError
	}
	sum.print(os.Stdout)
	if o.JSONOut != "" {
		if err := sum.writeJSON(o.JSONOut); err != nil {
			log.Error("write summary", "error", err)
			return exitError
		}
		log.Info("summary written", "json", o.JSONOut)
	}
	if !sum.Passed {
		log.Warn("discrepancies found; the working directory is kept", "dir", s.dir)
		return exitDiscrepancy
	}
	if !o.Keep {
		os.RemoveAll(s.dir)
	}
	return exitPass
}

func (o *options) resolve() error {
	if o.Rollout {
		o.Cluster, o.RestartAt, o.PostgresRestartAt = true, 0, 0
		if o.V3Ramp <= 0 || o.V3Ramp > 100 {
			return errors.New("-v3-ramp must be above 0 and at most 100")
		}
	}
	if o.Faults {
		if o.Rollout {
			return errors.New("-faults and -rollout are two soaks: pick one")
		}
		if o.Partition <= 0 {
			return errors.New("-partition must be positive")
		}
		o.Cluster, o.RestartAt, o.PostgresRestartAt = true, 0, 0
	}
	switch {
	case o.Claims <= 0 || o.Rate <= 0 || o.Workers <= 0:
		return errors.New("-claims, -rate and -workers must be positive")
	case o.KillMin <= 0 || o.KillMax < o.KillMin:
		return errors.New("-kill-min must be positive and at most -kill-max")
	case o.RestartAt < 0 || o.RestartAt > 1 || o.PostgresRestartAt < 0 || o.PostgresRestartAt > 1:
		return errors.New("-restart-at and -postgres-restart-at must be between 0 and 1")
	}
	switch {
	case o.Store == "" && o.Cluster:
		o.Store = "postgres"
	case o.Store == "":
		o.Store = "sqlite"
	case o.Store != "sqlite" && o.Store != "postgres":
		return fmt.Errorf("-store %q: want sqlite or postgres", o.Store)
	case o.Cluster && o.Store != "postgres":
		return errors.New("-cluster runs the claims store on the cluster's PostgreSQL: leave out -store sqlite")
	}
	if o.Temporal == "" {
		o.Temporal = findTemporal()
	}
	for _, bin := range []string{o.Temporal, o.WorkerBin} {
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("%w (make build builds bin/worker; make temporal-cli installs the CLI)", err)
		}
	}
	var err error
	o.WorkerBin, err = filepath.Abs(o.WorkerBin)
	return err
}

// findTemporal looks where the Makefile does: PATH, then GOPATH/bin.
func findTemporal() string {
	if p, err := exec.LookPath("temporal"); err == nil {
		return p
	}
	out, _ := exec.Command("go", "env", "GOPATH").Output()
	return filepath.Join(strings.TrimSpace(string(out)), "bin", "temporal")
}
