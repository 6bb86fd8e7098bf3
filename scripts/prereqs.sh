#!/usr/bin/env bash
# The Debian packages `make test` drives for real: Chromium (the inbox's
# browser test) and PostgreSQL (the store suite, the cluster tests). Checks
# for them; with --install, installs what is missing (apt-get, as root);
# without, names what is missing and how to get it, and fails.
set -euo pipefail

need=()
command -v chromium >/dev/null || need+=(chromium)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || [ -x "${PG_BINDIR:-/nonexistent}/initdb" ] || need+=(postgresql)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "${1:-}" != --install ]; then
  echo "make test needs Debian's ${need[*]} (the browser test and the PostgreSQL store suite start them)." >&2
  echo "Install them with \`make prereqs\` (apt-get install ${need[*]} fonts-dejavu-core, as root; about 2 minutes)," >&2
  echo "or point PG_BINDIR at an initdb and put a chromium on PATH. \`make unit\` needs neither." >&2
  exit 1
fi
echo "Installing ${need[*]} from Debian (about 2 minutes, once)..."
# A stale mirror index is refreshed first; Debian 12 pins the versions.
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" fonts-dejavu-core
