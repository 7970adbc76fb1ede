# syntax=docker/dockerfile:1
#
# One multi-stage build for the project's three images:
#
#   docker build --target extproc        -t mcp-extproc:dev .
#   docker build --target example-plugin -t mcp-extproc-example-plugin:dev .
#   docker build --target mcp-echo       -t mcp-echo:dev .
#
# (`make image` runs all three.) Each binary is built by hack/build.sh, the
# command the Makefile uses too; the images hold that static binary on
# distroless/static, run as the non-root user 65532, and have no shell.
#
# VERSION and REVISION are stamped into the binaries (extproc --version, the
# mcp_extproc_build_info metric) and into the OCI labels of the images. The
# build context has no .git, so they come from the command line; `make
# image` passes `git describe --tags --always --dirty` and `git rev-parse HEAD`:
#
#   docker build --build-arg VERSION=v0.1.0 --build-arg REVISION=$(git rev-parse HEAD) ...

ARG GO_VERSION=1.26.8
ARG VERSION=dev
ARG REVISION=unknown

# ---- build: sources and modules, shared by the per-binary stages ----------
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY hack/build.sh hack/build.sh
COPY cmd/ cmd/
COPY pkg/ pkg/
COPY internal/ internal/
# Set by BuildKit for the platform being built (cross-compiled, no emulation).
ARG TARGETOS
ARG TARGETARCH
ENV GOOS=${TARGETOS} GOARCH=${TARGETARCH}
# Read by hack/build.sh (after the module download, so a new commit does not
# download the modules again).
ARG VERSION
ARG REVISION
ENV VERSION=${VERSION} COMMIT=${REVISION}

FROM build AS build-extproc
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    sh hack/build.sh extproc /out

FROM build AS build-example-plugin
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    sh hack/build.sh example-plugin /out

FROM build AS build-mcp-echo
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    sh hack/build.sh mcp-echo /out

# ---- runtime images ---------------------------------------------------------

# mcp-extproc: ext_proc gRPC + grpc.health.v1 on 50052, admin HTTP
# (/healthz /readyz /metrics) on 9090.
FROM gcr.io/distroless/static-debian12:nonroot AS extproc
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="mcp-extproc" \
      org.opencontainers.image.description="Envoy ext_proc sidecar that runs external MCP plugins (ContextForge/cpex) on MCP traffic" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/mcp-extproc/mcp-extproc" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build-extproc /out/extproc /usr/local/bin/extproc
USER 65532:65532
EXPOSE 50052 9090
ENTRYPOINT ["/usr/local/bin/extproc"]

# The example cpex plugin: MCP (Streamable HTTP) on 8000, path /mcp; cpex gRPC
# on 50051 when started with --grpc-addr=:50051.
FROM gcr.io/distroless/static-debian12:nonroot AS example-plugin
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="mcp-extproc-example-plugin" \
      org.opencontainers.image.description="Example cpex plugin server of mcp-extproc (deny list, e-mail redaction)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/mcp-extproc/mcp-extproc" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build-example-plugin /out/example-plugin /usr/local/bin/example-plugin
USER 65532:65532
EXPOSE 8000 50051
ENTRYPOINT ["/usr/local/bin/example-plugin"]

# The demo MCP server: MCP (Streamable HTTP) on 3000, path /mcp.
FROM gcr.io/distroless/static-debian12:nonroot AS mcp-echo
ARG VERSION
ARG REVISION
LABEL org.opencontainers.image.title="mcp-echo" \
      org.opencontainers.image.description="Demo MCP server of mcp-extproc (echo tools)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/mcp-extproc/mcp-extproc" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build-mcp-echo /out/mcp-echo /usr/local/bin/mcp-echo
USER 65532:65532
EXPOSE 3000
ENTRYPOINT ["/usr/local/bin/mcp-echo"]
