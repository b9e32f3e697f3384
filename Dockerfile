# syntax=docker/dockerfile:1
#
# The shadowtune image: one static binary, shadowtune, as the entrypoint. The
# Helm chart (charts/shadowtune) runs it as `shadowtune operator ...` (a
# Deployment, as the image's non-root user) and `shadowtune agent ...` (a
# DaemonSet, whose pod spec overrides the user to root and runs privileged).
#
#   docker buildx build -t ghcr.io/shadowtune/shadowtune:0.1.0 \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse --short HEAD) .
#
# This cannot be built on the project's development machine (no container
# daemon, no registry beyond the Go module proxy); a later step builds an
# equivalent image tarball without a daemon. Keep the two in step: the binary
# at /usr/local/bin/shadowtune, built as `make build` builds it (the same
# flags as the Makefile's LDFLAGS), on distroless static, user 65532.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS builder
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
# Modules first, so source changes reuse the downloaded module cache layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# The eBPF objects (agent/tracer/*.o) are committed and embedded: no clang.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath \
      -ldflags "-s -w -X github.com/shadowtune/shadowtune/internal/version.Version=${VERSION} -X github.com/shadowtune/shadowtune/internal/version.Commit=${COMMIT}" \
      -o /out/shadowtune ./cmd/shadowtune

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="shadowtune" \
      org.opencontainers.image.description="Tunes each node's block-storage stack by shadow simulation" \
      org.opencontainers.image.source="https://github.com/shadowtune/shadowtune" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=builder /out/shadowtune /usr/local/bin/shadowtune
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/shadowtune"]
