#!/usr/bin/env bash
# The Debian packages `make test` drives for real: Chromium (the inbox's
# browser test) and PostgreSQL (the store suite, the cluster tests). Checks
# for them (PG_BINDIR may name another initdb's directory) and installs what
# is missing with apt-get: with --install, or with --if-root when run as
# root. Otherwise it names the one command that installs them, and fails.
set -euo pipefail

need=()
command -v chromium >/dev/null || need+=(chromium)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || [ -x "${PG_BINDIR:-/nonexistent}/initdb" ] || need+=(postgresql)
[ ${#need[@]} -eq 0 ] && exit 0

mode=${1:-}
if [ "$mode" = --if-root ] && [ "$(id -u)" -eq 0 ]; then mode=--install; fi
if [ "$mode" != --install ]; then
  echo "make test needs Debian's ${need[*]} (the browser test and the PostgreSQL store suite). Install them (about 2 minutes, once):" >&2
  echo "  sudo ./scripts/prereqs.sh --install" >&2
  exit 1
fi
echo "Installing ${need[*]} from Debian (about 2 minutes, once)..."
# A stale mirror index is refreshed first; Debian 12 pins the versions.
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" fonts-dejavu-core
