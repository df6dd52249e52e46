# etcdbr image: etcdbrctl plus etcd and etcdctl. The restore needs no etcd binary (etcdbrctl writes
# the member dir itself, docs/member-dir.md); etcd is here only because the chart's etcd container
# runs etcd from this same image, and etcdctl for the quorum-loss runbook's checks
# (docs/runbook-quorum-loss.md). etcdutl is no longer copied (only `restore --etcdutl-bin`, a
# fallback, would use it). docs/deploy.md says how to build and run it and what it was tested with.
#
#   docker build -t etcdbr:dev .                        # or: podman build / buildah bud
#   docker build --build-arg ETCD_VERSION=v3.5.35 -t etcdbr:dev-etcd3.5 .
#
# Stages: `etcd` builds etcd from the Go module proxy (as scripts/build-etcd.sh does), `build`
# builds etcdbrctl on Debian 12 with the packages of scripts/install-deps.sh, the last stage is
# debian:12-slim with only the shared libraries etcdbrctl links, curl (the chart's etcd
# bootstrap script), CA certificates and a non-root user (uid/gid 65532, as the Go tool's image).

ARG GO_IMAGE=golang:1.26
ARG DEBIAN_IMAGE=debian:12
ARG RUNTIME_IMAGE=debian:12-slim

# ---- etcd and etcdctl from the Go module proxy (for the chart's etcd container and the runbook) ----
FROM ${GO_IMAGE} AS etcd
ARG ETCD_VERSION=v3.6.16
ARG GOPROXY=https://proxy.golang.org,direct
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOPROXY=${GOPROXY}
WORKDIR /work
RUN go mod init etcdbr-etcd-build \
 && go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" "go.etcd.io/etcd/etcdctl/v3@${ETCD_VERSION}" \
 && mkdir /out \
 && go build -trimpath -ldflags='-s -w' -o /out/ go.etcd.io/etcd/server/v3 \
           go.etcd.io/etcd/etcdctl/v3 \
 && mv /out/server /out/etcd \
 && /out/etcd --version && /out/etcdctl version

# ---- etcdbrctl ----
FROM ${DEBIAN_IMAGE} AS build
# the build packages of scripts/install-deps.sh (libcmocka-dev: CMake configures the unit tests)
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libcurl4-openssl-dev libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler \
      libssl-dev zlib1g-dev libzstd-dev libdeflate-dev libjansson-dev libcmocka-dev \
      libmicrohttpd-dev libgnutls28-dev libyaml-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# the sources CMake configures (.dockerignore keeps build dirs, .git and docs out)
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETCDBR_WERROR=ON \
 && cmake --build /build -j"$(nproc)" --target etcdbrctl \
 && strip /build/etcdbrctl \
 && /build/etcdbrctl --version

# ---- runtime ----
FROM ${RUNTIME_IMAGE}
# the runtime libraries of the -dev packages above (`ldd etcdbrctl`), curl for the chart's etcd
# bootstrap script and probes, jq for the quorum-loss runbook's commands
# (docs/runbook-quorum-loss.md), CA certificates for the object stores
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl jq \
      libcurl4 libnghttp2-14 libprotobuf-c1 libssl3 zlib1g libzstd1 libdeflate0 libjansson4 \
      libmicrohttpd12 libgnutls30 libyaml-0-2 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --home-dir /home/nonroot --create-home \
      --shell /usr/sbin/nologin nonroot \
 && mkdir -p /var/etcd/data /var/etcd/config \
 && chown -R 65532:65532 /var/etcd
# etcd: the chart's etcd container runs it from this image (not needed by restore)
COPY --from=etcd /out/etcd /out/etcdctl /usr/local/bin/
COPY --from=build /build/etcdbrctl /usr/local/bin/etcdbrctl
RUN etcdbrctl --version && etcdctl version && etcd --version
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 8080 2379 2380
ENTRYPOINT ["etcdbrctl"]
CMD ["--help"]
