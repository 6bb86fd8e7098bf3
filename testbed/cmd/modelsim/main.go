// Command modelsim serves package modelsim: a local OpenAI-compatible Chat
// Completions endpoint that plays the rules model, for running
// MODEL_PROVIDER=openai with no account and no network.
//
//	MODELSIM_ADDR    -addr     listen address                 (default localhost:12112)
//	MODELSIM_API_KEY -api-key  the bearer key it accepts      (default any)
//	MODELSIM_FAULTS  -faults   faults for the first calls, comma-separated
//	                           (429, 429:<s>, 500, malformed, invalid, slow:<d> up to 10m,
//	                           400, 401, 404, context-length, or another 4xx or 5xx code)
//	MODELSIM_LATENCY -latency  how long every answer takes: "1.5s", or "1s-2s" uniform
//	MODELSIM_TPM     -tpm      tokens per minute answered, beyond which 429 with
//	                           Retry-After, as a provider's TPM limit (default 0: unlimited)
//	MODELSIM_ANSWERS -answers  answer differently for some claims: rules separated by ";",
//	                           each <claim-id regexp>:<change>[,<change>...]
//
// An unknown or malformed fault, latency, TPM or answers spec stops it, with
// the reason, before it listens (see modelsim.ParseFault and
// modelsim.ParseAnswers).
//
// Answer rules make it a candidate model that disagrees with the recorded
// one on a known subset of claims, for "what-if" tests. The regexp must
// match the whole claim ID (it is anchored) and runs to the rule's last
// ":"; the first rule that matches a claim applies, with all its changes,
// and a claim no rule matches is answered as without rules. A change is:
//
//	recommend=<N>%           the assessment's recommended_minor becomes N percent
//	                         (0 to 1000) of what the rules model recommends, rounded down
//	recommend=<minor>        the assessment's recommended_minor becomes that many minor units
//	needs_review=true|false  the assessment's needs_review
//	category=<name>          the triage's category: water-damage, fire, theft, auto,
//	                         glass, wear-and-tear or general
//	fraud_score=<0-100>      the triage's fraud_score
//
// as in -answers 'claim-00[1-3]:recommend=50%,needs_review=false;claim-9.*:category=fire'.
// A changed answer ends its summary or rationale with " (answer rule N)",
// and GET /_sim/calls shows the call's "rule": N.
//
// Point the worker at it with MODEL_PROVIDER=openai
// MODEL_BASE_URL=http://localhost:12112/v1 MODEL_NAME=sim. GET /_sim/calls
// lists the calls it served; POST /_sim/faults queues more faults (a JSON
// array, refused whole if one is invalid).
//
// On SIGINT or SIGTERM it stops accepting calls and lets those in progress
// finish; a slow fault's wait ends at once and is answered 503.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "modelsim:", err)
		os.Exit(1)
	}
}

// run serves until ctx is cancelled.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("modelsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", config.Get("MODELSIM_ADDR", "localhost:12112"), "listen address")
	key := fs.String("api-key", os.Getenv("MODELSIM_API_KEY"), "the only bearer key accepted (empty: any)")
	faults := fs.String("faults", os.Getenv("MODELSIM_FAULTS"), "faults for the first calls, comma-separated (see modelsim.ParseFault)")
	latency := fs.String("latency", os.Getenv("MODELSIM_LATENCY"), `how long every answer takes, as a real model's would: "1.5s", or "1s-2s" (uniform); empty: at once`)
	tpm := fs.String("tpm", os.Getenv("MODELSIM_TPM"), "tokens per minute answered, beyond which 429 with Retry-After, as a provider's TPM limit; empty or 0: unlimited")
	answers := fs.String("answers", os.Getenv("MODELSIM_ANSWERS"), `answer differently for some claims: "<claim-id regexp>:<change>[,<change>...]" rules separated by ";" (see modelsim.ParseAnswers)`)
	gullible := fs.Bool("gullible", os.Getenv("MODELSIM_GULLIBLE") == "1", "obey instructions injected in a claim (prompt injection tests; env MODELSIM_GULLIBLE=1)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	var queue []modelsim.Fault
	var bad []error
	for _, f := range strings.Split(*faults, ",") {
		if f = strings.TrimSpace(f); f != "" {
			fault, err := modelsim.ParseFault(f)
			queue, bad = append(queue, fault), append(bad, err)
		}
	}
	if err := errors.Join(bad...); err != nil {
		return fmt.Errorf("-faults: %w", err)
	}
	lat, err := modelsim.ParseLatency(*latency)
	if err != nil {
		return fmt.Errorf("-latency: %w", err)
	}
	var tokensPerMinute int64
	if *tpm != "" {
		if tokensPerMinute, err = strconv.ParseInt(*tpm, 10, 64); err != nil || tokensPerMinute < 0 {
			return fmt.Errorf(`-tpm %q: want a whole number of tokens per minute, as in "30000" (0: unlimited)`, *tpm)
		}
	}
	rules, err := modelsim.ParseAnswers(*answers)
	if err != nil {
		return fmt.Errorf("-answers: %w", err)
	}
	sim := modelsim.New(*key)
	sim.Answers = rules
	sim.Gullible = *gullible
	sim.Latency = lat
	sim.TokensPerMinute = tokensPerMinute
	sim.Inject(queue...)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", *addr, err)
	}
	srv := &http.Server{
		Handler:           sim,
		ReadHeaderTimeout: 10 * time.Second,
		// Every request's context ends with ctx, so a slow fault stops
		// waiting at once instead of holding Shutdown up for its delay.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	shutdown := make(chan error, 1)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shutdown <- srv.Shutdown(sctx)
	}()
	log.Info("modelsim listening", "addr", ln.Addr().String(), "base_url", "http://"+ln.Addr().String()+"/v1")
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	// Serve returns as Shutdown begins: wait for the calls in progress.
	if err := <-shutdown; err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
