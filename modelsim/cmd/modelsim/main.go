// Command modelsim serves package modelsim: a local OpenAI-compatible Chat
// Completions endpoint that plays the rules model, for running
// MODEL_PROVIDER=openai with no account and no network.
//
//	MODELSIM_ADDR    -addr     listen address                 (default localhost:12112)
//	MODELSIM_API_KEY -api-key  the bearer key it accepts      (default any)
//	MODELSIM_FAULTS  -faults   faults for the first calls, comma-separated
//	                           (429, 429:<s>, 500, malformed, invalid, slow:<d>, 400, 401, 404, context-length)
//
// Point the worker at it with MODEL_PROVIDER=openai
// MODEL_BASE_URL=http://localhost:12112/v1 MODEL_NAME=sim. GET /_sim/calls
// lists the calls it served; POST /_sim/faults queues more faults.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/modelsim"
)

func main() {
	addr := flag.String("addr", config.Get("MODELSIM_ADDR", "localhost:12112"), "listen address")
	key := flag.String("api-key", os.Getenv("MODELSIM_API_KEY"), "the only bearer key accepted (empty: any)")
	faults := flag.String("faults", os.Getenv("MODELSIM_FAULTS"), "faults for the first calls, comma-separated")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	sim := modelsim.New(*key)
	for _, f := range strings.Split(*faults, ",") {
		if f = strings.TrimSpace(f); f != "" {
			sim.Inject(modelsim.Fault(f))
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Error("listen", "addr", *addr, "error", err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("modelsim listening", "addr", ln.Addr().String(), "base_url", "http://"+ln.Addr().String()+"/v1")
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "error", err)
		os.Exit(1)
	}
}
