# syntax=docker/dockerfile:1
# The operator image: the host binary only. The rules module is not in it; it arrives as the
# zundoko-rules ConfigMap (deploy/), so a new rule set never needs a new image.

ARG RUST_VERSION=1.95
FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and the build between image builds; the binary is copied out
# of the cached target directory in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p zundoko-operator \
 && cp target/release/zundoko-operator /zundoko-operator

# glibc and libgcc (Debian 12, as the build stage), no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /zundoko-operator /zundoko-operator
USER 65532:65532
# /metrics, /healthz, /readyz.
EXPOSE 8080
ENTRYPOINT ["/zundoko-operator"]
CMD ["run"]
