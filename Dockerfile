# The etcdbr image: etcdbrctl, as a non-root user, on no base image. Build it with
# scripts/build-image.sh (docs/deploy.md), which makes this file's build context: rootfs.tar,
# holding the stripped etcdbrctl, exactly the shared libraries it loads, the CA bundle, /etc/passwd
# and /etc/group (nonroot, uid/gid 65532, as the Go tool's image), /tmp and /home/nonroot, every
# file from the Debian 12 package versions pinned in image/debian-packages.lock; and the values of
# the arguments below. No registry is needed: nothing is pulled and nothing is RUN.
FROM scratch
ADD rootfs.tar /
ARG VERSION
ARG REVISION
ARG CREATED
ARG SOURCE
# "package=version ..." of the pinned Debian packages the files come from, and the hash of the
# lock they were extracted by (image/debian-packages.lock without its comments, sha256)
ARG DEBIAN_PACKAGES
ARG DEBIAN_LOCK_SHA256
LABEL org.opencontainers.image.title="etcdbr" \
      org.opencontainers.image.description="etcdbrctl: etcd backup and restore (a C drop-in for Gardener's etcd-backup-restore)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.base.name="scratch" \
      io.etcdbr.image.debian-packages="${DEBIAN_PACKAGES}" \
      io.etcdbr.image.debian-lock-sha256="${DEBIAN_LOCK_SHA256}"
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/etcdbrctl"]
CMD ["--help"]
