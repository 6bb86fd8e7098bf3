#!/usr/bin/env bash
# The seed story: two claims survive real worker kills without paying twice,
# and a third nobody answers is held for a supervisor, never denied by
# silence, until one decides. Every process is real: the Temporal dev
# server, stripesim, and a worker that kills itself with SIGKILL and is
# restarted by a supervisor loop. The stack is the programs' own defaults
# under var/, so bin/claimsctl, bin/inbox, bin/worker and bin/starter run
# from here afterwards find what the demo made with no variable set.
set -euo pipefail
cd "$(dirname "$0")/.."

STACK=var
TEMPORAL_ADDRESS=${DEMO_TEMPORAL_ADDRESS:-localhost:7233}
STRIPESIM_ADDR=${DEMO_STRIPESIM_ADDR:-localhost:12111}
UI_PORT=${DEMO_UI_PORT:-8233}
INBOX_ADDR=${DEMO_INBOX_ADDR:-localhost:8088}
CODEC_ADDR=${DEMO_CODEC_ADDR:-localhost:8081}
JAEGER_OTLP_GRPC_ADDR=${DEMO_JAEGER_OTLP_GRPC_ADDR:-localhost:4317} JAEGER_OTLP_HTTP_ADDR=${DEMO_JAEGER_OTLP_HTTP_ADDR:-localhost:4318}
JAEGER_UI_ADDR=${DEMO_JAEGER_UI_ADDR:-localhost:16686} JAEGER_QUERY_GRPC_ADDR=${DEMO_JAEGER_QUERY_GRPC_ADDR:-localhost:16685}
JAEGER_HEALTH_ADDR=${DEMO_JAEGER_HEALTH_ADDR:-localhost:13133}
source scripts/lib.sh

echo "crash injection: claim-0042 dies in step 7 (notify); claim-0043 dies in step 6 after Stripe made the transfer"
stack_up --crash-at claim-0042:7,claim-0043:6:after-effect

say "Starting claims"
# The claim files name their documents in examples/docs: the starter reads
# documents only under a root, here examples/ (by default, the claim file's folder).
bin/starter --docs-root examples examples/claims/claim-0042.json examples/claims/claim-0043.json
echo "    claim-0044 gets approval TTLs of 3 s + 3 s, and nobody will answer:"
bin/starter --docs-root examples --approval-ttl 3s --escalation-ttl 3s examples/claims/claim-0044.json

say "Both 1840.00 claims are above the 1000.00 auto-approve limit, so they park at step 5"
bin/claimsctl wait --status waiting --timeout 90s claim-0042 claim-0043
echo "    Waiting holds no worker: no activity, no goroutine, just a durable timer. Find them with:"
echo "    \$ temporal workflow list --query 'ClaimStatus=\"waiting\"'"
"$TEMPORAL" workflow list --query 'ClaimStatus="waiting"' | sed 's/^/    /'
echo "    Adjusters see them in the inbox, $INBOX_URL (sign in as adjuster-17; DEMO_KEEP=1 keeps it up after the story)."

say "Someone who can reach the Temporal frontend, but holds no approver key, tries to approve claim-0042"
echo "    \$ temporal workflow signal --workflow-id claim-0042 --name approve --input '{\"approver\":\"supervisor-3\"}'"
"$TEMPORAL" workflow signal --workflow-id claim-0042 --name approve --input '{"approver":"supervisor-3"}' | sed 's/^/    /'
for _ in $(seq 1 50); do
  "$TEMPORAL" workflow query --workflow-id claim-0042 --name status -o json 2>/dev/null | grep -q '"code": *"unsigned"' && break
  sleep 0.1
done
bin/claimsctl audit claim-0042 | grep 'refused' | sed 's/^/    /'
echo "    A typed name proves nothing: the claim is still waiting, and nothing was paid."

say "adjuster-17 approves claim-0042 with a receipt signed by their own key"
echo "    \$ temporal workflow signal --workflow-id claim-0042 --name approve \\"
echo "        --input \"\$(claimsctl receipt approve claim-0042 --key $KEYS/adjuster-17.key --note 'invoice checks out')\""
"$TEMPORAL" workflow signal --workflow-id claim-0042 --name approve \
  --input "$(bin/claimsctl receipt approve claim-0042 --key "$KEYS/adjuster-17.key" --note 'invoice checks out' 2> >(sed 's/^/    /' >&2))" | sed 's/^/    /'
bin/claimsctl wait --closed --timeout 120s claim-0042 >/dev/null

say "adjuster-17 approves claim-0043 (the worker dies in step 6 after Stripe made the transfer)"
"$TEMPORAL" workflow signal --workflow-id claim-0043 --name approve \
  --input "$(bin/claimsctl receipt approve claim-0043 --key "$KEYS/adjuster-17.key" 2>/dev/null)" | sed 's/^/    /'
bin/claimsctl wait --closed --timeout 120s claim-0043 >/dev/null

say "claim-0044: nobody answers; it escalates to supervisors, then is held for one, overdue"
for _ in $(seq 1 300); do
  "$TEMPORAL" workflow query --workflow-id claim-0044 --name status -o json 2>/dev/null | grep -q '"overdue_at"' && break
  sleep 0.2
done
echo "    Silence never denies a claim under California's rules (docs/law.md): the claimant was sent an"
echo "    acknowledgment, and the claim waits for a person. supervisor-3 rejects it, with a reason:"
"$TEMPORAL" workflow signal --workflow-id claim-0044 --name reject \
  --input "$(bin/claimsctl receipt reject claim-0044 --key "$KEYS/supervisor-3.key" --reason 'the damage predates the policy' 2>/dev/null)" | sed 's/^/    /'
bin/claimsctl wait --closed --timeout 120s claim-0044 >/dev/null

say "What happened, read from each claim's event history"
bin/claimsctl show claim-0042 claim-0043 claim-0044
echo "    Messages in the mail spool $MAIL_SPOOL (letters to claimants, reminder, escalation, overdue): $(ls "$MAIL_SPOOL" | grep -c '\.eml$')"

say "Each closed claim left a claim file; the ledger key signs a checkpoint of their log"
bin/claimsctl checkpoint | sed -n 's/^checkpoint/    checkpoint/p'
echo "    \$ claimsctl verify claim-0042 claim-0043 claim-0044   # offline: the store, the log, the signed checkpoint"
bin/claimsctl verify claim-0042 claim-0043 claim-0044 | sed 's/^/    /'

if [ -n "${JAEGER_OTLP_GRPC_ADDR:-}" ]; then
  say "claim-0043's trace, from intake to its claim file: the worker killed after Stripe paid, the retry finding the transfer"
  echo "    $(bin/claimsctl show claim-0043 | sed -n 's/^  trace [0-9a-f]* //p')   (sign in as adjuster-17; DEMO_KEEP=1 keeps it up)"
fi

say "Transfers at the payment provider"
bin/claimsctl payments claim-0042 claim-0043 claim-0044

if [ "${DEMO_KEEP:-}" = 1 ]; then
  say "The stack stays up. claim-0045 waits for you at $INBOX_URL/claims/claim-0045"
  bin/starter --docs-root examples examples/claims/claim-0045.json
  echo "    Sign in as adjuster-17 (limit 5000.00 usd) and approve, reject, lower or hand it on; Ctrl-C stops everything."
  echo "    From another shell here, bin/claimsctl finds this stack by its defaults (list --status waiting, show, audit, verify)${DEMO_TEMPORAL_ADDRESS:+, with TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS}."
  while sleep 3600; do :; done
fi
