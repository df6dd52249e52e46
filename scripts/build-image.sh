#!/usr/bin/env bash
# Builds the etcdbr image with podman on Debian 12, without any container registry (docs/deploy.md).
# Prints the image reference as its last line.
#
#   scripts/build-image.sh                  # builds etcdbrctl (scripts/build.sh into $BUILD_DIR,
#                                           # default build/) and the image from it
#   ETCDBR_BIN=build-werror/etcdbrctl scripts/build-image.sh   # an etcdbrctl built already
#   scripts/build-image.sh --update-lock    # re-pins image/debian-packages.lock (below)
#
# The image has no base image: its root is etcdbrctl (stripped), exactly the shared libraries it
# loads (its ELF NEEDED closure, and libgcc_s, which glibc loads for thread cancellation), the
# CA bundle, /etc/passwd and /etc/group with the non-root user nonroot (uid/gid 65532, as the Go
# tool's image), /tmp and /home/nonroot. Those files come from Debian 12 packages at the versions
# pinned in image/debian-packages.lock, extracted by mmdebstrap (--variant=extract: no dpkg, no
# maintainer scripts) and cached in $ETCDBR_IMAGE_CACHE by the lock's hash. The Dockerfile adds
# that root as one layer with the OCI labels, the user and the entry point.
#
# Environment: ETCDBR_IMAGE (the reference to tag, default localhost/etcdbr:<version>-g<commit>
# [-dirty]), ETCDBR_IMAGE_SOURCE (the org.opencontainers.image.source label, default the git
# remote "origin"), ETCDBR_IMAGE_REVISION (the commit, outside a git checkout),
# ETCDBR_DEBIAN_MIRROR / ETCDBR_DEBIAN_SECURITY_MIRROR (a mirror or a snapshot.debian.org URL
# that still has the pinned versions), ETCDBR_IMAGE_CACHE (default ~/.cache/etcdbr/image),
# CONTAINERS_CONF (default image/containers.conf: runc, no default ulimits). Runs as root
# (podman's root storage; the root's files are owned by 0 and 65532).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
LOCK=image/debian-packages.lock
SUITE=bookworm
UID_NONROOT=65532
export CONTAINERS_CONF=${CONTAINERS_CONF:-$SRC/image/containers.conf}
CACHE=${ETCDBR_IMAGE_CACHE:-$HOME/.cache/etcdbr/image}
MIRROR=${ETCDBR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${ETCDBR_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

die() {
    echo "build-image: $*" >&2
    exit 1
}
update_lock=0
case "${1:-}" in
--update-lock) update_lock=1 ;;
"") ;;
*) die "usage: $0 [--update-lock]" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root (podman's root storage; the image's files belong to 0 and $UID_NONROOT)"
for t in podman runc mmdebstrap readelf strip dpkg-deb dpkg-architecture sha256sum; do
    command -v "$t" >/dev/null || die "$t not found: run scripts/install-deps.sh"
done
# shellcheck disable=SC1091
. /etc/os-release
[ "${VERSION_CODENAME:-}" = "$SUITE" ] ||
    die "this machine is ${PRETTY_NAME:-unknown}: etcdbrctl must be built on Debian 12 ($SUITE), whose libraries the image carries"
TRIPLET=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
T0=$SECONDS

# ---- etcdbrctl ----
if [ -n "${ETCDBR_BIN:-}" ]; then
    BIN=$ETCDBR_BIN
else
    BUILD_DIR=${BUILD_DIR:-build}
    echo "== building etcdbrctl in $BUILD_DIR (scripts/build.sh; ETCDBR_BIN=... uses a built one)" >&2
    BUILD_DIR=$BUILD_DIR ./scripts/build.sh -DETCDBR_WERROR=ON >&2
    BIN=$BUILD_DIR/etcdbrctl
fi
[ -x "$BIN" ] || die "$BIN is not an executable"
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*Shared library: \[\(.*\)\]/\1/p'; }
if needed "$BIN" | grep -E '^lib(asan|ubsan|tsan|lsan)' >/dev/null; then
    die "$BIN is built with sanitizers ($(needed "$BIN" | grep -E '^lib(a|ub|t|l)san' | tr '\n' ' ')): the image takes a plain build"
fi
VERSION=$("$BIN" --version | sed -n 's/^etcdbrctl version //p')
[ -n "$VERSION" ] || die "$BIN --version does not say its version"

# ---- the pinned Debian packages, extracted (cached by the lock's hash) ----
# extract DIR PACKAGE...: mmdebstrap --variant=extract of PACKAGE (and their dependencies) into
# DIR, the .deb files kept in DIR/var/cache/apt/archives (the record of what was extracted).
extract() {
    local dir=$1
    shift
    local inc
    inc=$(
        IFS=,
        echo "$*"
    )
    mmdebstrap --variant=extract --include="$inc" --skip=cleanup/apt/cache \
        --format=directory "$SUITE" "$dir" \
        "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" \
        "deb $SECURITY_MIRROR $SUITE-security main" >&2
}
# debs_of DIR: "package version" of every .deb extracted into DIR, sorted
debs_of() {
    local d
    for d in "$1"/var/cache/apt/archives/*.deb; do
        dpkg-deb --show --showformat='${Package} ${Version}\n' "$d"
    done | sort
}
mkdir -p "$CACHE"
if [ "$update_lock" = 1 ]; then
    # the packages owning the libraries etcdbrctl loads on this machine, libgcc-s1 (libgcc_s,
    # loaded by glibc) and ca-certificates, extracted at today's versions with their dependencies
    pkgs=(libgcc-s1 ca-certificates)
    while read -r lib; do
        p=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null ||
            dpkg -S "/usr$lib" 2>/dev/null || true)
        [ -n "$p" ] || die "no package owns $lib"
        pkgs+=("${p%%:*}")
    done < <(ldd "$BIN" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p')
    mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort -u)
    echo "== re-pinning $LOCK from: ${pkgs[*]}" >&2
    stage=$(mktemp -d "$CACHE/lock.XXXXXX")
    trap 'rm -rf "$stage"' EXIT
    extract "$stage" "${pkgs[@]}"
    {
        echo "# The Debian $VERSION_ID ($SUITE) packages the etcdbr image's files come from, pinned: scripts/build-image.sh"
        echo "# extracts exactly these versions (and fails when the mirror no longer has one). Made by"
        echo "# scripts/build-image.sh --update-lock on $(date -u +%Y-%m-%d) from ${MIRROR} and ${SECURITY_MIRROR}."
        echo "# package version"
        debs_of "$stage"
    } >"$LOCK.new"
    mv "$LOCK.new" "$LOCK"
    rm -rf "$stage"
    trap - EXIT
    echo "== $LOCK: $(grep -vc '^#' "$LOCK") packages" >&2
fi
[ -f "$LOCK" ] || die "$LOCK missing (scripts/build-image.sh --update-lock makes it)"
mapfile -t locked < <(grep -v '^#' "$LOCK" | grep .)
LOCK_SHA=$(grep -v '^#' "$LOCK" | sha256sum | cut -c1-64)
STAGE=$CACHE/stage-$LOCK_SHA
if [ ! -d "$STAGE" ]; then
    echo "== extracting the ${#locked[@]} pinned packages of $LOCK (mmdebstrap)" >&2
    tmp=$(mktemp -d "$CACHE/stage.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    pins=()
    for l in "${locked[@]}"; do pins+=("${l% *}=${l#* }"); done
    extract "$tmp" "${pins[@]}" ||
        die "mmdebstrap could not extract the pinned packages (a version the mirror no longer has? set ETCDBR_DEBIAN_MIRROR to a snapshot.debian.org URL of the lock's date, or re-pin with --update-lock)"
    # every extracted package is a pinned one at its pinned version (a dependency the lock does
    # not list would come in at whatever version the mirror has)
    diff <(printf '%s\n' "${locked[@]}" | sort) <(debs_of "$tmp") >&2 ||
        die "the extracted packages differ from $LOCK (above: < the lock, > extracted): re-pin with --update-lock"
    mv -T "$tmp" "$STAGE" 2>/dev/null || rm -rf "$tmp" # another build may have made it meanwhile
    trap - EXIT
fi
STAGE=$(readlink -f "$STAGE")

# ---- the image's root ----
WORKD=$(mktemp -d "${TMPDIR:-/tmp}/etcdbr-image.XXXXXX")
trap 'rm -rf "$WORKD"' EXIT
ROOT=$WORKD/root
LIBDIR=usr/lib/$TRIPLET
mkdir -p "$ROOT"/{etc/ssl/certs,"$LIBDIR",usr/lib64,usr/local/bin,usr/share/etcdbr-image,home/nonroot,tmp,var/etcd/data}
ln -s usr/lib "$ROOT/lib"
ln -s usr/lib64 "$ROOT/lib64"
# find_lib SONAME: its file in the stage (Debian 12 puts libraries in /lib/<triplet> and
# /usr/lib/<triplet>), resolved to the real file
find_lib() {
    local d
    for d in "$STAGE/lib/$TRIPLET" "$STAGE/usr/lib/$TRIPLET"; do
        if [ -e "$d/$1" ]; then
            readlink -f "$d/$1"
            return 0
        fi
    done
    return 1
}
# the NEEDED closure of etcdbrctl in the stage, breadth first; each library is copied under its
# SONAME (one regular file, no symlink chain)
declare -A seen=()
queue=(libgcc_s.so.1) # dlopen()ed by glibc for pthread_cancel/pthread_exit, not NEEDED
mapfile -t -O 1 queue < <(needed "$BIN")
files=()
while [ ${#queue[@]} -gt 0 ]; do
    so=${queue[0]}
    queue=("${queue[@]:1}")
    [ -z "${seen[$so]:-}" ] || continue
    seen[$so]=1
    f=$(find_lib "$so") || die "$so (needed by etcdbrctl's closure) is in none of the pinned packages: add its package with --update-lock"
    cp "$f" "$ROOT/$LIBDIR/$so"
    files+=("$f")
    mapfile -t -O "${#queue[@]}" queue < <(needed "$f")
done
interp=$(readelf -l "$BIN" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
[ "$interp" = /lib64/ld-linux-x86-64.so.2 ] || die "unexpected program interpreter $interp"
f=$(find_lib ld-linux-x86-64.so.2) || die "the pinned libc6 has no ld-linux-x86-64.so.2"
[ -e "$ROOT/$LIBDIR/ld-linux-x86-64.so.2" ] || cp "$f" "$ROOT/$LIBDIR/"
ln -s "../lib/$TRIPLET/ld-linux-x86-64.so.2" "$ROOT/usr/lib64/ld-linux-x86-64.so.2"
strip --strip-unneeded -o "$ROOT/usr/local/bin/etcdbrctl" "$BIN"
# the CA bundle update-ca-certificates would make from the pinned ca-certificates (every
# certificate it ships is enabled by default); libcurl and OpenSSL read it at this path
cabundle=$ROOT/etc/ssl/certs/ca-certificates.crt
find "$STAGE/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort | while read -r c; do
    sed -e '$a\' "$c"
done >"$cabundle"
[ "$(grep -c 'BEGIN CERTIFICATE' "$cabundle")" -gt 100 ] || die "the CA bundle has too few certificates"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/usr/sbin/nologin\n' \
    "$UID_NONROOT" "$UID_NONROOT" >"$ROOT/etc/passwd"
printf 'root:x:0:\nnonroot:x:%s:\n' "$UID_NONROOT" >"$ROOT/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$ROOT/etc/nsswitch.conf"
chmod 1777 "$ROOT/tmp"
chown -R "$UID_NONROOT:$UID_NONROOT" "$ROOT/home/nonroot" "$ROOT/var/etcd"
chmod 700 "$ROOT/home/nonroot"
# the manifest: the pinned packages the image's files come from, and each file's package
declare -A owner=()
for d in "$STAGE"/var/cache/apt/archives/*.deb; do
    pv=$(dpkg-deb --show --showformat='${Package} ${Version}' "$d")
    while read -r p; do owner[$p]=$pv; done < <(dpkg-deb --fsys-tarfile "$d" | tar -t | sed 's|^\./|/|')
done
{
    echo "# the Debian $VERSION_ID packages (pinned in the repository's $LOCK) this image's files come from"
    for f in "${files[@]}" "$(find_lib ld-linux-x86-64.so.2)"; do
        p=${f#"$STAGE"}
        [ -n "${owner[$p]:-}" ] || die "no pinned package holds $p"
        echo "${owner[$p]} $p"
    done | sort -u
    echo "$(grep '^ca-certificates ' "$LOCK") /usr/share/ca-certificates (as /etc/ssl/certs/ca-certificates.crt)"
} >"$ROOT/usr/share/etcdbr-image/debian-packages"
cp "$LOCK" "$ROOT/usr/share/etcdbr-image/debian-packages.lock"
mapfile -t used < <(grep -v '^#' "$ROOT/usr/share/etcdbr-image/debian-packages" | cut -d' ' -f1,2 |
    sort -u | sed 's/ /=/')
DEBIAN_PACKAGES=${used[*]}
tar --sort=name --numeric-owner --mtime=@0 -C "$ROOT" -cf "$WORKD/rootfs.tar" .

# ---- the image ----
dirty=""
if [ -n "${ETCDBR_IMAGE_REVISION:-}" ]; then
    REVISION=$ETCDBR_IMAGE_REVISION
else
    REVISION=$(git rev-parse HEAD 2>/dev/null) ||
        die "not a git checkout: set ETCDBR_IMAGE_REVISION to the commit the sources are from (the revision label)"
    git diff --quiet HEAD -- || dirty=-dirty
fi
IMAGE=${ETCDBR_IMAGE:-localhost/etcdbr:$VERSION-g${REVISION:0:12}$dirty}
SOURCE=${ETCDBR_IMAGE_SOURCE:-$(git remote get-url origin 2>/dev/null || echo unknown)}
cp Dockerfile "$WORKD/Dockerfile"
echo "== podman build $IMAGE" >&2
podman build --quiet --no-cache -f "$WORKD/Dockerfile" -t "$IMAGE" \
    --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION$dirty" \
    --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" --build-arg SOURCE="$SOURCE" \
    --build-arg DEBIAN_PACKAGES="$DEBIAN_PACKAGES" --build-arg DEBIAN_LOCK_SHA256="$LOCK_SHA" \
    "$WORKD" >&2
# it runs as its user, and every symbol etcdbrctl and its libraries use resolves at start
out=$(podman run --rm --network=none -e LD_BIND_NOW=1 "$IMAGE" --version) ||
    die "$IMAGE does not run etcdbrctl --version"
# the first line is the version (the Go tool's shape); commit, build date, compiler and the
# libraries' versions follow
[ "$(head -1 <<<"$out")" = "etcdbrctl version $VERSION" ] || die "$IMAGE --version says: $out"
user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[ "$user" = "$UID_NONROOT:$UID_NONROOT" ] || die "$IMAGE runs as '$user'"
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
echo "== $IMAGE: $((size / 1000000)) MB ($size bytes, uncompressed), ${#seen[@]} libraries from $(printf '%s\n' "${used[@]}" | sort -u | wc -l) pinned packages, built in $((SECONDS - T0)) s" >&2
echo "$IMAGE"
