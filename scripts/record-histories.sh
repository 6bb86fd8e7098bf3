#!/usr/bin/env bash
# Records one history per ClaimWorkflow path into the replay corpus, for the
# replay test that runs on every `make test`: on the shelf of the version new
# runs record, workflows/testdata/histories/<version>/ (versionLatest in
# workflows/versions.go, named as workflows/corpus_test.go names shelves:
# versionLocalNotices is local-notices). Run it (make histories) after a
# change to workflow code that is meant to be compatible: it keeps the
# histories recorded before the change, so both old and new are replayed.
#
# Each file is `temporal workflow show --output json` of one real run against
# a dev server, stripesim and the worker built from this tree.
set -euo pipefail
cd "$(dirname "$0")/.."

STACK=var/histories
TEMPORAL_ADDRESS=${HIST_TEMPORAL_ADDRESS:-localhost:7243}
STRIPESIM_ADDR=${HIST_STRIPESIM_ADDR:-localhost:12121}
UI_PORT=${HIST_UI_PORT:-8243}
JAEGER_OTLP_GRPC_ADDR= # histories are recorded untraced, whatever the shell exports
source scripts/lib.sh

SHELF=$(sed -n 's/^[[:space:]]*versionLatest[[:space:]]*=[[:space:]]*version\([A-Za-z0-9]*\).*/\1/p' workflows/versions.go |
  sed -E 's/([A-Z])/-\1/g; s/^-//' | tr '[:upper:]' '[:lower:]')
[ -n "$SHELF" ] || { echo "record-histories: no versionLatest in workflows/versions.go" >&2; exit 1; }
OUT=workflows/testdata/histories/$SHELF
TAG=${HIST_TAG:-$(date -u +%Y%m%d)}
mkdir -p "$OUT"

id() { echo "hist-$TAG-$1"; }
start() { # name amount [starter flags]; one claimant per claim (many claims by one is a review rule)
  local name=$1 amount=$2; shift 2
  bin/starter "$@" --claim-id "$(id "$name")" --policy pol-1001 --name "Ada Lovelace" --email "$name@example.com" \
    --account "acct_1Ada${name//-/}" --amount "$amount" --description "A burst pipe flooded the kitchen overnight" >/dev/null
}
signal() { "$TEMPORAL" workflow signal --workflow-id "$(id "$1")" --name "$2" --input "$3" >/dev/null; }
# receipt VERDICT NAME APPROVER [claimsctl receipt flags]: a signed decision.
receipt() { local v=$1 name=$2 who=$3; shift 3; bin/claimsctl receipt "$v" "$(id "$name")" --key "$KEYS/$who.key" "$@" 2>/dev/null; }
# direct NAME OPTIONS: a ClaimWorkflow started by hand, as anyone with
# frontend access can, bypassing the starter and its registration.
direct() {
  "$TEMPORAL" workflow start --type ClaimWorkflow --task-queue claims --workflow-id "$(id "$1")" --input "{\"claim\":{\"claim_id\":\"$(id "$1")\",
    \"policy_id\":\"pol-1001\",\"claimant\":{\"name\":\"Mallory\",\"email\":\"mallory@example.com\",\"stripe_account\":\"acct_1Mallory\"},
    \"amount_minor\":999900,\"currency\":\"usd\",\"description\":\"A burst pipe\"},\"options\":$2}" >/dev/null
}

# With the OpenAI-compatible model (modelsim), one claim meets a 429 whose
# Retry-After is longer than a call may wait: the wait goes back to the
# workflow (a durable timer). MODEL_MAX_WAIT is short so that 3 s is longer.
export MODEL_MAX_WAIT=${MODEL_MAX_WAIT:-1s}
stack_up --crash-at "$(id crashed-pay):6:after-effect,$(id crashed-notify):7,$(id crashed-triage):2:after-effect"

say "Running one claim down each path"
start auto 640.00
start crashed-pay 640.00
start crashed-notify 640.00
start crashed-triage 640.00
start approved 1840.00
start approved-update 1840.00
start rejected 1840.00
start amended 1840.00
# Nobody answers: under the law (pol-1001 is California's) the wait is
# escalated, then held for a supervisor, overdue, never denied by silence;
# a supervisor then approves one and rejects the other.
start held 2500.00 --approval-ttl 2s --escalation-ttl 2s
# Long enough that the worker's restarts are over before the reminder: each
# deadline is reached by its timer, and the notices run local in its task.
start escalated 2500.00 --approval-ttl 16s --escalation-ttl 2s
start capped 640.00 --max-payout 100.00
# Stripe down for the payment's first three attempts: it hands the wait
# back after two, waits 30 s on a durable timer, and pays on the next try.
curl -fsS -X POST "http://$STRIPESIM_ADDR/_sim/faults" -H 'Content-Type: application/json' \
  -d "{\"fault\":\"500-before-commit\",\"transfer_group\":\"$(id stripe-down)\",\"times\":3}" >/dev/null
start stripe-down 640.00
# Nothing payable (pol-1001 pays in USD): under the law a person decides the denial.
start denied 640.00 --currency eur
start four-eyes 1840.00 --four-eyes-above 1500
start lowered 1840.00
start refused 1840.00
start handed-on 1840.00
start withdrawn 1840.00
# A frequent claimant: three earlier claims by the same person send a small claim to a human.
for n in 1 2 3; do
  bin/starter --register-only --claim-id "$(id frequent-prior-$n)" --policy pol-1001 --name "Ada Lovelace" --email frequent@example.com \
    --account acct_1AdaFrequent --amount 50.00 --description "A cracked window pane in the hallway" >/dev/null
done
bin/starter --claim-id "$(id frequent)" --policy pol-1001 --name "Ada Lovelace" --email frequent@example.com \
  --account acct_1AdaFrequent --amount 640.00 --description "A burst pipe flooded the kitchen overnight" >/dev/null
direct unregistered '{}'
bin/starter --register-only --claim-id "$(id loosened)" --policy pol-1001 --name Mallory --email mallory@example.com \
  --account acct_1Mallory --amount 9999.00 --description "A burst pipe" >/dev/null
direct loosened '{"auto_approve_limit_minor":4611686018427387904}'

bin/claimsctl wait --status waiting --timeout 2m "$(id approved)" "$(id approved-update)" "$(id rejected)" "$(id amended)" \
  "$(id four-eyes)" "$(id lowered)" "$(id refused)" "$(id frequent)" "$(id handed-on)" "$(id withdrawn)" "$(id denied)"
# Withdrawn while it waits: claimsctl tells the run, which ends with nobody deciding.
bin/claimsctl withdraw "$(id withdrawn)" >/dev/null
signal frequent approve "$(receipt approve frequent adjuster-17)"
signal approved approve "$(receipt approve approved adjuster-17 --note recorded)"
"$TEMPORAL" workflow update execute --workflow-id "$(id approved-update)" --name decide \
  --input "$(receipt approve approved-update adjuster-17)" >/dev/null
signal rejected reject "$(receipt reject rejected adjuster-17 --reason 'recorded rejection')"
signal denied approve "$(receipt approve denied adjuster-17)"
signal denied reject "$(receipt reject denied adjuster-17 --reason 'the policy pays in dollars only')"
signal four-eyes approve "$(receipt approve four-eyes adjuster-17)"
signal four-eyes approve "$(receipt approve four-eyes supervisor-3)"
signal lowered approve "$(receipt approve lowered adjuster-9 --amount 1400.00 --reason 'the invoice covers 1400.00')"
"$TEMPORAL" workflow update execute --workflow-id "$(id handed-on)" --name decide \
  --input "$(receipt handoff handed-on adjuster-17 --to supervisor-3 --note 'a supervisor knows this claimant')" >/dev/null
signal handed-on approve "$(receipt approve handed-on supervisor-3)"
signal refused approve '{"approver":"supervisor-3"}'
signal refused approve "$(receipt approve refused adjuster-9)"
signal refused approve "$(receipt approve refused supervisor-3)"
first=$(receipt approve amended adjuster-17)
bin/claimsctl amend "$(id amended)" --by adjuster-9 --amount 2100.00 >/dev/null
signal amended approve "$first"
for _ in $(seq 1 100); do
  "$TEMPORAL" workflow query --workflow-id "$(id amended)" --name status -o json 2>/dev/null | grep -q '"2100.00"' && break
  sleep 0.2
done
bin/claimsctl wait --status waiting --timeout 1m "$(id amended)" >/dev/null
signal amended approve "$(receipt approve amended adjuster-9)"
signal amended approve "$(receipt approve amended adjuster-17)"
overdue() { # name: wait until the run says its wait is overdue
  for _ in $(seq 1 300); do
    "$TEMPORAL" workflow query --workflow-id "$(id "$1")" --name status -o json 2>/dev/null | grep -q '"overdue_at"' && return
    sleep 0.2
  done
  echo "record-histories: $(id "$1") never became overdue" >&2; exit 1
}
overdue held
signal held approve "$(receipt approve held supervisor-3)"
overdue escalated
signal escalated reject "$(receipt reject escalated supervisor-3 --reason 'the damage predates the policy')"

for name in auto crashed-pay crashed-notify crashed-triage approved approved-update rejected amended held escalated capped denied \
  four-eyes lowered refused frequent unregistered loosened handed-on withdrawn stripe-down; do
  bin/claimsctl wait --closed --timeout 2m "$(id "$name")" >/dev/null
  "$TEMPORAL" workflow show --workflow-id "$(id "$name")" --output json > "$OUT/$(id "$name").json"
  echo "    $OUT/$(id "$name").json"
done

if [ "${MODEL_PROVIDER:-rules}" = openai ]; then
  curl -fsS -X POST "${MODEL_BASE_URL%/v1}/_sim/faults" -d '["429:3"]' >/dev/null
  start rate-limited 640.00
  bin/claimsctl wait --closed --timeout 2m "$(id rate-limited)" >/dev/null
  "$TEMPORAL" workflow show --workflow-id "$(id rate-limited)" --output json > "$OUT/$(id rate-limited).json"
  echo "    $OUT/$(id rate-limited).json"
fi
