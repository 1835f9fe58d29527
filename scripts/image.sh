#!/usr/bin/env bash
# Builds the hcloud-ccm container image in one command: a static release binary in a
# scratch-based OCI image (no shell, non-root user 65532, CA certificates for the Hetzner API),
# built with Debian's buildah. No Docker daemon and no registry: nothing is pulled.
#
# Usage: scripts/image.sh          # build; writes target/image/hcloud-ccm.tar (OCI archive)
#
# Load the archive with e.g. `skopeo copy oci-archive:target/image/hcloud-ccm.tar
# docker://REGISTRY/hcloud-ccm:vVERSION` or `ctr -n k8s.io images import target/image/hcloud-ccm.tar`.
# Exit status 3 means buildah cannot run on this machine (the image tests skip then).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[image] %s\n' "$*" >&2; }

VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
[[ -n "$VERSION" ]] || { log "no workspace version in Cargo.toml"; exit 1; }
TAG="hcloud-ccm:v$VERSION"
TARGET=x86_64-unknown-linux-gnu
OUT=target/image
# buildah's own storage, private to this build (vfs: works without overlay support).
BUILDAH=(buildah --root "$PWD/$OUT/storage" --runroot "$PWD/$OUT/run" --storage-driver vfs)

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi
need=()
command -v buildah >/dev/null 2>&1 || need+=(buildah)
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || need+=(ca-certificates)
if ((${#need[@]})); then
    log "installing ${need[*]}"
    $SUDO apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >&2
fi

mkdir -p "$OUT"
if ! probe="$("${BUILDAH[@]}" from --name hcloud-ccm-probe scratch 2>&1)"; then
    log "buildah cannot run here: $probe"
    exit 3
fi
"${BUILDAH[@]}" rm hcloud-ccm-probe >/dev/null

# glibc, linked statically: the code is pure Rust and loads nothing at run time. A separate
# target directory, because the flags differ from the workspace's normal builds (inside
# CARGO_TARGET_DIR when that is set, e.g. the CI cache of scripts/test.sh).
STATIC_TARGET="${CARGO_TARGET_DIR:-target}/static"
log "building the static release binary ($STATIC_TARGET)"
RUSTFLAGS='-C target-feature=+crt-static' CARGO_TARGET_DIR="$STATIC_TARGET" \
    cargo build --release --locked -p hcloud-ccm --bin hcloud-ccm --target "$TARGET" >&2
BIN="$STATIC_TARGET/$TARGET/release/hcloud-ccm"
if ! ldd "$BIN" 2>&1 | grep -qE 'statically linked|not a dynamic executable'; then
    log "$BIN is dynamically linked: $(ldd "$BIN" 2>&1 | tr '\n' ' ')"
    exit 1
fi

ROOTFS="$OUT/rootfs"
rm -rf "$ROOTFS"
mkdir -p "$ROOTFS/bin" "$ROOTFS/etc/ssl/certs"
# The official image's path, so a `command:` written for it keeps working.
install -m 0755 "$BIN" "$ROOTFS/bin/hcloud-cloud-controller-manager"
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' >"$ROOTFS/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ROOTFS/etc/group"
chmod 0644 "$ROOTFS/etc/passwd" "$ROOTFS/etc/group"

log "assembling $TAG from scratch"
ctr="$("${BUILDAH[@]}" from --name hcloud-ccm-build scratch)"
trap '"${BUILDAH[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
"${BUILDAH[@]}" copy --chown 0:0 "$ctr" "$ROOTFS/" / >/dev/null
"${BUILDAH[@]}" config \
    --entrypoint '["/bin/hcloud-cloud-controller-manager"]' \
    --cmd '' \
    --user 65532:65532 \
    --workingdir / \
    --port 8233 \
    --port 10258 \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --label org.opencontainers.image.title=hcloud-ccm \
    --label "org.opencontainers.image.description=Kubernetes cloud-controller-manager for Hetzner Cloud" \
    --label "org.opencontainers.image.version=$VERSION" \
    --label "org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    --label "org.opencontainers.image.source=$(git remote get-url origin 2>/dev/null || echo hcloud-ccm-rs)" \
    --label org.opencontainers.image.licenses=Apache-2.0 \
    "$ctr"
"${BUILDAH[@]}" commit --quiet --rm "$ctr" "localhost/$TAG" >/dev/null
trap - EXIT
rm -f "$OUT/hcloud-ccm.tar"
"${BUILDAH[@]}" push --quiet "localhost/$TAG" "oci-archive:$OUT/hcloud-ccm.tar:$TAG" >&2
"${BUILDAH[@]}" rmi "localhost/$TAG" >/dev/null

binary_size="$(stat -c %s "$BIN")"
archive_size="$(stat -c %s "$OUT/hcloud-ccm.tar")"
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1000000 }'; }
log "image $TAG: $(mb "$archive_size") as OCI archive (compressed), binary $(mb "$binary_size")"
echo "$OUT/hcloud-ccm.tar"
