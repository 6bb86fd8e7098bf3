// Command claimsctl is the operator's command for durableclaims.
//
//	claimsctl show CLAIM...       narrate a claim from its event history
//	claimsctl payments CLAIM...   transfers per claim, from the payment provider
//	claimsctl wait --status waiting CLAIM...   block until claims reach a status
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/internal/config"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

const usage = `usage:
  claimsctl show CLAIM...       narrate each claim from its event history
  claimsctl payments CLAIM...   transfers per claim, from the payment provider
  claimsctl wait [--status waiting,escalated | --closed] [--timeout 2m] CLAIM...
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var err error
	switch args[0] {
	case "show":
		err = show(ctx, args[1:], stdout)
	case "payments":
		err = payments(ctx, args[1:], stdout)
	case "wait":
		err = wait(ctx, args[1:], stdout)
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "claimsctl:", err)
		return 1
	}
	return 0
}

// dial connects to Temporal from the environment, without client chatter
// on the operator's terminal.
func dial(ctx context.Context) (client.Client, error) {
	return config.Dial(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
}
