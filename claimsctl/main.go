// Command claimsctl is the operator's command for durableclaims.
//
//	claimsctl list [--status S] [--limit 50] [--json]   waiting claims from the approval queue, others from visibility
//	claimsctl stuck [--json]      runs with no progress, waits past their deadline, claims waiting for a dependency
//	claimsctl show CLAIM...       narrate a claim from its event history
//	claimsctl payments CLAIM...   transfers per claim, from the payment provider
//	claimsctl wait --status waiting CLAIM...   block until claims reach a status
//	claimsctl withdraw CLAIM | amend CLAIM --amount … | audit CLAIM
//	claimsctl dlq list | dlq redrive CLAIM
//	claimsctl reconcile [--since 24h|RFC3339] [--json]   exit 3 when anything does not match
//	claimsctl schedule [--every 1h]   the reconciliation schedule
//	claimsctl replay-check [--closed 100]   open and recent runs against this build's workflow code; exit 3 if one would break
//	claimsctl reset-build BUILD_ID   after a rollback: reset the open claims that build worked on to before its first task
//	claimsctl whatif (--claims A,B | --since 720h [--outcome paid] [--sample N]) [--model-…] [--prompts F] [--policy F]   decisions that would change
//	claimsctl keygen --approver ID --out FILE [--directory approvers.json]
//	claimsctl checkpoint | verify CLAIM… | verify --all | verify --bundle DIR | export CLAIM --out DIR   claim files
//	claimsctl receipt approve|reject|handoff CLAIM --key FILE   a signed decision for temporal workflow signal (handoff: update)
//	claimsctl decide approve|reject|handoff CLAIM --key FILE [--output json]   sign and send it: one line back
//	claimsctl exam --from YYYY-MM-DD --to YYYY-MM-DD [--json]   the market-conduct report, from the claim files
//	claimsctl deadlines [--within 72h] [--json]   waiting claims against their statutory decision clock
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/telemetry"
	"github.com/durableclaims/durableclaims/worker/replaycheck"
)

func main() {
	config.OwnerOnly()
	stopTracing, err := telemetry.Main("claimsctl")
	if err != nil {
		fmt.Fprintln(os.Stderr, "claimsctl:", err)
		os.Exit(2)
	}
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	stopTracing()
	os.Exit(code)
}

const usage = `usage:
  claimsctl list [--status S] [--limit 50] [--json]   claims: waiting or escalated from the approval queue, oldest
                                deadline first, with counts (--after CURSOR, --currency, --approver ID);
                                any other status from visibility, newest first
  claimsctl stuck [--factor 10] [--floor 30s] [--max 500] [--json]   idle runs, waits past their deadline, claims waiting for a dependency that is down (how many, since when); exit 3 if any
  claimsctl show [--json] CLAIM...   each step from the event history: attempts, resumes, recorded outputs
  claimsctl payments CLAIM...   transfers per claim, from the payment provider
  claimsctl wait [--status waiting,escalated | --closed] [--timeout 2m] CLAIM...
  claimsctl withdraw CLAIM...   withdraw claims in the system of record
  claimsctl amend CLAIM --by WHO [--amount 2100.00] [--account acct_…]   (WHO may not approve it)
  claimsctl audit [--json] CLAIM   every decision attempt, accepted or refused
  claimsctl dlq list [--json]   dead-lettered claims, with step and reason
  claimsctl dlq redrive CLAIM   restart a dead-lettered claim from its failed step
  claimsctl reconcile [--since 24h|RFC3339] [--until …] [--json]
                                transfers vs the step log; exits 3 if anything is not matched
  claimsctl schedule [--every 1h]   create or update the claims-reconcile schedule (0 deletes it)
  claimsctl reset-build BUILD_ID [--query Q] [--dry-run] [--include-paid] [--force]
                                after rolling a bad build back: reset every open claim run it worked on to
                                just before its first workflow task there; runs that paid since are listed,
                                not reset, without --include-paid (docs/operations.md)
  claimsctl replay-check [--closed 100] [--query Q] [--keep-going] [--json]
                                replay every open run and the most recently closed against this build's
                                workflow code before it takes traffic; exit 3 naming a run that would break
  claimsctl whatif (--claims A,B | --since 720h [--until T] [--outcome paid,rejected] [--sample N]) [--id ID]
                                [--model-provider openai --model-name M --model-base-url U] [--prompts FILE] [--policy FILE]
                                [--price-in N --price-out N] [--concurrency 4] [--spend-cap 5.00] [--out DIR] [--json]
                                replay closed claims on a candidate model, prompt or policy, with no way to pay:
                                every decision that would change, the dangerous ones first (docs/whatif.md);
                                killed, the same command resumes it
  claimsctl keygen (--approver ID | --service NAME) --out FILE [--directory approvers.json]
                                an Ed25519 signing key; its public half goes in the approver directory
  claimsctl keygen --ledger NAME --out FILE   the ledger key that signs the claim-file log's checkpoints (FILE.pub: its public key)
  claimsctl checkpoint   sign and publish the claim-file log's checkpoint now (LEDGER_KEY)
  claimsctl verify CLAIM... | --all [--json]   claim files against the store, the log and its checkpoints; exit 3 if any does not verify
  claimsctl verify --bundle DIR [--ledger-pub FILE]   an exported claim file, offline: nothing but the bundle and the key
  claimsctl exam --from YYYY-MM-DD --to YYYY-MM-DD [--jurisdiction US-CA] [--json]
                                the market-conduct report of claims closed in the window, from their claim files:
                                each date, every clock against its limit (days elapsed), letters, breaches (CSV, or
                                a JSON object per line; docs/law.md)
  claimsctl deadlines [--within 72h] [--json]   claims waiting for a person against their statutory decision
                                clock, soonest first, by jurisdiction and adjuster; exit 3 if any is past due
  claimsctl export CLAIM --out DIR   the bundle an auditor receives: claim file, proof, checkpoint, ledger key, documents
  claimsctl revoke-key --directory approvers.json KID   remove a key: what it signed no longer pays
  claimsctl temporal-auth --dir DIR [--namespace default] [--life 2160h]
                                a signing key for a Temporal server of your own, its JWKS (DIR/jwks.json),
                                and one token per program (worker, starter, inbox, claimsctl, reader, admin) as .env lines
  claimsctl decide approve|reject|handoff CLAIM --key FILE [receipt's flags] [--output text|json]
                                sign the receipt and send it with the claim's decide update; one line back
                                ("approved claim-0045: 1,250.00 USD by adjuster-17"), or the recorded decision
                                as JSON; a refusal exits 1 with the claim's reason
  claimsctl receipt approve|reject|handoff CLAIM --key FILE [--as APPROVER] [--reason …] [--note …] [--amount 1400.00] [--to ID]
                                a signed decision receipt, {"receipt":"…"}, for
                                temporal workflow signal --name approve --input "$(claimsctl receipt …)";
                                a handoff (--to a colleague) goes through the decide update
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(stdout, usage)
		return 0
	}
	// Commands that need no further argument; the rest need a claim or a subcommand.
	noArgs := map[string]bool{"reconcile": true, "schedule": true, "list": true, "stuck": true, "checkpoint": true, "replay-check": true,
		"exam": true, "deadlines": true}
	if len(args) > 0 && (args[0] == "keygen" || args[0] == "revoke-key" || args[0] == "temporal-auth") {
		f := keygen
		switch args[0] {
		case "revoke-key":
			f = revokeKey
		case "temporal-auth":
			f = temporalAuth
		}
		if err := f(args[1:], stdout); err != nil {
			fmt.Fprintln(stderr, "claimsctl:", err)
			return 1
		}
		return 0
	}
	if len(args) > 0 && args[0] == "whatif" {
		return whatIfCmd(args[1:], stdout, stderr)
	}
	if len(args) == 0 || (len(args) < 2 && !noArgs[args[0]]) {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	code, err := command(ctx, args[0], args[1:], stdout, stderr)
	switch {
	case errors.Is(err, errUnknownCommand):
		fmt.Fprint(stderr, usage)
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "claimsctl:", err)
		return 1
	}
	return code
}

var errUnknownCommand = errors.New("unknown command")

// command runs one of the commands that reach Temporal or the stores: the
// exit code it chose (3 for a finding, 1 for a refused decision), or its
// error.
func command(ctx context.Context, name string, args []string, stdout, stderr io.Writer) (int, error) {
	done := func(err error) (int, error) { return 0, err }
	switch name {
	case "show":
		return done(show(ctx, args, stdout))
	case "payments":
		return done(payments(ctx, args, stdout))
	case "wait":
		return done(wait(ctx, args, stdout))
	case "withdraw":
		return done(withdraw(ctx, args, stdout))
	case "amend":
		return done(amend(ctx, args, stdout))
	case "audit":
		return done(audit(ctx, args, stdout))
	case "dlq":
		return done(dlq(ctx, args, stdout))
	case "reconcile":
		return reconcile(ctx, args, stdout)
	case "schedule":
		return done(schedule(ctx, args, stdout))
	case "receipt":
		return done(receipt(ctx, args, stdout, stderr))
	case "decide":
		return decide(ctx, args, stdout)
	case "list":
		return done(list(ctx, args, stdout))
	case "checkpoint":
		return done(checkpoint(ctx, stdout))
	case "export":
		return done(export(ctx, args, stdout))
	case "exam":
		return done(exam(ctx, args, stdout))
	case "deadlines":
		return deadlines(ctx, args, stdout)
	case "verify":
		return verify(ctx, args, stdout)
	case "stuck":
		return stuck(ctx, args, stdout)
	case "reset-build":
		return done(resetBuild(ctx, args, stdout))
	case "replay-check":
		return replaycheck.Command(ctx, args, stdout, dial, nil)
	}
	return 0, errUnknownCommand
}

// dial connects to Temporal from the environment, without client chatter
// on the operator's terminal.
func dial(ctx context.Context) (client.Client, error) {
	return config.Dial(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
}
