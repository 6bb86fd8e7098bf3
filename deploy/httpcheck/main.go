// Command httpcheck is a minimal HTTP probe for container health checks.
//
// The runtime image is distroless (no shell, curl or wget), so
// docker-compose.yml runs this instead:
//
//	httpcheck http://127.0.0.1:12111/_sim/health
//
// It exits 0 when the URL answers with a 2xx status within the timeout, and
// 1 otherwise (2 on bad usage).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("httpcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "overall request timeout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: httpcheck [-timeout 3s] URL")
		return 2
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		fmt.Fprintln(stderr, "httpcheck:", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "httpcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "httpcheck: %s: %s\n", fs.Arg(0), resp.Status)
		return 1
	}
	return 0
}
