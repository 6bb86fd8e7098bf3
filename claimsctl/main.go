// Command claimsctl is the operator's command for durableclaims.
//
//	claimsctl show CLAIM...       narrate a claim from its event history
//	claimsctl payments CLAIM...   transfers per claim, from the payment provider
//	claimsctl wait --status waiting CLAIM...   block until claims reach a status
//	claimsctl withdraw CLAIM | amend CLAIM --amount … | audit CLAIM
//	claimsctl dlq list | dlq redrive CLAIM
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
  claimsctl withdraw CLAIM...   withdraw claims in the system of record
  claimsctl amend CLAIM [--amount 2100.00] [--account acct_…]
  claimsctl audit [--json] CLAIM   every decision attempt, accepted or refused
  claimsctl dlq list [--json]   dead-lettered claims, with step and reason
  claimsctl dlq redrive CLAIM   restart a dead-lettered claim from its failed step
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
	case "withdraw":
		err = withdraw(ctx, args[1:], stdout)
	case "amend":
		err = amend(ctx, args[1:], stdout)
	case "audit":
		err = audit(ctx, args[1:], stdout)
	case "dlq":
		err = dlq(ctx, args[1:], stdout)
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
