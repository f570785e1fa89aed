# syntax=docker/dockerfile:1
# The capmox-rs manager image: the release binary (`make release-binary` builds the same) on
# distroless cc (glibc and libgcc, no shell), run as UID 65532 from /manager like capmox's image,
# so capmox's Deployment runs it unchanged. Build: make docker-build IMG=... RELEASE_VERSION=...
ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Every workspace member: cargo resolves the whole workspace even for one binary.
COPY Cargo.toml Cargo.lock rustfmt.toml clippy.toml ./
COPY api api
COPY src src
COPY pve-sim pve-sim
COPY testenv testenv
COPY standins standins
COPY demo demo
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin capmox \
 && cp target/release/capmox /manager

FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="capmox-rs" \
      org.opencontainers.image.description="Cluster API infrastructure provider for Proxmox VE (capmox-compatible), written in Rust" \
      org.opencontainers.image.source="https://github.com/capmox-rs/capmox-rs" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
