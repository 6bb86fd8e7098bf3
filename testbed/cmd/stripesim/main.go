// Command stripesim serves the Stripe-compatible simulator from package
// stripesim so that payment code can run against it without a Stripe account.
//
// Point stripe-go at it with
//
//	stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{URL: stripe.String("http://localhost:12111")})
//
// Configuration comes from the environment, and flags override it:
//
//	STRIPESIM_ADDR      -addr      listen address           (default localhost:12111)
//	STRIPESIM_DB        -db        SQLite file              (default var/stripesim.db)
//	STRIPESIM_KEY_TTL   -key-ttl   idempotency key lifetime (default 24h)
//	STRIPESIM_API_KEYS  -api-keys  comma-separated keys     (default sk_test_local)
//	STRIPESIM_FAULTS    -faults    fault-injection rules    (default none)
//
// STRIPESIM_FAULTS / -faults is a JSON array of stripesim.FaultRule objects,
// installed in order at startup (delay is a Go duration string), e.g.
//
//	STRIPESIM_FAULTS='[{"fault":"500-after-commit","transfer_group":"claim_1"},{"fault":"slow","delay":"3s","times":-1}]'
//
// Every rule is validated (stripesim.FaultRule.Validate) before anything
// starts: one invalid rule stops the command, with the reason, before it opens
// the database or listens. Rules can also be listed, added and cleared at run
// time with GET, POST and DELETE on /_sim/faults.
//
// On SIGINT or SIGTERM it stops accepting requests, lets those in progress
// finish (up to 10s) and closes the database; a request sleeping in a slow
// fault is answered 503 at once, unprocessed, rather than waited for.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "stripesim:", err)
		os.Exit(1)
	}
}

type options struct {
	addr    string
	db      string
	keyTTL  time.Duration
	apiKeys []string
	faults  []stripesim.FaultRule
}

// parseOptions reads the environment first so that flags, parsed second,
// override it.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	ttl, err := time.ParseDuration(env("STRIPESIM_KEY_TTL", "24h"))
	if err != nil {
		return options{}, fmt.Errorf("STRIPESIM_KEY_TTL: %w", err)
	}
	fs := flag.NewFlagSet("stripesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", env("STRIPESIM_ADDR", "localhost:12111"), "listen address")
	db := fs.String("db", env("STRIPESIM_DB", "var/stripesim.db"), `SQLite database file (":memory:" for a throwaway one)`)
	keyTTL := fs.Duration("key-ttl", ttl, "how long idempotency keys are remembered")
	keys := fs.String("api-keys", env("STRIPESIM_API_KEYS", stripesim.DefaultAPIKey), "comma-separated accepted secret keys")
	faultsJSON := fs.String("faults", getenv("STRIPESIM_FAULTS"), `fault-injection rules, a JSON array such as '[{"fault":"429","times":2}]'`)
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *keyTTL <= 0 {
		return options{}, errors.New("key TTL must be positive")
	}
	faults, err := parseFaults(*faultsJSON)
	if err != nil {
		return options{}, err
	}
	return options{addr: *addr, db: *db, keyTTL: *keyTTL, apiKeys: splitKeys(*keys), faults: faults}, nil
}

// parseFaults decodes a JSON array of fault rules ("" means none) and
// validates each, so a bad rule stops startup with a precise message.
func parseFaults(s string) ([]stripesim.FaultRule, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var rules []stripesim.FaultRule
	if err := json.Unmarshal([]byte(s), &rules); err != nil {
		return nil, fmt.Errorf("faults: want a JSON array of rules: %w", err)
	}
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("faults[%d]: %w", i, err)
		}
	}
	if len(rules) == 0 {
		return nil, nil
	}
	return rules, nil
}

func splitKeys(s string) []string {
	var keys []string
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// run serves until ctx is cancelled, then drains in-flight requests before
// closing the database so no request loses its commit.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	opts, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	if opts.db != "" && opts.db != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(opts.db), 0o755); err != nil {
			return err
		}
	}
	sim, err := stripesim.Open(stripesim.Config{
		DBPath: opts.db, APIKeys: opts.apiKeys, KeyTTL: opts.keyTTL, Logger: logger, Faults: opts.faults,
	})
	if err != nil {
		return err
	}
	defer sim.Close()

	ln, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           sim.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// Shutdown waits for in-flight requests; slow faults give up at once
	// (answering 503) instead of holding it up for their whole delay.
	srv.RegisterOnShutdown(sim.BeginShutdown)
	// Print the bound address (not the flag) so ":0" reveals the real port.
	fmt.Fprintf(stderr, "stripesim listening on http://%s\n", ln.Addr())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
