# One image for every durableclaims binary; docker-compose.yml picks the
# command per service (worker, stripesim, starter, claimsctl).
#
# Build:  docker build -t durableclaims:local .
# Needs BuildKit (the default builder since Docker 23) for the cache mounts.

# Exact patch tag (not 1.26 / latest) so rebuilds are reproducible. It must be
# at least the `go` line of go.mod: GOTOOLCHAIN=local makes a newer go.mod fail
# loudly here instead of silently downloading another toolchain.
FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm AS build

ARG TARGETOS
ARG TARGETARCH
ENV CGO_ENABLED=0 \
    GOTOOLCHAIN=local \
    GOFLAGS=-mod=readonly

WORKDIR /src

# Module downloads are cached across builds and only redone when go.mod or
# go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download

COPY . .

# modernc.org/sqlite is pure Go, so CGO_ENABLED=0 still gives working SQLite
# and fully static binaries that run on distroless/static.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    export GOOS="${TARGETOS:-linux}" GOARCH="${TARGETARCH:-amd64}" && \
    go build -trimpath -ldflags="-s -w" -o /out/worker ./worker && \
    go build -trimpath -ldflags="-s -w" -o /out/starter ./starter && \
    go build -trimpath -ldflags="-s -w" -o /out/claimsctl ./claimsctl && \
    go build -trimpath -ldflags="-s -w" -o /out/inbox ./inbox && \
    go build -trimpath -ldflags="-s -w" -o /out/stripesim ./testbed/cmd/stripesim && \
    go build -trimpath -ldflags="-s -w" -o /out/modelsim ./testbed/cmd/modelsim && \
    go build -trimpath -ldflags="-s -w" -o /out/codec-server ./codecserver && \
    go build -trimpath -ldflags="-s -w" -o /out/httpcheck ./deploy/httpcheck

# Data directory skeleton, owned by the distroless "nonroot" user (65532).
# Docker copies it (with ownership) into an empty named volume mounted there,
# so the SQLite files and the mail spool are writable without running as root.
RUN mkdir -p /rootfs/var/lib/durableclaims/mail

FROM gcr.io/distroless/static-debian12:nonroot

COPY --from=build /out/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /rootfs/var/lib/ /var/lib/

ENV CLAIMS_DB=/var/lib/durableclaims/claims.db \
    MAIL_SPOOL=/var/lib/durableclaims/mail \
    STRIPESIM_DB=/var/lib/durableclaims/stripesim.db

WORKDIR /var/lib/durableclaims
USER 65532:65532
EXPOSE 12111

# The worker drains in-flight activities on SIGTERM (Docker's default stop
# signal); it runs as PID 1 directly, with no shell in between to eat it.
CMD ["/usr/local/bin/worker"]
