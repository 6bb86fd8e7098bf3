# durableclaims — `make demo` runs the story end to end, `make test` runs every test.
SHELL := /bin/bash
GO ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
TEMPORAL_CLI_VERSION := v1.5.1
# The Temporal CLI (with its dev server): on PATH, or built into GOPATH/bin.
TEMPORAL ?= $(shell command -v temporal 2>/dev/null || echo $(GOBIN)/temporal)
export TEMPORAL

BINARIES := worker starter claimsctl inbox stripesim modelsim

.PHONY: all build jaeger toxiproxy soak-faults demo test unit vet lint mutate fuzz bench histories soak soak-cluster rollout peers peers-install temporal-cli temporal-server s3-server prereqs test-prereqs cluster clean

all: build

build:
	@mkdir -p bin
	$(GO) build -o bin/ ./worker ./starter ./claimsctl ./inbox ./testbed/cmd/stripesim ./testbed/cmd/modelsim ./testbed/cmd/bench ./testbed/cmd/cluster
	$(GO) build -o bin/codec-server ./codecserver

temporal-cli:
	@if [ ! -x "$(TEMPORAL)" ]; then \
		echo "Installing the Temporal CLI $(TEMPORAL_CLI_VERSION) from the Go module proxy (about 5 minutes, once)..."; \
		$(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION); \
	fi

# The trace viewer of the local stack: Jaeger all-in-one, in memory, built
# from the Go module proxy as a tool of its own module (tools/jaeger pins
# v1.75.0), so its dependencies never move the product's. About 5 minutes
# the first time; deploy/jaeger/local.yaml is its configuration. Its
# module has no UI assets, so it serves the query API and a placeholder
# page; the inbox draws a claim's trace from that API.
jaeger: bin/jaeger
bin/jaeger: tools/jaeger/go.mod tools/jaeger/go.sum
	@mkdir -p bin
	@echo "Building Jaeger all-in-one from the Go module proxy (about 5 minutes, once)..."
	$(GO) build -C tools/jaeger -o $(CURDIR)/bin/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

# toxiproxy v2.12.0, the network-fault proxy of the fault soak and the
# partition tests (testbed/netfault), built into bin/toxiproxy-server from
# the Go module proxy as a tool of its own module (tools/toxiproxy pins it;
# about 20 s the first time).
toxiproxy: bin/toxiproxy-server
bin/toxiproxy-server: tools/toxiproxy/go.mod tools/toxiproxy/go.sum
	@mkdir -p bin
	$(GO) build -C tools/toxiproxy -o $(CURDIR)/bin/toxiproxy-server github.com/Shopify/toxiproxy/v2/cmd/server

# A real Temporal server (not the dev server) and its SQL schema tool, at the
# version the CLI embeds, for `make cluster`, testbed/cluster's tests, the
# soak and the benchmark. Both are built from temporalserver/ (its own
# module, pinned to go.temporal.io/server $(TEMPORAL_SERVER_VERSION) and to
# the very versions of every module the CLI $(TEMPORAL_CLI_VERSION) builds the
# same server with, so that after `make temporal-cli` the server's packages
# come from Go's build cache), the server with durableclaims' authorizer,
# the SQL tool as Temporal ships it (a tool of that module). They go into
# their own directory, not GOPATH/bin, where testbed/cluster looks (or at
# TEMPORAL_SERVER_BIN / TEMPORAL_SQL_TOOL).
TEMPORAL_SERVER_VERSION := v1.29.1
TEMPORAL_SERVER_DIR := $(shell $(GO) env GOPATH)/temporal-server-$(TEMPORAL_SERVER_VERSION)
temporal-server:
	@if [ ! -x "$(TEMPORAL_SERVER_DIR)/sql" ]; then \
		echo "Building the Temporal SQL tool $(TEMPORAL_SERVER_VERSION) into $(TEMPORAL_SERVER_DIR)..."; \
		$(GO) build -C temporalserver -o "$(TEMPORAL_SERVER_DIR)/sql" go.temporal.io/server/cmd/tools/sql; \
	fi
	@echo "Building the Temporal server $(TEMPORAL_SERVER_VERSION) with durableclaims' authorizer (temporalserver/)..."
	$(GO) build -C temporalserver -o "$(TEMPORAL_SERVER_DIR)/durableclaims-server" .

# A real S3 server with versioning and Object Lock, for the tests of stored
# claim files (testenv.S3): versitygw, an S3 gateway over a directory, into
# its own directory (testenv looks there, or at VERSITYGW_BIN). About 3
# minutes, once.
VERSITYGW_VERSION := v1.8.0
VERSITYGW_DIR := $(shell $(GO) env GOPATH)/versitygw-$(VERSITYGW_VERSION)
s3-server:
	@if [ ! -x "$(VERSITYGW_DIR)/versitygw" ]; then \
		echo "Installing the S3 server versitygw $(VERSITYGW_VERSION) into $(VERSITYGW_DIR) (about 3 minutes, once)..."; \
		GOBIN="$(VERSITYGW_DIR)" $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION); \
	fi

# PostgreSQL and a real Temporal server on it, in var/cluster, until Ctrl-C;
# prints TEMPORAL_ADDRESS and CLAIMS_DB for workers.
cluster: temporal-cli temporal-server
	@mkdir -p bin
	$(GO) build -o bin/ ./testbed/cmd/cluster
	bin/cluster $(CLUSTER_FLAGS)

# MODEL_PROVIDER=openai runs the same story through the OpenAI-compatible
# provider, against modelsim unless MODEL_BASE_URL points elsewhere. Every
# program sends its spans to Jaeger all-in-one beside the dev server; the
# demo prints the link to claim-0043's trace.
demo: temporal-cli jaeger build
	./scripts/demo.sh

# Throughput, latency, history size, memory and crash recovery against bare
# Temporal in one run (about 25 minutes; BENCH_FLAGS="-n 100 -reps 1 -parked 1000" for a quick look).
bench: temporal-cli temporal-server jaeger build
	bin/bench -worker bin/worker -temporal "$(TEMPORAL)" -json var/bench/latest.json $(BENCH_FLAGS)

# The same claim on DBOS, Restate and LangGraph beside durableclaims, in one
# run (testbed/peers, docs/performance.md): peers-install builds each peer
# from the Go module proxy and npm, pinned (about 3 minutes, once); the
# workload takes about 15 minutes (PEERS_FLAGS="-peers-claims 10
# -peers-approvals 3 -peers-parked 20 -peers-crash-claims 10" is CI's short form).
PEERS_DIR := testbed/peers
peers-install:
	cd $(PEERS_DIR)/killpoint && $(GO) test -count=1 .
	cd $(PEERS_DIR)/seed && $(GO) test -count=1 .
	cd $(PEERS_DIR)/dbos && $(GO) build -o peer-dbos .
	cd $(PEERS_DIR)/temporal && $(GO) test -count=1 . && $(GO) build -o peer-temporal .
	cd $(PEERS_DIR)/restate && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error && $(GO) build -o restate-peer .
	cd $(PEERS_DIR)/langgraph && npm ci --no-audit --no-fund --loglevel=error

peers: temporal-cli temporal-server build peers-install
	@mkdir -p var/bench
	bin/bench -worker bin/worker -temporal "$(TEMPORAL)" -only peers -peers-dir $(PEERS_DIR) -json var/bench/peers.json $(PEERS_FLAGS)

# Chaos soak: 500 claims while workers are SIGKILLed every 1-3 s and the dev
# server restarts once, then every claim checked against the payment provider
# and the claims store (about 6 minutes; SOAK_FLAGS="-claims 40" for a quick look).
soak: temporal-cli temporal-server build
	$(GO) build -o bin/ ./testbed/cmd/soak
	bin/soak -worker bin/worker -temporal "$(TEMPORAL)" $(SOAK_FLAGS)

# The same soak past one machine: a real Temporal server on PostgreSQL, the
# claims store on the same PostgreSQL, three workers (one SIGKILLed every
# 1-3 s), PostgreSQL crashed once and the Temporal server restarted once
# (about 6 minutes; SOAK_FLAGS="-claims 100" for the short run CI makes).
soak-cluster: temporal-cli temporal-server build
	$(GO) build -o bin/ ./testbed/cmd/soak
	bin/soak -cluster -workers 3 -worker bin/worker -temporal "$(TEMPORAL)" -json var/soak/cluster.json $(SOAK_FLAGS)

# Faults between the parts (docs/reliability.md, "Network faults"): 500
# claims on a real Temporal server on PostgreSQL, three workers, every
# connection a worker makes (the frontend, PostgreSQL, Stripe, the model,
# the S3 blob store) through toxiproxy and broken on a seeded schedule it
# prints first: latency, bandwidth limits, resets, half-open connections,
# a 60 s partition of one worker from the frontend while it holds tasks and
# of one from PostgreSQL, Stripe answering after the worker gave up; then
# every claim checked (about 6 minutes; SOAK_FLAGS="-claims 100 -partition
# 20s" for the short run CI makes).
soak-faults: temporal-cli temporal-server s3-server toxiproxy build
	$(GO) build -o bin/ ./testbed/cmd/soak
	bin/soak -faults -workers 3 -worker bin/worker -temporal "$(TEMPORAL)" -json var/soak/faults.json $(SOAK_FLAGS)

# Rehearse a deploy on a real Temporal server on PostgreSQL, under SIGKILLs
# (docs/operations.md, "Rehearsing a rollout"): v1 workers, v2 beside them
# replay-checked, ramped and made current, v1 drained, a bad v3 refused by
# the replay check, ramped anyway, rolled back and its runs reset; every
# claim then checked as the soak checks it (about 4 minutes;
# ROLLOUT_FLAGS="-claims 60" for the short run CI makes).
rollout: temporal-cli temporal-server build
	$(GO) build -o bin/ ./testbed/cmd/soak
	bin/soak -rollout -claims 200 -workers 2 -json var/soak/rollout.json $(ROLLOUT_FLAGS)

# Record one history per workflow path for the replay tests (docs/reliability.md, "Changing workflow code").
histories: temporal-cli build
	./scripts/record-histories.sh

# Determinism of workflow code and general static checks, pinned.
WORKFLOWCHECK_VERSION := v0.6.0
STATICCHECK_VERSION := v0.8.2
lint:
	@test -x $(GOBIN)/workflowcheck || $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GOBIN)/workflowcheck -config workflowcheck.config.yaml ./...
	$(GOBIN)/staticcheck ./...
	cd temporalserver && $(GOBIN)/staticcheck ./...

# Mutation testing of the packages that hold the guarantees, one mutant at a
# time, with gremlins, pinned (scripts/mutate.sh; how long each package
# takes and what lives: docs/reliability.md, "Mutation testing"). Not in
# make test or CI. Reports in var/mutate/, the score of each package
# printed; MUTATE_PKGS="approvals" for one package.
GREMLINS_VERSION := v0.6.0
MUTATE_PKGS ?= internal/authority internal/decision internal/review internal/statute internal/letters internal/audit approvals internal/claimfile internal/store activities workflows
mutate:
	@test -x $(GOBIN)/gremlins || $(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	GREMLINS=$(GOBIN)/gremlins MUTATE_PKGS="$(MUTATE_PKGS)" ./scripts/mutate.sh

# A short run of every fuzz target. Budgets are execution counts, not
# durations: with a duration, Go 1.26's fuzz coordinator can report
# "context deadline exceeded" as a failure at the end of the window on a
# loaded machine (go.dev/issue/75804, fixed in Go 1.27); a count has no
# deadline to race. The slowest target here (FuzzSignalPayload) runs about
# 3,500 inputs a second, the others 15,000-25,000.
FUZZTIME ?= 100000x
fuzz:
	@for t in $$(grep -rhoE '^func (Fuzz[A-Za-z]+)' --include='*_test.go' . | sed 's/func //' | sort -u); do \
		pkg=$$(grep -rlE "^func $$t\(" --include='*_test.go' . | xargs -n1 dirname | head -1); \
		echo "fuzz $$t in $$pkg"; \
		$(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	done

vet:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) -C temporalserver vet ./...

# Chromium and PostgreSQL from Debian, for make test (apt-get, as root).
prereqs:
	./scripts/prereqs.sh --install

test-prereqs:
	@./scripts/prereqs.sh --if-root

# Each package's tests run under a deadline that fits it (go test -timeout
# holds each package's test binary to it), so a test that hangs fails in
# minutes, with every goroutine's stack, instead of holding the run for go
# test's ten minutes or longer. Measured here (2 cores shared, -race): every
# package not named below under 30 s; those that start a database or a
# server, or compile the worker, 17-45 s (testbed/rollout about 4 minutes
# when its worker builds compile on a cold cache: a cold worker build took
# 3 min 25 s); e2e 7 min 40 s, with its four binaries built.
TEST_TIMEOUT ?= 3m
TEST_SERVERS := internal/store deploy testbed/cluster testbed/rollout
TEST_SERVERS_TIMEOUT ?= 6m
TEST_E2E_TIMEOUT ?= 20m
# Every package but e2e and TEST_SERVERS, for the shell.
TEST_QUICK = $$($(GO) list ./... | grep -v -e '/e2e$$' $(foreach p,$(TEST_SERVERS),-e '/$(p)$$'))

# Integration tests start their own dev server from $(TEMPORAL) on free ports.
# The fuzz targets' seed corpora run with the tests; a short fuzzing run of
# each follows. First, Chromium and PostgreSQL: installed when missing if
# run as root; otherwise it stops at once and prints the command to run.
test: test-prereqs temporal-cli temporal-server s3-server jaeger toxiproxy vet
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(TEST_QUICK)
	$(GO) test -race -count=1 -timeout $(TEST_SERVERS_TIMEOUT) $(addprefix ./,$(TEST_SERVERS))
	$(GO) test -race -count=1 -timeout $(TEST_E2E_TIMEOUT) ./e2e
	$(GO) -C temporalserver test -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

TEST_FUZZTIME ?= 20000x

# The quick loop: unit, workflow and replay tests, and every other test that
# starts no server, database, S3 store or browser. Left out: the end-to-end
# package (dev server, binaries, Chromium), testbed/cluster and
# testbed/rollout (a Temporal server on PostgreSQL), the store suite's
# PostgreSQL half, and the files built with //go:build !unit
# (deploy/archival_test.go: a Temporal server on PostgreSQL). Under
# UNIT_STARTS_NOTHING=1 the rig's helpers refuse to start a server, so a
# test that would start one fails here at once (testbed/unitguard). Its
# time is in the README; `make test` stays the full suite.
UNIT_ENV := UNIT_STARTS_NOTHING=1 STORE_SUITE_BACKENDS=sqlite
unit: vet
	$(UNIT_ENV) $(GO) test -tags unit -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v -e '/e2e$$' -e '/testbed/cluster$$' -e '/testbed/rollout$$')
	$(UNIT_ENV) $(GO) -C temporalserver test -tags unit -count=1 -timeout $(TEST_TIMEOUT) ./...

clean:
	rm -rf bin var
