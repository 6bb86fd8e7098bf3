package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The metrics are for whoever scrapes them; pprof and expvar (the command
// line, goroutines, a CPU profile) are served only on a loopback address,
// or where DEBUG_ENDPOINTS says so.
func TestDebugEndpointsStayOnLoopback(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") })
	log := slog.New(slog.DiscardHandler)
	get := func(addr, path string) int {
		res, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	free := func(host string) string {
		ln, err := net.Listen("tcp", host+":0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	// The machine's own address, reached the way a neighbour would.
	public := free("0.0.0.0")
	_, port, _ := net.SplitHostPort(public)
	stop, err := serveDebug(public, false, metrics, log)
	require.NoError(t, err)
	via := "127.0.0.1:" + port
	assert.Equal(t, http.StatusOK, get(via, "/metrics"))
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/vars"} {
		assert.Equal(t, http.StatusNotFound, get(via, p), p)
	}
	stop()

	loop := free("127.0.0.1")
	stop, err = serveDebug(loop, false, metrics, log)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, get(loop, "/debug/pprof/cmdline"))
	stop()

	public = free("0.0.0.0")
	_, port, _ = net.SplitHostPort(public)
	stop, err = serveDebug(public, true, metrics, log)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, get("127.0.0.1:"+port, "/debug/vars"), "explicitly enabled")
	stop()
}
