#!/usr/bin/env bash
# Starts the Restate server (npm @restatedev/restate-server 1.7.12, pinned in
# package-lock.json; `npm ci --ignore-scripts` in this folder installs it) in the
# foreground, for the driver to run in the background and stop with SIGTERM (its pid is
# this script's: exec). --ignore-scripts skips @scarf/scarf's install-time analytics
# ping, a dependency of the wrapper package; the binary needs no install script.
#
#   RESTATE_DATA_DIR      its data (journal, state, metadata): a fresh directory per run
#   RESTATE_INGRESS_PORT  ingress (RESTATE_INGRESS_URL=http://127.0.0.1:$RESTATE_INGRESS_PORT)
#   RESTATE_ADMIN_PORT    admin API (RESTATE_ADMIN_URL=http://127.0.0.1:$RESTATE_ADMIN_PORT)
#   RESTATE_NODE_PORT     node-to-node (message fabric, metadata server)
#
# Everything binds to 127.0.0.1 over TCP only (no unix sockets), with telemetry and the
# web UI off. Settings are the server's own environment variables (RESTATE_ + the config
# key, "__" between sections; see `restate-server --dump-config` for the effective file).
# The invocation retry policy, which decides how soon a killed worker is retried, is not
# set here: the workflow declares its own (WithInvocationRetryPolicy in claim.go). To
# set it server-wide instead: RESTATE_DEFAULT_RETRY_POLICY__INITIAL_INTERVAL=50ms,
# RESTATE_DEFAULT_RETRY_POLICY__MAX_INTERVAL=500ms.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server
[ -x "$bin" ] || { echo "server.sh: $bin missing: run 'npm ci --ignore-scripts' in $here" >&2; exit 1; }
: "${RESTATE_DATA_DIR:?a data directory}" "${RESTATE_INGRESS_PORT:?}" "${RESTATE_ADMIN_PORT:?}" "${RESTATE_NODE_PORT:?}"
mkdir -p "$RESTATE_DATA_DIR"

export RESTATE_INGRESS__BIND_ADDRESS=127.0.0.1:$RESTATE_INGRESS_PORT
export RESTATE_ADMIN__BIND_ADDRESS=127.0.0.1:$RESTATE_ADMIN_PORT
export RESTATE_BIND_ADDRESS=127.0.0.1:$RESTATE_NODE_PORT
export RESTATE_ADVERTISED_ADDRESS=http://127.0.0.1:$RESTATE_NODE_PORT/
export RESTATE_DISABLE_TELEMETRY=true
export RESTATE_ADMIN__DISABLE_WEB_UI=true
export RESTATE_LOG_DISABLE_ANSI_CODES=true
exec "$bin" --no-logo \
  --base-dir "$RESTATE_DATA_DIR" \
  --node-name peer \
  --cluster-name durableclaims-peer \
  --listen-mode tcp
