# Shared by demo.sh and record-histories.sh: bring up a local stack (the
# Temporal dev server, stripesim, and a worker under a supervisor loop that
# restarts it when it dies) in a directory, and take it down again.
#
# STACK=var is the programs' own local stack (internal/config's LocalDir):
# its files are where every program looks when no variable names them, so
# claimsctl, the inbox, a worker or the starter run later from this
# directory find them with no variable set; here they are not exported, so
# the demo runs on the defaults too. Any other STACK is named to each
# program by its variable.
#
# Set before sourcing: STACK (a directory), TEMPORAL_ADDRESS, STRIPESIM_ADDR,
# UI_PORT, CODEC_ADDR for the codec server the Web UI and the CLI decode
# payloads through (unset: payloads in clear, PAYLOAD_ENCRYPTION=off), and
# INBOX_ADDR for the adjusters' inbox (unset: no inbox), and
# JAEGER_OTLP_GRPC_ADDR, JAEGER_UI_ADDR, JAEGER_OTLP_HTTP_ADDR,
# JAEGER_QUERY_GRPC_ADDR, JAEGER_HEALTH_ADDR for Jaeger all-in-one (bin/jaeger,
# make jaeger) that every program sends its spans to (unset: tracing off).
# Call stack_up [worker flags...]; stack_down runs on exit.

TEMPORAL=${TEMPORAL:-$(command -v temporal || echo "$(go env GOPATH)/bin/temporal")}
export TEMPORAL_NAMESPACE=default
export STRIPE_API_BASE=http://$STRIPESIM_ADDR STRIPE_SECRET_KEY=sk_test_local
CLAIMS_DB=$STACK/claims.db MAIL_SPOOL=$STACK/mail STRIPESIM_DB=$STACK/stripesim.db
BLOB_URL="file://$PWD/$STACK/blobs?create_dir=true"
# The approver directory with a signing key per approver, and the ledger
# key that signs the claim-file log's checkpoints, made by stack_up.
APPROVERS_FILE=$STACK/approvers.json KEYS=$STACK/keys LEDGER_KEY=$STACK/ledger.key INBOX_SIGNING_KEY=$STACK/keys/inbox.key
# Payloads are encrypted with this stack's key, which every program here
# shares; the codec server decodes them for the Web UI and the CLI.
CODEC_KEYS_FILE=$STACK/codec-keys.json
if [ "$STACK" != var ]; then
  export CLAIMS_DB MAIL_SPOOL STRIPESIM_DB BLOB_URL APPROVERS_FILE LEDGER_KEY INBOX_SIGNING_KEY CODEC_KEYS_FILE
fi
# The stack's processes' logs, and the file that tells the supervisor to stop.
RUN=$STACK/run
export TEMPORAL_ADDRESS STRIPESIM_ADDR
if [ -n "${CODEC_ADDR:-}" ]; then
  export TEMPORAL_CODEC_ENDPOINT=http://$CODEC_ADDR
else
  export PAYLOAD_ENCRYPTION=off
fi
# Approval notices link to the claim's page in the inbox.
if [ -n "${INBOX_ADDR:-}" ]; then export INBOX_ADDR INBOX_URL=http://$INBOX_ADDR; fi
# Tracing: every program exports to the stack's Jaeger by OTLP/gRPC (the
# standard OTEL_* variables, a batch a second), and a claim's trace is
# linked to the inbox's page that draws it from Jaeger's query service.
jaeger_addrs=()
if [ -n "${JAEGER_OTLP_GRPC_ADDR:-}" ]; then
  if [ -x bin/jaeger ]; then
    jaeger_addrs=("$JAEGER_OTLP_GRPC_ADDR" "${JAEGER_UI_ADDR:?set it with JAEGER_OTLP_GRPC_ADDR}"
      "${JAEGER_OTLP_HTTP_ADDR:?set it with JAEGER_OTLP_GRPC_ADDR}" "${JAEGER_QUERY_GRPC_ADDR:?set it with JAEGER_OTLP_GRPC_ADDR}"
      "${JAEGER_HEALTH_ADDR:?set it with JAEGER_OTLP_GRPC_ADDR}")
    export OTEL_EXPORTER_OTLP_ENDPOINT=http://$JAEGER_OTLP_GRPC_ADDR OTEL_BSP_SCHEDULE_DELAY=1000
    JAEGER_QUERY_URL=http://$JAEGER_UI_ADDR
    if [ -n "${INBOX_URL:-}" ]; then export TRACE_URL_TEMPLATE="$INBOX_URL/traces/{trace_id}"; fi
  else
    echo "tracing off: bin/jaeger is not built (make jaeger)" >&2
    JAEGER_OTLP_GRPC_ADDR=
  fi
fi
export LOG_LEVEL=${LOG_LEVEL:-info}

say() { printf '\n==> %s\n' "$*"; }
stack_pids=()
stack_down() {
  touch "$RUN/stop" 2>/dev/null || true
  for pid in "${stack_pids[@]}"; do pkill -TERM -P "$pid" 2>/dev/null || true; kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stack_down EXIT

listening() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

stack_up() {
  for addr in "$TEMPORAL_ADDRESS" "$STRIPESIM_ADDR" "localhost:$UI_PORT" ${CODEC_ADDR:+"$CODEC_ADDR"} ${INBOX_ADDR:+"$INBOX_ADDR"} "${jaeger_addrs[@]}"; do
    if listening "$addr"; then
      echo "$addr is already in use; stop what listens there" >&2
      exit 1
    fi
  done
  # Afresh: the dev server keeps nothing between runs, so neither does
  # the rest of the stack (its payload key excepted: it is made once).
  say "Starting afresh in $STACK/: the last run's claims store, documents, mail, keys and logs are removed"
  rm -rf "$STACK"/claims.db* "$STACK"/stripesim.db* "$STACK"/crash-fired "$STACK/blobs" "$MAIL_SPOOL" "$KEYS" \
    "$APPROVERS_FILE" "$LEDGER_KEY" "$LEDGER_KEY.pub" "$RUN"
  mkdir -p "$RUN"

  say "Making a signing key for each approver (claimsctl keygen); the public halves go in $APPROVERS_FILE"
  for approver in adjuster-17 adjuster-9 supervisor-3; do
    bin/claimsctl keygen --approver "$approver" --out "$KEYS/$approver.key" --directory "$APPROVERS_FILE" >/dev/null
    echo "    $KEYS/$approver.key"
  done
  if [ -n "${INBOX_ADDR:-}" ]; then
    bin/claimsctl keygen --service inbox --out "$INBOX_SIGNING_KEY" --directory "$APPROVERS_FILE" >/dev/null
    echo "    $INBOX_SIGNING_KEY (the inbox's service key: it signs for whoever signs in)"
  fi
  bin/claimsctl keygen --ledger demo --out "$LEDGER_KEY" >/dev/null
  echo "    $LEDGER_KEY (the ledger key: it signs the checkpoints of the claim-file log; $LEDGER_KEY.pub verifies them)"

  local codec_flags=()
  if [ -n "${CODEC_ADDR:-}" ]; then
    say "Encrypting every payload (AES-256-GCM) with a key made for this stack, $CODEC_KEYS_FILE"
    [ -s "$CODEC_KEYS_FILE" ] || (umask 077; bin/codec-server -generate-key demo >"$CODEC_KEYS_FILE" 2>/dev/null)
    echo "    The Temporal server stores only ciphertext; the codec server at $TEMPORAL_CODEC_ENDPOINT decodes for the Web UI and the CLI."
    CODEC_SERVER_ADDR=$CODEC_ADDR CODEC_CORS_ORIGINS=http://localhost:$UI_PORT bin/codec-server >"$RUN/codec-server.log" 2>&1 &
    stack_pids+=($!)
    for _ in $(seq 1 50); do listening "$CODEC_ADDR" && break; sleep 0.1; done
    codec_flags=(--ui-codec-endpoint "$TEMPORAL_CODEC_ENDPOINT")
  fi

  if [ -n "${JAEGER_OTLP_GRPC_ADDR:-}" ]; then
    say "Starting Jaeger all-in-one (traces in memory): OTLP on $JAEGER_OTLP_GRPC_ADDR, query API on $JAEGER_QUERY_URL"
    JAEGER_OTLP_GRPC_ADDR=$JAEGER_OTLP_GRPC_ADDR JAEGER_UI_ADDR=$JAEGER_UI_ADDR JAEGER_OTLP_HTTP_ADDR=$JAEGER_OTLP_HTTP_ADDR \
      JAEGER_QUERY_GRPC_ADDR=$JAEGER_QUERY_GRPC_ADDR JAEGER_HEALTH_ADDR=$JAEGER_HEALTH_ADDR \
      bin/jaeger --config deploy/jaeger/local.yaml >"$RUN/jaeger.log" 2>&1 &
    stack_pids+=($!)
    for _ in $(seq 1 100); do listening "$JAEGER_OTLP_GRPC_ADDR" && listening "$JAEGER_UI_ADDR" && break; sleep 0.1; done
    listening "$JAEGER_OTLP_GRPC_ADDR" || { echo "Jaeger did not come up; see $RUN/jaeger.log" >&2; exit 1; }
  fi

  say "Starting the Temporal dev server on $TEMPORAL_ADDRESS (Web UI http://localhost:$UI_PORT)"
  "$TEMPORAL" server start-dev --ip "${TEMPORAL_ADDRESS%:*}" --port "${TEMPORAL_ADDRESS##*:}" --ui-port "$UI_PORT" "${codec_flags[@]}" \
    --search-attribute ClaimStatus=Keyword --search-attribute ApprovalDeadline=Datetime \
    --dynamic-config-value history.transferProcessorMaxPollRPS=1000 \
    --dynamic-config-value matching.useNewMatcher=true \
    --dynamic-config-value system.enableActivityEagerExecution=true \
    --log-level error >"$RUN/temporal.log" 2>&1 &
  stack_pids+=($!)
  # Ready when the search attributes are (grep without -q: with pipefail, an
  # early grep exit would fail the pipeline).
  ready() { "$TEMPORAL" operator search-attribute list 2>/dev/null | grep ClaimStatus >/dev/null; }
  for _ in $(seq 1 150); do ready && break; sleep 0.2; done
  ready || { echo "dev server did not come up; see $RUN/temporal.log" >&2; exit 1; }

  say "Starting stripesim (a local Stripe) on $STRIPESIM_ADDR"
  bin/stripesim >"$RUN/stripesim.log" 2>&1 &
  stack_pids+=($!)
  for _ in $(seq 1 50); do listening "$STRIPESIM_ADDR" && break; sleep 0.1; done

  if [ "${MODEL_PROVIDER:-rules}" = openai ] && [ -z "${MODEL_BASE_URL:-}" ]; then
    local modelsim_addr=${MODELSIM_ADDR:-localhost:12112}
    say "Starting modelsim (an OpenAI-compatible Chat Completions server) on $modelsim_addr"
    bin/modelsim -addr "$modelsim_addr" >"$RUN/modelsim.log" 2>&1 &
    stack_pids+=($!)
    for _ in $(seq 1 50); do listening "$modelsim_addr" && break; sleep 0.1; done
    export MODEL_BASE_URL="http://$modelsim_addr/v1" MODEL_NAME=${MODEL_NAME:-sim-1}
  fi
  echo "    model: ${MODEL_PROVIDER:-rules}${MODEL_BASE_URL:+ at $MODEL_BASE_URL}"

  say "Starting the worker under a supervisor that restarts it when it dies"
  (
    while [ ! -e "$RUN/stop" ]; do
      set +e
      bin/worker "$@" >>"$RUN/worker.log" 2>&1
      rc=$?
      set -e
      [ -e "$RUN/stop" ] && break
      [ $rc -eq 137 ] && echo "    [supervisor] worker was killed with SIGKILL; starting a new one" || echo "    [supervisor] worker exited ($rc); starting a new one"
      sleep 0.2
    done
  ) 2>/dev/null &  # bash's own "Killed" notices; the supervisor says it instead
  stack_pids+=($!)

  if [ -n "${INBOX_ADDR:-}" ]; then
    say "Starting the adjusters' inbox on $INBOX_URL"
    echo "    development sign-in (INBOX_DEV_LOGIN=1, loopback only): pick an approver from the directory, no password"
    INBOX_DEV_LOGIN=1 JAEGER_QUERY_URL=${JAEGER_QUERY_URL:-} bin/inbox >"$RUN/inbox.log" 2>&1 &
    stack_pids+=($!)
    for _ in $(seq 1 100); do listening "$INBOX_ADDR" && break; sleep 0.1; done
    listening "$INBOX_ADDR" || { echo "the inbox did not come up; see $RUN/inbox.log" >&2; exit 1; }
  fi
}
