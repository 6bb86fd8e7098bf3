#!/usr/bin/env bash
# Mutation testing of the packages that hold the guarantees (make mutate;
# docs/reliability.md, "Mutation testing"). For each package gremlins changes
# one operator at a time in the package's code (a comparison negated or moved
# across its boundary, && swapped for ||, + for -) and runs that package's own
# tests; a mutant no test notices lives. A living mutant in a guarantee's
# condition is a guarantee without a test of its own.
#
#   scripts/mutate.sh [pkg ...]     default: every package in MUTATE_PKGS
#
# One package after another, one mutant at a time (MUTATE_WORKERS, 1), so it
# runs beside other work on a small machine. Each package leaves
# var/mutate/<name>.json (gremlins' report: every mutant with its file, line
# and status) and var/mutate/<name>.txt (its log); the score of each is
# printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

GREMLINS=${GREMLINS:-$(go env GOPATH)/bin/gremlins}
WORKERS=${MUTATE_WORKERS:-1}
# A mutant's tests may take this many times the package's unmutated run
# before gremlins calls it timed out; the unmutated run is measured on an
# idle-ish cache, a mutant rebuilds its package, and the machine is shared.
COEFFICIENT=${MUTATE_TIMEOUT_COEFFICIENT:-5}
PKGS=("$@")
[ ${#PKGS[@]} -gt 0 ] || read -r -a PKGS <<<"${MUTATE_PKGS:?}"

# -count=1: the unmutated run, whose time sets every mutant's deadline, is a
# real run, never a cached result. -trimpath: gremlins tests mutants in a copy
# of the module, and without it every package of the copy would be compiled
# again (a package's directory is part of its build cache key).
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-count=1 -trimpath"
# The store suite's SQLite half: the PostgreSQL half runs the same tests on
# another dialect at five times the cost per mutant.
export STORE_SUITE_BACKENDS=${STORE_SUITE_BACKENDS:-sqlite}

# Files left out of a package whose whole run takes more than about 40
# minutes here, each listed with why in docs/reliability.md ("Mutation
# testing"); MUTATE_ALL_FILES=1 runs every file.
exclude() {
  [ -z "${MUTATE_ALL_FILES:-}" ] || return 0
  case $1 in
  workflows) echo '^(build|law|names|progress|reconcile|versions)\.go$' ;;
  esac
}

# Gremlins runs only the mutants inside Go's coverage blocks, which leave
# out a switch's case expressions; casecover (testbed/cmd/casecover) adds
# them to the profile of gremlins' coverage run, through a `go` first on
# gremlins' PATH that hands every other command to the real one unchanged.
shim=$(mktemp -d)
trap 'rm -rf "$shim"' EXIT
go build -o "$shim/casecover" ./testbed/cmd/casecover
realgo=$(command -v go)
cat >"$shim/go" <<SHIM
#!/usr/bin/env bash
case " \$* " in *" -coverprofile "*) ;; *) exec "$realgo" "\$@" ;; esac
"$realgo" "\$@" || exit
prev=
for a; do [ "\$prev" != -coverprofile ] || exec "$shim/casecover" "\$a"; prev=\$a; done
SHIM
chmod +x "$shim/go"

mkdir -p var/mutate
summary=()
for pkg in "${PKGS[@]}"; do
  name=$(basename "$pkg")
  flags=(--workers "$WORKERS" --timeout-coefficient "$COEFFICIENT" --invert-logical -o "var/mutate/$name.json")
  ex=$(exclude "$name")
  [ -z "$ex" ] || flags+=(-E "$ex")
  echo "mutate $pkg ($(date -u +%H:%M:%S))"
  start=$SECONDS
  PATH="$shim:$PATH" "$GREMLINS" unleash "${flags[@]}" "$PWD/$pkg" >"var/mutate/$name.txt" 2>&1 ||
    { tail -20 "var/mutate/$name.txt" >&2; exit 1; }
  took=$((SECONDS - start))
  grep -E '^ +LIVED|TIMED OUT' "var/mutate/$name.txt" | sed "s|^ *|  $pkg: |" || true
  killed=$(sed -n 's/^Killed: \([0-9]*\), Lived: \([0-9]*\), Not covered: \([0-9]*\).*/\1 \2 \3/p' "var/mutate/$name.txt")
  efficacy=$(sed -n 's/^Test efficacy: //p' "var/mutate/$name.txt")
  read -r k l n <<<"${killed:-0 0 0}"
  summary+=("$(printf '%-20s killed %4s  lived %3s  not covered %3s  score %7s  %dm%02ds' "$pkg" "$k" "$l" "$n" "${efficacy:-n/a}" $((took / 60)) $((took % 60)))")
done
echo
printf '%s\n' "${summary[@]}"
