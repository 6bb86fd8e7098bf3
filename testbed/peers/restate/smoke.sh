#!/usr/bin/env bash
# Smoke test of the Restate peer, everything on 127.0.0.1, in a fresh directory:
# PostgreSQL 15, stripesim, modelsim, the Restate server (server.sh) and the peer.
#   1. three claims under the limit -> paid, one transfer each
#   2. one above the limit -> waiting -> approve -> paid
#   3. PEER_CRASH=after-pay, then in-notify: the peer kills itself; restarted, the claim
#      reaches paid with exactly one transfer and two model calls.
# Needs: root (initdb runs as user postgres), go, npm, jq, curl; /tmp/peerbin/{stripesim,
# modelsim} (built from the main module when missing). KEEP=1 keeps the directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
main=$(cd "$here/../../.." && pwd)
pgbin=${PGBIN:-/usr/lib/postgresql/15/bin}
work=$(mktemp -d /tmp/restate-smoke.XXXXXX)
chmod 755 "$work"
pids=()
peer_pid=
cleanup() {
	set +e
	[ -n "$peer_pid" ] && kill "$peer_pid" 2>/dev/null
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -f "$work/pg/postmaster.pid" ] && su postgres -c "$pgbin/pg_ctl -D $work/pg -m fast stop" >/dev/null
	if [ "${KEEP:-}" = 1 ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
waitfor() { # url, seconds
	local i
	for i in $(seq 1 $(($2 * 10))); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done
	echo "timeout waiting for $1" >&2; return 1
}
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc -l | xargs printf '%.2f'; }

echo "== build"
(cd "$here" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error && go build -o "$work/peer" .)
if [ ! -x /tmp/peerbin/stripesim ] || [ ! -x /tmp/peerbin/modelsim ]; then
	(cd "$main" && go build -o /tmp/peerbin/ ./testbed/cmd/stripesim ./testbed/cmd/modelsim)
fi

echo "== PostgreSQL, stripesim, modelsim, restate-server"
pg_port=$(freeport)
mkdir -p "$work/pg" && chown postgres "$work/pg"
su postgres -c "$pgbin/initdb -D $work/pg -U postgres --auth=trust" >/dev/null
su postgres -c "$pgbin/pg_ctl -D $work/pg -o '-p $pg_port -k /tmp -c listen_addresses=127.0.0.1' -l $work/pg/log -w start" >/dev/null
psql -h 127.0.0.1 -p "$pg_port" -U postgres -qc 'CREATE DATABASE peer'
pg_url="postgres://postgres@127.0.0.1:$pg_port/peer?sslmode=disable"

stripe_port=$(freeport) model_port=$(freeport)
/tmp/peerbin/stripesim -addr "127.0.0.1:$stripe_port" -db "$work/stripe.db" >"$work/stripesim.log" 2>&1 &
pids+=($!)
/tmp/peerbin/modelsim -addr "127.0.0.1:$model_port" >"$work/modelsim.log" 2>&1 &
pids+=($!)

ingress_port=$(freeport) admin_port=$(freeport) node_port=$(freeport)
t0=$(now)
RESTATE_DATA_DIR=$work/restate RESTATE_INGRESS_PORT=$ingress_port RESTATE_ADMIN_PORT=$admin_port \
	RESTATE_NODE_PORT=$node_port "$here/server.sh" >"$work/restate.log" 2>&1 &
pids+=($!)
waitfor "http://127.0.0.1:$admin_port/health" 60
waitfor "http://127.0.0.1:$ingress_port/restate/health" 60
echo "restate-server up in $(since "$t0")s"

peer_port=$(freeport)
peer="http://127.0.0.1:$peer_port"
stripe="http://127.0.0.1:$stripe_port"
mkdir -p "$work/mail"
start_peer() { # [PEER_CRASH value]
	PEER_ADDR=127.0.0.1:$peer_port RESTATE_SERVICE_ADDR=127.0.0.1:$(($peer_port + 1)) PG_URL=$pg_url \
		MODEL_BASE_URL=http://127.0.0.1:$model_port/v1 MODEL_API_KEY=sim \
		STRIPE_API_BASE=$stripe STRIPE_SECRET_KEY=sk_test_local \
		MAIL_SPOOL=$work/mail AUTO_APPROVE_LIMIT_MINOR=100000 APPROVAL_TIMEOUT=24h \
		PEER_CRASH=${1:-} PEER_CRASH_STATE=$work/crash-state \
		RESTATE_INGRESS_URL=http://127.0.0.1:$ingress_port RESTATE_ADMIN_URL=http://127.0.0.1:$admin_port \
		"$work/peer" >>"$work/peer.log" 2>&1 &
	peer_pid=$!
}
stop_peer() { kill "$peer_pid" && wait "$peer_pid" || true; peer_pid=; }

submit() { # id amount
	curl -sf -o /dev/null -X POST "$peer/claims" -H 'content-type: application/json' -d "{
		\"claim_id\":\"$1\",\"policy_id\":\"pol-1001\",
		\"claimant\":{\"name\":\"Ada Lovelace\",\"email\":\"ada@example.com\",\"stripe_account\":\"acct_1Ada\"},
		\"amount_minor\":$2,\"currency\":\"usd\",\"description\":\"Burst pipe flooded the kitchen\"}"
}
status() { curl -sf "$peer/claims/$1" | jq -r .status; }
waitstatus() { # id status seconds
	local i s
	for i in $(seq 1 $(($3 * 20))); do
		s=$(status "$1" || true)
		[ "$s" = "$2" ] && return 0
		sleep 0.05
	done
	echo "$1: status $s, want $2" >&2; return 1
}
transfers() { curl -sf -u sk_test_local: "$stripe/v1/transfers?transfer_group=$1&limit=100" | jq '.data | length'; }
modelcalls() { curl -sf "http://127.0.0.1:$model_port/_sim/calls" | jq --arg id "$1" '[.[] | select(.claim_id == $id)] | length'; }
mails() { ls "$work/mail" | grep -c "^$1\." || true; }
fail=0
check() { # id: paid, 1 transfer, 2 model calls, 1 mail
	local t m e line
	t=$(transfers "$1") m=$(modelcalls "$1") e=$(mails "$1")
	line="$1: $(curl -sf "$peer/claims/$1" | jq -c .) transfers=$t model_calls=$m mails=$e"
	if [ "$t" = 1 ] && [ "$m" = 2 ] && [ "$e" = 1 ]; then echo "ok   $line"; else echo "FAIL $line"; fail=1; fi
}

echo "== peer"
t0=$(now)
start_peer
waitfor "$peer/healthz" 30
echo "peer healthy in $(since "$t0")s"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$peer/claims/nope")" = 404 ] || { echo "FAIL unknown claim is not 404"; fail=1; }

echo "== 1. three claims below the limit"
for i in 1 2 3; do submit "clm-small-$i" 50000; done
submit clm-small-1 50000 # a second submit of the same claim is a no-op
for i in 1 2 3; do t0=$(now); waitstatus "clm-small-$i" paid 30; check "clm-small-$i"; done

echo "== 2. one above the limit, approved"
submit clm-big 200000
waitstatus clm-big waiting 30
echo "clm-big: waiting"
curl -sf -o /dev/null -X POST "$peer/claims/clm-big/approve" -H 'content-type: application/json' -d '{"approver":"adjuster-17"}'
waitstatus clm-big paid 30
check clm-big

for point in after-pay in-notify; do
	echo "== 3. PEER_CRASH=$point"
	id=clm-crash-$point
	stop_peer
	start_peer "$point"
	waitfor "$peer/healthz" 30
	t0=$(now)
	submit "$id" 50000
	{ wait "$peer_pid"; } 2>/dev/null && rc=0 || rc=$?
	echo "$id: peer died after $(since "$t0")s (exit $rc, $( [ $rc = 137 ] && echo SIGKILL || echo '?'))"
	peer_pid=
	grep -qx "$id" "$work/crash-state" || { echo "FAIL $id not in PEER_CRASH_STATE"; fail=1; }
	t0=$(now)
	start_peer "$point"
	waitfor "$peer/healthz" 30
	healthy=$(since "$t0")
	waitstatus "$id" paid 60
	echo "$id: restart -> healthy ${healthy}s, -> paid $(since "$t0")s;" \
		"the server logged $(grep -c "target: ClaimWorkflow/$id/run" "$work/restate.log") failed attempts"
	check "$id"
	grep -h "pay $id: " "$work/peer.log" || true
done

echo "== PostgreSQL: close and audit"
psql -h 127.0.0.1 -p "$pg_port" -U postgres -d peer -Atc \
	"SELECT c.claim_id, c.status, c.payout_minor, c.transfer_id <> '', a.outcome FROM claims c JOIN audit a USING (claim_id) ORDER BY 1"
rows=$(psql -h 127.0.0.1 -p "$pg_port" -U postgres -d peer -Atc "SELECT count(*) FROM claims c JOIN audit a USING (claim_id) WHERE c.status = 'paid'")
[ "$rows" = 6 ] || { echo "FAIL $rows paid claims with close+audit rows, want 6"; fail=1; }

if [ "$fail" = 0 ]; then echo "SMOKE OK"; else echo "SMOKE FAILED (logs in $work)"; KEEP=1; exit 1; fi
