#!/usr/bin/env bash
# Smoke test of the DBOS peer against a throwaway PostgreSQL 15, stripesim and
# modelsim: three claims below the limit, one above it (waiting, approved),
# and one crash at each kill point (after-pay, in-notify) with a restart.
#
#   testbed/peers/dbos/smoke.sh            (from anywhere; KEEP=1 keeps the work dir)
#
# Needs /usr/lib/postgresql/15/bin (initdb refuses root: run as root it
# uses `su postgres`), curl and jq. Exits non-zero if a figure is wrong.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
SIMBIN=${SIMBIN:-/tmp/peerbin}
WORK=$(mktemp -d /tmp/peer-dbos-smoke.XXXXXX)
chmod 755 "$WORK"

free_port() { # a port nobody listens on, from $1 up
	local p=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
	echo "$p"
}
PGPORT=$(free_port 25432)
STRIPE_PORT=$(free_port 28111)
MODEL_PORT=$(free_port $((STRIPE_PORT + 1)))
PEER_PORT=$(free_port $((MODEL_PORT + 1)))

PIDS=()
PEER_PID=
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else bash -c "$*"; fi; }
cleanup() {
	set +e
	[ -n "$PEER_PID" ] && kill "$PEER_PID" 2>/dev/null && wait "$PEER_PID" 2>/dev/null
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
	as_pg "$PGBIN/pg_ctl -D $WORK/pg -m fast stop" >/dev/null 2>&1
	if [ "${KEEP:-}" = 1 ]; then echo "work dir kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; echo "--- peer log tail" >&2; tail -n 40 "$WORK"/peer*.log >&2 || true; exit 1; }

wait_for() { # wait_for <seconds> <command...>
	local deadline=$((SECONDS + $1)); shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || return 1
		sleep 0.2
	done
}

echo "== build"
(cd "$HERE" && go build -o "$WORK/peer-dbos" .)
if [ ! -x "$SIMBIN/stripesim" ] || [ ! -x "$SIMBIN/modelsim" ]; then
	mkdir -p "$SIMBIN"
	(cd "$REPO" && go build -o "$SIMBIN/" ./testbed/cmd/stripesim ./testbed/cmd/modelsim)
fi

echo "== postgres on :$PGPORT"
mkdir -p "$WORK/pg"
[ "$(id -u)" = 0 ] && chown postgres "$WORK/pg"
as_pg "$PGBIN/initdb -D $WORK/pg -U postgres --auth=trust" >"$WORK/initdb.log" 2>&1 || { cat "$WORK/initdb.log"; exit 1; }
as_pg "$PGBIN/pg_ctl -D $WORK/pg -o '-p $PGPORT -k /tmp' -l $WORK/pg/log -w start" >/dev/null
psql -q -h 127.0.0.1 -p "$PGPORT" -U postgres -c "CREATE DATABASE peer_dbos" >/dev/null

echo "== stripesim on :$STRIPE_PORT, modelsim on :$MODEL_PORT"
"$SIMBIN/stripesim" -addr "127.0.0.1:$STRIPE_PORT" -db "$WORK/stripe.db" >"$WORK/stripesim.log" 2>&1 &
PIDS+=($!)
"$SIMBIN/modelsim" -addr "127.0.0.1:$MODEL_PORT" >"$WORK/modelsim.log" 2>&1 &
PIDS+=($!)
wait_for 20 curl -sf "http://127.0.0.1:$STRIPE_PORT/_sim/health" || fail "stripesim did not start"
wait_for 20 curl -s "http://127.0.0.1:$MODEL_PORT/_sim/calls" || fail "modelsim did not start"

PEER="http://127.0.0.1:$PEER_PORT"
export PEER_ADDR="127.0.0.1:$PEER_PORT"
export PG_URL="postgres://postgres@127.0.0.1:$PGPORT/peer_dbos?sslmode=disable"
export MODEL_BASE_URL="http://127.0.0.1:$MODEL_PORT/v1" MODEL_API_KEY=sk-sim
export STRIPE_API_BASE="http://127.0.0.1:$STRIPE_PORT" STRIPE_SECRET_KEY=sk_test_local
export MAIL_SPOOL="$WORK/mail" AUTO_APPROVE_LIMIT_MINOR=100000 APPROVAL_TIMEOUT=24h
RUN=0

start_peer() { # start_peer <PEER_CRASH>: starts the peer and waits for /healthz
	RUN=$((RUN + 1))
	PEER_CRASH=$1 PEER_CRASH_STATE="$WORK/crash-${1:-none}" "$WORK/peer-dbos" >"$WORK/peer.$RUN.log" 2>&1 &
	PEER_PID=$!
	wait_for 60 curl -sf "$PEER/healthz" || fail "peer did not become healthy (run $RUN)"
}
stop_peer() {
	kill "$PEER_PID" 2>/dev/null || true
	wait "$PEER_PID" 2>/dev/null || true
	PEER_PID=
}

submit() { # submit <id> <amount_minor>
	local code
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$PEER/claims" -H 'Content-Type: application/json' -d "{
		\"claim_id\":\"$1\",\"policy_id\":\"pol-1001\",
		\"claimant\":{\"name\":\"Ada Lovelace\",\"email\":\"ada@example.com\",\"stripe_account\":\"acct_1Ada\"},
		\"amount_minor\":$2,\"currency\":\"usd\",\"description\":\"A burst pipe flooded the kitchen overnight\"}")
	[ "$code" = 202 ] || fail "POST /claims $1: $code"
}
status() { curl -sf "$PEER/claims/$1" | jq -r .status; }
is_status() { [ "$(status "$1")" = "$2" ]; }
transfers() { curl -sf -u sk_test_local: "http://127.0.0.1:$STRIPE_PORT/v1/transfers?limit=100&transfer_group=$1" | jq '.data | length'; }
model_calls() { curl -sf "http://127.0.0.1:$MODEL_PORT/_sim/calls" | jq --arg id "$1" '[.[] | select(.claim_id == $id)] | length'; }
mails() { find "$WORK/mail" -name "$1.*eml" 2>/dev/null | wc -l | tr -d ' '; }
audit_rows() { psql -tA -h 127.0.0.1 -p "$PGPORT" -U postgres peer_dbos -c "SELECT count(*) FROM claim_audit WHERE claim_id = '$1'"; }

ROWS=()
check() { # check <id> <want status>: one transfer (if paid), two model calls, one e-mail, one audit row
	local id=$1 want=$2 st tr mc ml au
	st=$(status "$id"); tr=$(transfers "$id"); mc=$(model_calls "$id"); ml=$(mails "$id"); au=$(audit_rows "$id")
	ROWS+=("$(printf '%-16s %-8s %9s %11s %6s %6s' "$id" "$st" "$tr" "$mc" "$ml" "$au")")
	local want_tr=1; [ "$want" = paid ] || want_tr=0
	[ "$st" = "$want" ] || fail "$id: status $st, want $want"
	[ "$tr" = "$want_tr" ] || fail "$id: $tr transfers, want $want_tr"
	[ "$mc" = 2 ] || fail "$id: $mc model calls, want 2"
	[ "$ml" = 1 ] || fail "$id: $ml e-mails, want 1"
	[ "$au" = 1 ] || fail "$id: $au audit rows, want 1"
}

echo "== 3 claims below the limit"
start_peer ""
for i in 1 2 3; do submit "small-$i" 50000; done
submit small-1 50000 # starting a claim that exists is a no-op
for i in 1 2 3; do wait_for 60 is_status "small-$i" paid || fail "small-$i: $(status small-$i), want paid"; done
for i in 1 2 3; do check "small-$i" paid; done

echo "== control API edges: unknown claim 404, invalid claim failed"
code=$(curl -s -o /dev/null -w '%{http_code}' "$PEER/claims/nope")
[ "$code" = 404 ] || fail "GET unknown claim: $code, want 404"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$PEER/claims/nope/approve" -d '{"approver":"adjuster-17"}')
[ "$code" = 404 ] || fail "approve unknown claim: $code, want 404"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$PEER/claims" -d '{"claim_id":"bad-1","policy_id":"pol-1001",
	"claimant":{"name":"X","email":"x@example.com","stripe_account":"acct_1X"},"amount_minor":0,"currency":"usd"}')
[ "$code" = 202 ] || fail "POST invalid claim: $code, want 202"
wait_for 30 is_status bad-1 failed || fail "bad-1: $(status bad-1), want failed"
[ "$(model_calls bad-1)" = 0 ] || fail "bad-1 reached the model"

echo "== 1 claim above the limit: waiting, approve, paid"
submit big-1 200000
wait_for 60 is_status big-1 waiting || fail "big-1: $(status big-1), want waiting"
sleep 1
[ "$(transfers big-1)" = 0 ] || fail "big-1 paid before approval"
curl -sf -X POST "$PEER/claims/big-1/approve" -H 'Content-Type: application/json' -d '{"approver":"adjuster-17"}' >/dev/null
wait_for 60 is_status big-1 paid || fail "big-1: $(status big-1), want paid"
check big-1 paid

echo "== 1 claim parked across a SIGKILL restart: still waiting, approve, paid"
submit big-2 200000
wait_for 60 is_status big-2 waiting || fail "big-2: $(status big-2), want waiting"
kill -KILL "$PEER_PID"; { wait "$PEER_PID"; } 2>/dev/null || true
start_peer ""
[ "$(status big-2)" = waiting ] || fail "big-2: $(status big-2) after the restart, want waiting"
curl -sf -X POST "$PEER/claims/big-2/approve" -H 'Content-Type: application/json' -d '{"approver":"adjuster-17"}' >/dev/null
curl -sf -X POST "$PEER/claims/big-2/approve" -H 'Content-Type: application/json' -d '{"approver":"adjuster-17"}' >/dev/null
wait_for 60 is_status big-2 paid || fail "big-2: $(status big-2), want paid"
check big-2 paid
stop_peer

echo "== 1 claim above the limit, APPROVAL_TIMEOUT=2s: expired"
APPROVAL_TIMEOUT=2s start_peer ""
submit big-3 200000
wait_for 30 is_status big-3 expired || fail "big-3: $(status big-3), want expired"
check big-3 expired
stop_peer

for point in after-pay in-notify; do
	id="crash-$point"
	echo "== PEER_CRASH=$point: $id"
	start_peer "$point"
	pid=$PEER_PID
	submit "$id" 50000
	rc=0
	{ wait "$pid"; } 2>/dev/null || rc=$?
	PEER_PID=
	[ "$rc" = 137 ] || fail "$point: the peer exited with $rc, want 137 (SIGKILL)"
	grep -qx "$id" "$WORK/crash-$point" || fail "$point: $id not in PEER_CRASH_STATE"
	echo "   killed (exit $rc); transfers so far: $(transfers "$id"), e-mails so far: $(mails "$id"); restarting"
	start_peer "$point"
	wait_for 60 is_status "$id" paid || fail "$id: $(status "$id"), want paid after the restart"
	check "$id" paid
	grep -q "Recovered pending workflows" "$WORK/peer.$RUN.log" || fail "$point: no recovery logged by Launch"
	stop_peer
done

echo
echo "== figures"
printf '%-16s %-8s %9s %11s %6s %6s\n' claim status transfers model_calls emails audit
for r in "${ROWS[@]}"; do echo "$r"; done
echo
echo "stripesim idempotency keys (requests/replays):"
curl -sf "http://127.0.0.1:$STRIPE_PORT/_sim/idempotency" | jq -r '.[] | "  \(.key)  \(.requests)/\(.replays)"' || true
echo "PASS"
