# syntax=docker/dockerfile:1
#
# The `pilotage` server image: a Rust builder stage compiles the binary (and, through
# the build script of platform/bundled, the bundled Language components for wasm32-wasip2, embedded in
# it); the runtime stage is Debian slim with the binary, CA certificates and nothing
# else.
#
#   docker build -t pilotage .
#
# The image runs as an unprivileged numeric user and writes only to
# /var/lib/pilotage (PILOTAGE_DATA_DIR: the compiled-code cache, and the SQLite file
# when no PostgreSQL URL is given), so it works with a read-only root filesystem:
#
#   docker run --read-only -v pilotage-data:/var/lib/pilotage --tmpfs /tmp \
#     -p 8480:8480 -e PILOTAGE_DATABASE_URL=postgres://... \
#     -e PILOTAGE_SECRET_KEY=<64 hex digits> -e PILOTAGE_ADMIN_TOKEN=... \
#     -e PILOTAGE_JWT_ISSUERS=https://issuer/ -e PILOTAGE_JWT_JWKS_URLS=https://issuer/jwks.json \
#     pilotage
#
# The default command serves on all interfaces with JWT authentication: the
# development mode (`--auth dev`) is refused off loopback. `pilotage migrate` (same
# PILOTAGE_DATABASE_URL) applies the database migrations and exits.

FROM rust:1-bookworm AS builder
WORKDIR /src

# rust-toolchain.toml names the toolchain; install it and the Language components'
# target first, in a layer of their own that source changes do not invalidate.
# (rustup does not add a toolchain file's targets to a toolchain it already has.)
COPY rust-toolchain.toml ./
RUN rustup toolchain install stable --profile minimal \
    && rustup target add wasm32-wasip2

COPY . .
# The registry, git checkouts and target folder are cache mounts, so a rebuild
# compiles only what changed; the binary is copied out of the cached target folder.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin pilotage \
    && install -D -m 0755 target/release/pilotage /out/pilotage

FROM debian:bookworm-slim AS runtime

# HTTPS from the server (issuers' JWKS, the HTTP bindings of catalog entries) is
# verified against the system's certificate store.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# A fixed numeric user, so `runAsNonRoot` can verify it without a passwd lookup; the
# data folder is owned by it (a new Docker volume mounted there takes that owner).
RUN groupadd --system --gid 10001 pilotage \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /var/lib/pilotage --shell /usr/sbin/nologin pilotage \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/pilotage

COPY --from=builder /out/pilotage /usr/local/bin/pilotage

ENV PILOTAGE_DATA_DIR=/var/lib/pilotage
WORKDIR /var/lib/pilotage
VOLUME ["/var/lib/pilotage"]
USER 10001:10001
EXPOSE 8480

ENTRYPOINT ["pilotage"]
CMD ["serve", "--listen", "0.0.0.0:8480", "--auth", "jwt", "--demo=false"]
