#!/usr/bin/env bash
# Smoke test of the LangGraph peer against a throwaway PostgreSQL, stripesim and
# modelsim: three claims below the limit, one above (approved), one that expires,
# one waiting across a SIGKILL, and the two kill points (after-pay, in-notify),
# each followed by a restart. It prints what stripesim, modelsim and the mail
# spool saw for every claim, and the time from restart to paid.
#
#   testbed/peers/langgraph/smoke.sh           (run from anywhere; needs node, jq, curl)
#
# PEERBIN (default /tmp/peerbin) holds stripesim and modelsim; they are built
# from the repository when missing. PGBIN defaults to /usr/lib/postgresql/15/bin.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
PEERBIN=${PEERBIN:-/tmp/peerbin}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
W=$(mktemp -d /tmp/lgsmoke.XXXXXX)
chmod 755 "$W"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PGPORT=$(port) SPORT=$(port) MPORT=$(port) PPORT=$(port)
PIDS=()
PEER_PID=

as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else bash -c "$*"; fi; }
cleanup() {
  [ -n "$PEER_PID" ] && kill "$PEER_PID" 2>/dev/null || true
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  as_pg "$PGBIN/pg_ctl -D $W/pg -m immediate stop" >/dev/null 2>&1 || true
  echo "logs and data: $W"
}
trap cleanup EXIT
trap "exit 130" INT TERM
say() { printf '\n== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; tail -n 30 "$W/peer.log" >&2; exit 1; }

# -- the outside world
if [ ! -x "$PEERBIN/stripesim" ] || [ ! -x "$PEERBIN/modelsim" ]; then
  (cd "$REPO" && go build -o "$PEERBIN/" ./testbed/cmd/stripesim ./testbed/cmd/modelsim)
fi
(cd "$HERE" && [ -d node_modules ] || npm ci --no-audit --no-fund)

mkdir -p "$W/pg"
[ "$(id -u)" = 0 ] && chown postgres "$W/pg"
as_pg "$PGBIN/initdb -D $W/pg -U postgres --auth=trust" >"$W/initdb.log"
as_pg "$PGBIN/pg_ctl -D $W/pg -o '-p $PGPORT -k /tmp' -l $W/pg/log -w start" >/dev/null
"$PGBIN/createdb" -h /tmp -p "$PGPORT" -U postgres peer
"$PEERBIN/stripesim" -addr "127.0.0.1:$SPORT" -db "$W/stripe.db" >"$W/stripesim.log" 2>&1 & PIDS+=($!)
"$PEERBIN/modelsim" -addr "127.0.0.1:$MPORT" >"$W/modelsim.log" 2>&1 & PIDS+=($!)

export PEER_ADDR=127.0.0.1:$PPORT
export PG_URL=postgres://postgres@127.0.0.1:$PGPORT/peer
export MODEL_BASE_URL=http://127.0.0.1:$MPORT/v1 MODEL_API_KEY=sim
export STRIPE_API_BASE=http://127.0.0.1:$SPORT STRIPE_SECRET_KEY=sk_test_local
export MAIL_SPOOL=$W/mail PEER_CRASH_STATE=$W/crash-state
export AUTO_APPROVE_LIMIT_MINOR=100000
P=http://$PEER_ADDR

now_ms() { date +%s%3N; }
# start_peer [VAR=value ...]: starts the peer and waits for /healthz.
start_peer() {
  env "$@" node "$HERE/main.mjs" >>"$W/peer.log" 2>&1 &
  PEER_PID=$!
  for _ in $(seq 1 200); do
    curl -fsS "$P/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$PEER_PID" 2>/dev/null || fail "peer exited during start"
    sleep 0.05
  done
  fail "peer not healthy"
}
stop_peer() { kill "$PEER_PID" 2>/dev/null || true; wait "$PEER_PID" 2>/dev/null || true; PEER_PID=; }
post_claim() { # id amount
  curl -fsS -X POST "$P/claims" -H 'Content-Type: application/json' -d "$(jq -nc --arg id "$1" --argjson amt "$2" \
    '{claim_id:$id, policy_id:"pol-1001", claimant:{name:"Ada Lovelace", email:"ada@example.com", stripe_account:"acct_1Claimant"},
      amount_minor:$amt, currency:"usd", description:"A burst pipe flooded the kitchen floor."}')" >/dev/null
}
status() { curl -fsS "$P/claims/$1" | jq -r .status; }
wait_status() { # id status [seconds]
  local deadline=$(( $(date +%s) + ${3:-30} ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    [ "$(status "$1" 2>/dev/null || true)" = "$2" ] && return 0
    sleep 0.05
  done
  fail "$1 did not reach $2 (is $(status "$1" 2>/dev/null || echo '?'))"
}
transfers() { curl -fsS -H "Authorization: Bearer sk_test_local" "http://127.0.0.1:$SPORT/v1/transfers?transfer_group=$1" | jq '.data | length'; }
model_calls() { curl -fsS "http://127.0.0.1:$MPORT/_sim/calls" | jq --arg id "$1" '[.[] | select(.claim_id == $id)] | length'; }
mails() { ls "$MAIL_SPOOL" 2>/dev/null | grep -c "^$1\." || true; }
report() { # id
  printf '%-14s status=%-8s transfers=%s model_calls=%s mails=%s %s\n' "$1" "$(status "$1")" "$(transfers "$1")" \
    "$(model_calls "$1")" "$(mails "$1")" "$(curl -fsS "$P/claims/$1" | jq -c '{payout_minor, transfer_id}')"
}

say "start"
start_peer PEER_CRASH=

say "three claims below the limit (50000)"
t0=$(now_ms)
for i in 1 2 3; do post_claim "lg-small-$i" 50000; done
for i in 1 2 3; do wait_status "lg-small-$i" paid; done
echo "all three paid in $(( $(now_ms) - t0 )) ms"
for i in 1 2 3; do report "lg-small-$i"; [ "$(transfers "lg-small-$i")" = 1 ] || fail "lg-small-$i transfers"; done

say "one claim above the limit (200000): waiting, approve, paid"
post_claim lg-big-1 200000
wait_status lg-big-1 waiting
curl -fsS -X POST "$P/claims/lg-big-1/approve" -H 'Content-Type: application/json' -d '{"approver":"adjuster-17"}' -w '%{http_code}\n'
wait_status lg-big-1 paid
report lg-big-1
echo "a second approve: $(curl -sS -o /dev/null -w '%{http_code}' -X POST "$P/claims/lg-big-1/approve" -d '{"approver":"x"}')  unknown: $(curl -sS -o /dev/null -w '%{http_code}' "$P/claims/nope")"
post_claim lg-small-1 50000 # a repeat start is a no-op
report lg-small-1

say "a claim waiting across a SIGKILL of the peer (no kill point), then approved"
post_claim lg-big-2 200000
wait_status lg-big-2 waiting
kill -9 "$PEER_PID"; wait "$PEER_PID" 2>/dev/null || true
start_peer PEER_CRASH=
echo "after restart: $(status lg-big-2)"
curl -fsS -X POST "$P/claims/lg-big-2/approve" -d '{"approver":"adjuster-17"}' -o /dev/null
wait_status lg-big-2 paid
report lg-big-2
stop_peer

for point in after-pay in-notify; do
  id=lg-crash-$point
  say "PEER_CRASH=$point: claim $id (50000)"
  start_peer PEER_CRASH=$point
  post_claim "$id" 50000
  for _ in $(seq 1 600); do kill -0 "$PEER_PID" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$PEER_PID" 2>/dev/null && fail "the peer did not kill itself at $point"
  wait "$PEER_PID" 2>/dev/null || true
  echo "peer died at $point; transfers so far=$(transfers "$id") mails so far=$(mails "$id") crash-state: $(tr '\n' ' ' <"$PEER_CRASH_STATE")"
  t0=$(now_ms)
  start_peer PEER_CRASH=$point
  t1=$(now_ms)
  wait_status "$id" paid
  echo "restart: healthy after $(( t1 - t0 )) ms, paid $(( $(now_ms) - t0 )) ms after the restart"
  report "$id"
  grep "\"claim_id\":\"$id\"" "$W/peer.log" | jq -c '{msg, why, transfer_id, replayed, point}' | sed 's/,"[a-z_]*":null//g'
  stop_peer
done

say "APPROVAL_TIMEOUT=2s: a claim above the limit expires"
start_peer PEER_CRASH= APPROVAL_TIMEOUT=2s
post_claim lg-big-expire 200000
wait_status lg-big-expire waiting
t0=$(now_ms)
wait_status lg-big-expire expired 10
echo "expired $(( $(now_ms) - t0 )) ms after waiting was seen"
report lg-big-expire
stop_peer

say "20 claims at once, SIGKILL (no kill point) while they run, restart"
start_peer PEER_CRASH=
posts=()
for i in $(seq 1 20); do post_claim "lg-burst-$i" 50000 & posts+=($!); done
for j in "${posts[@]}"; do wait "$j"; done
sleep 0.3
kill -9 "$PEER_PID"; wait "$PEER_PID" 2>/dev/null || true
echo "killed with $(grep -c '"msg":"done","claim_id":"lg-burst' "$W/peer.log" || true) of 20 done"
t0=$(now_ms)
start_peer PEER_CRASH=
grep '"recovery pass"' "$W/peer.log" | tail -1
for i in $(seq 1 20); do wait_status "lg-burst-$i" paid 60; done
echo "all 20 paid $(( $(now_ms) - t0 )) ms after the restart"
calls=$(curl -fsS "http://127.0.0.1:$MPORT/_sim/calls")
for i in $(seq 1 20); do
  id=lg-burst-$i
  printf '%s transfers=%s model_calls=%s mails=%s\n' "$id" "$(transfers "$id")" \
    "$(jq --arg id "$id" '[.[] | select(.claim_id == $id)] | length' <<<"$calls")" "$(mails "$id")"
done | sort | awk '{print $2, $3, $4}' | sort | uniq -c
for i in $(seq 1 20); do [ "$(transfers "lg-burst-$i")" = 1 ] || fail "lg-burst-$i: $(transfers "lg-burst-$i") transfers"; done
stop_peer

say "the peer's tables"
psql_() { "$PGBIN/psql" -h /tmp -p "$PGPORT" -U postgres peer -Atc "$1"; }
start_peer PEER_CRASH=
psql_ "SELECT claim_id, status, payout_minor, transfer_id FROM peer_claims ORDER BY created_at" | column -t -s '|'
echo "audit rows: $(psql_ "SELECT count(*) FROM peer_audit")  (replayed payments: $(psql_ "SELECT string_agg(claim_id, ',') FROM peer_audit WHERE payment_replayed"))"
echo "checkpoints: $(psql_ "SELECT count(*) FROM checkpoints")  checkpoint_writes: $(psql_ "SELECT count(*) FROM checkpoint_writes")"
stop_peer
say "OK"
