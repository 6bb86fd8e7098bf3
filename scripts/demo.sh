#!/usr/bin/env bash
# The seed story: two claims survive real worker kills without paying twice,
# and a third expires unanswered. Every process is real: the Temporal dev
# server, stripesim, and a worker that kills itself with SIGKILL and is
# restarted by a supervisor loop.
set -euo pipefail
cd "$(dirname "$0")/.."

TEMPORAL=${TEMPORAL:-$(command -v temporal || echo "$(go env GOPATH)/bin/temporal")}
DEMO=var/demo
export TEMPORAL_ADDRESS=${DEMO_TEMPORAL_ADDRESS:-localhost:7233}
export TEMPORAL_NAMESPACE=default
export STRIPESIM_ADDR=${DEMO_STRIPESIM_ADDR:-localhost:12111}
export STRIPE_API_BASE=http://$STRIPESIM_ADDR STRIPE_SECRET_KEY=sk_test_local
export CLAIMS_DB=$DEMO/claims.db MAIL_SPOOL=$DEMO/mail STRIPESIM_DB=$DEMO/stripesim.db
export LOG_LEVEL=${LOG_LEVEL:-info}
UI_PORT=${DEMO_UI_PORT:-8233}

say() { printf '\n==> %s\n' "$*"; }
pids=()
cleanup() {
  touch "$DEMO/stop" 2>/dev/null || true
  for pid in "${pids[@]}"; do pkill -TERM -P "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

for addr in "$TEMPORAL_ADDRESS" "$STRIPESIM_ADDR" "localhost:$UI_PORT"; do
  if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
    echo "demo: $addr is already in use; stop what listens there (or set DEMO_TEMPORAL_ADDRESS / DEMO_STRIPESIM_ADDR / DEMO_UI_PORT)" >&2
    exit 1
  fi
done
rm -rf "$DEMO" && mkdir -p "$DEMO"

say "Starting the Temporal dev server on $TEMPORAL_ADDRESS (Web UI http://localhost:$UI_PORT)"
"$TEMPORAL" server start-dev --ip "${TEMPORAL_ADDRESS%:*}" --port "${TEMPORAL_ADDRESS##*:}" --ui-port "$UI_PORT" \
  --search-attribute ClaimStatus=Keyword --search-attribute ApprovalDeadline=Datetime \
  --dynamic-config-value history.transferProcessorMaxPollRPS=1000 \
  --log-level error >"$DEMO/temporal.log" 2>&1 &
pids+=($!)
# Ready when the search attributes are (grep without -q: with pipefail, an
# early grep exit would fail the pipeline).
ready() { "$TEMPORAL" operator search-attribute list 2>/dev/null | grep ClaimStatus >/dev/null; }
for _ in $(seq 1 150); do ready && break; sleep 0.2; done
ready || { echo "dev server did not come up; see $DEMO/temporal.log" >&2; exit 1; }

say "Starting stripesim (a local Stripe) on $STRIPESIM_ADDR"
bin/stripesim >"$DEMO/stripesim.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do (exec 3<>"/dev/tcp/${STRIPESIM_ADDR%:*}/${STRIPESIM_ADDR##*:}") 2>/dev/null && break; sleep 0.1; done

say "Starting the worker under a supervisor that restarts it when it dies"
echo "    crash injection: claim-0042 dies in step 7 (notify); claim-0043 dies in step 6 after Stripe made the transfer"
(
  while [ ! -e "$DEMO/stop" ]; do
    set +e
    bin/worker --crash-at claim-0042:7,claim-0043:6:after-effect >>"$DEMO/worker.log" 2>&1
    rc=$?
    set -e
    [ -e "$DEMO/stop" ] && break
    [ $rc -eq 137 ] && echo "    [supervisor] worker was killed with SIGKILL; starting a new one" || echo "    [supervisor] worker exited ($rc); starting a new one"
    sleep 0.2
  done
) 2>/dev/null &  # bash's own "Killed" notices; the supervisor says it instead
pids+=($!)

say "Starting claims"
bin/starter examples/claims/claim-0042.json examples/claims/claim-0043.json
echo "    claim-0044 gets approval TTLs of 3 s + 3 s, and nobody will answer:"
bin/starter --approval-ttl 3s --escalation-ttl 3s examples/claims/claim-0044.json

say "Both 1840.00 claims are above the 1000.00 auto-approve limit, so they park at step 5"
bin/claimsctl wait --status waiting --timeout 90s claim-0042 claim-0043
echo "    Waiting holds no worker: no activity, no goroutine, just a durable timer. Find them with:"
echo "    \$ temporal workflow list --query 'ClaimStatus=\"waiting\"'"
"$TEMPORAL" workflow list --query 'ClaimStatus="waiting"' | sed 's/^/    /'

say "An adjuster approves claim-0042"
echo "    \$ temporal workflow signal --workflow-id claim-0042 --name approve --input '{\"approver\":\"adjuster-17\",\"note\":\"invoice checks out\"}'"
"$TEMPORAL" workflow signal --workflow-id claim-0042 --name approve --input '{"approver":"adjuster-17","note":"invoice checks out"}' | sed 's/^/    /'
bin/claimsctl wait --closed --timeout 120s claim-0042 >/dev/null

say "An adjuster approves claim-0043"
"$TEMPORAL" workflow signal --workflow-id claim-0043 --name approve --input '{"approver":"adjuster-17"}' | sed 's/^/    /'
bin/claimsctl wait --closed --timeout 120s claim-0043 >/dev/null

say "claim-0044: nobody answers; it escalates to supervisors, then expires"
bin/claimsctl wait --closed --timeout 120s claim-0044 >/dev/null

say "What happened, read from each claim's event history"
bin/claimsctl show claim-0042 claim-0043 claim-0044
echo "    Messages in the mail spool $MAIL_SPOOL (claimant notices, reminder, escalation): $(ls "$MAIL_SPOOL" | grep -c '\.eml$')"

say "Transfers at the payment provider"
bin/claimsctl payments claim-0042 claim-0043 claim-0044
