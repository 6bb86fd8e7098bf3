# durableclaims — `make demo` runs the story end to end, `make test` runs every test.
SHELL := /bin/bash
GO ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
TEMPORAL_CLI_VERSION := v1.5.1
# The Temporal CLI (with its dev server): on PATH, or built into GOPATH/bin.
TEMPORAL ?= $(shell command -v temporal 2>/dev/null || echo $(GOBIN)/temporal)
export TEMPORAL

BINARIES := worker starter claimsctl stripesim

.PHONY: all build demo test vet bench temporal-cli clean

all: build

build:
	@mkdir -p bin
	$(GO) build -o bin/ ./worker ./starter ./claimsctl ./stripesim/cmd/stripesim ./bench

temporal-cli:
	@if [ ! -x "$(TEMPORAL)" ]; then \
		echo "Installing the Temporal CLI $(TEMPORAL_CLI_VERSION) from the Go module proxy (about 5 minutes, once)..."; \
		$(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION); \
	fi

demo: temporal-cli build
	./scripts/demo.sh

# Throughput, latency, history size, memory and crash recovery against bare
# Temporal in one run (about 10 minutes; BENCH_FLAGS="-n 100 -reps 1 -parked 1000" for a quick look).
bench: temporal-cli build
	bin/bench -worker bin/worker -temporal "$(TEMPORAL)" -json var/bench/latest.json $(BENCH_FLAGS)

vet:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

# Integration tests start their own dev server from $(TEMPORAL) on free ports.
test: temporal-cli vet
	$(GO) test -race -count=1 -timeout 30m ./...

clean:
	rm -rf bin var
