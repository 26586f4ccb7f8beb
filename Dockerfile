# The nodewright controller's image: a static (musl) binary, a CA bundle and
# a non-root user in an otherwise empty image — no shell, no package manager.
#
#   docker build -t nodewright .                          # this machine's architecture
#   docker buildx build --platform linux/arm64 -t nodewright .
#
# scripts/image builds the same runtime stage without Docker: it compiles the
# binary on the host and hands it to this file as the `build` context.

ARG RUST_VERSION=1.95
FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# x86_64 or aarch64, whichever this stage runs as.
RUN target="$(uname -m)-unknown-linux-musl" \
 && rustup target add "$target" \
 && cargo build --release --locked --target "$target" --bin nodewright \
 && mkdir -p /out/etc/ssl/certs \
 && strip -o /out/nodewright "target/$target/release/nodewright" \
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ \
 && echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' > /out/etc/passwd \
 && echo 'nonroot:x:65532:' > /out/etc/group

FROM scratch
COPY --from=build /out/ /
USER 65532:65532
# The chart runs `nodewright controller`; any other subcommand works too.
ENTRYPOINT ["/nodewright"]
CMD ["controller"]
LABEL org.opencontainers.image.title="nodewright" \
      org.opencontainers.image.description="Kubernetes node provisioner for AWS speaking Karpenter's v1 API" \
      org.opencontainers.image.licenses="Apache-2.0"
