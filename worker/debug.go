package main

import (
	"errors"
	"expvar"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/durableclaims/durableclaims/internal/config"
)

func init() {
	expvar.Publish("goroutines", expvar.Func(func() any { return runtime.NumGoroutine() }))
	expvar.Publish("rss_bytes", expvar.Func(func() any { return rssBytes() }))
}

// serveDebug serves the worker's operational endpoints on addr: Prometheus
// metrics (/metrics) always; expvar (/debug/vars: goroutines, RSS) and
// pprof only when addr is a loopback address or debug is set
// (DEBUG_ENDPOINTS=true): a profile or the command line is nobody's
// business who can merely reach the metrics port.
func serveDebug(addr string, debug bool, metrics http.Handler, logger *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	debug = debug || config.IsLoopback(addr)
	if debug {
		mux.Handle("/debug/vars", expvar.Handler())
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "error", err)
		}
	}()
	logger.Info("serving metrics", "addr", ln.Addr().String(), "debug_endpoints", debug)
	return func() { srv.Close() }, nil
}

// rssBytes reads the process's resident set size from /proc (Linux).
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return -1
}
