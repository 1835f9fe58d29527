#!/usr/bin/env bash
# Builds the hcloud-ccm container image in one command: a static release binary in a
# scratch-based OCI image (no shell, non-root user 65532, CA certificates for the Hetzner API),
# built with Debian's buildah. No Docker daemon and no registry: nothing is pulled.
#
# Reproducible: the same commit gives the same image digest. Every timestamp is the commit's
# (SOURCE_DATE_EPOCH), the binary carries no path of the build machine, and the files are
# written in a fixed order with fixed owners and modes.
#
# Usage: scripts/image.sh          # build; prints the archive's path on the last line
#        scripts/image.sh --install-tools   # only install the tools it runs (see below)
#        TARGET=aarch64-unknown-linux-gnu scripts/image.sh   # arm64 (see docs/deploy.md)
#
# HCLOUD_CCM_IMAGE_PROFILE selects the cargo profile of the binary: `release` (the default, and
# the only one for images anyone runs) or `image-test` (Cargo.toml: the release profile without
# its fat LTO and optimisation, minutes faster to rebuild; crates/hcloud-ccm/tests/image.rs uses
# it). cargo rebuilds nothing while the sources, the commit and the profile stay the same, so a
# second run only assembles the image again from the compiled binary.
#
# Writes, in target/image/:
#   hcloud-ccm.tar          the image as an OCI archive, tagged hcloud-ccm:vVERSION
#   hcloud-ccm.digest       the image's manifest digest (sha256:…)
#   hcloud-ccm.cdx.json     the SBOM of the binary's crates (CycloneDX, by cargo-cyclonedx)
# (with an arm64 TARGET: hcloud-ccm-arm64.* instead).
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
TARGET="${TARGET:-x86_64-unknown-linux-gnu}"
PROFILE="${HCLOUD_CCM_IMAGE_PROFILE:-release}"
case "$PROFILE" in
    release) ;;
    image-test) log "profile image-test: an unoptimised binary for the image test, not for release" ;;
    *) log "HCLOUD_CCM_IMAGE_PROFILE $PROFILE: only release and image-test"; exit 1 ;;
esac
case "$TARGET" in
    x86_64-unknown-linux-gnu) ARCH=amd64; NAME=hcloud-ccm ;;
    aarch64-unknown-linux-gnu) ARCH=arm64; NAME=hcloud-ccm-arm64 ;;
    *) log "TARGET $TARGET: only x86_64-unknown-linux-gnu and aarch64-unknown-linux-gnu"; exit 1 ;;
esac
OUT=target/image
# The SBOM generator, a pinned crates.io tool installed once beside the apiserver cache.
CYCLONEDX_VERSION=0.5.9
CACHE_ROOT="${HCLOUD_CCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcloud-ccm-rs}"
CYCLONEDX_ROOT="$CACHE_ROOT/tools/cargo-cyclonedx/$CYCLONEDX_VERSION"

# The tools this script runs, installed before any flag of the image build is set, and with
# none of the caller's build flags either: a tool is built for this machine, as a normal
# `cargo install` (RUSTFLAGS=+crt-static, for one, cannot build its proc-macros).
# `scripts/image.sh --install-tools` does only this and prints the SBOM tool's path; the image
# test proves that a RUSTFLAGS set by the caller does not reach the install.
if [[ ! -x "$CYCLONEDX_ROOT/bin/cargo-cyclonedx" ]]; then
    log "installing cargo-cyclonedx $CYCLONEDX_VERSION (once, into $CYCLONEDX_ROOT)"
    env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_RUSTFLAGS -u CARGO_TARGET_DIR \
        -u CARGO_BUILD_TARGET -u CARGO_PROFILE_RELEASE_LTO \
        cargo install --quiet --locked --root "$CYCLONEDX_ROOT" cargo-cyclonedx --version "$CYCLONEDX_VERSION" >&2
fi
if [[ "${1:-}" == "--install-tools" ]]; then
    echo "$CYCLONEDX_ROOT/bin/cargo-cyclonedx"
    exit 0
fi

# buildah's own storage, private to this build (vfs: works without overlay support).
BUILDAH=(buildah --root "$PWD/$OUT/storage" --runroot "$PWD/$OUT/run" --storage-driver vfs)

# What the image is built from: the commit, "-dirty" when the work tree has changes, and the
# commit's time for every timestamp (SOURCE_DATE_EPOCH when given).
REVISION="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ "$REVISION" != unknown && -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    REVISION="$REVISION-dirty"
fi
EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
SOURCE="${HCLOUD_CCM_SOURCE:-$(git remote get-url origin 2>/dev/null || echo hcloud-ccm-rs)}"

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi
need=()
command -v buildah >/dev/null 2>&1 || need+=(buildah)
[[ -f /etc/ssl/certs/ca-certificates.crt ]] || need+=(ca-certificates)
if [[ "$ARCH" == arm64 ]] && ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
fi
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
# CARGO_TARGET_DIR when that is set, e.g. the CI cache of scripts/test.sh). The paths of this
# machine (the work tree, the crate registry) are mapped to fixed names, so the binary is the
# same wherever it is built.
STATIC_TARGET="${CARGO_TARGET_DIR:-target}/static"
CARGO_HOME_DIR="${CARGO_HOME:-$HOME/.cargo}"
# Given to this one build, not exported: nothing else this script runs sees them.
STATIC_RUSTFLAGS="-C target-feature=+crt-static --remap-path-prefix=$PWD=/hcloud-ccm-rs --remap-path-prefix=$CARGO_HOME_DIR=/cargo"
if [[ "$ARCH" == arm64 ]]; then
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
fi
log "building the static $PROFILE binary for $TARGET ($STATIC_TARGET, commit $REVISION)"
RUSTFLAGS="$STATIC_RUSTFLAGS" HCLOUD_CCM_COMMIT="$REVISION" SOURCE_DATE_EPOCH="$EPOCH" CARGO_TARGET_DIR="$STATIC_TARGET" \
    cargo build --profile "$PROFILE" --locked -p hcloud-ccm --bin hcloud-ccm --target "$TARGET" >&2
BIN="$STATIC_TARGET/$TARGET/$PROFILE/hcloud-ccm"
if ! file "$BIN" 2>/dev/null | grep -q 'statically linked' &&
    ! ldd "$BIN" 2>&1 | grep -qE 'statically linked|not a dynamic executable'; then
    log "$BIN is dynamically linked: $(ldd "$BIN" 2>&1 | tr '\n' ' ')"
    exit 1
fi

ROOTFS="$OUT/rootfs-$ARCH"
rm -rf "$ROOTFS"
mkdir -p "$ROOTFS/bin" "$ROOTFS/etc/ssl/certs"
# The official image's path, so a `command:` written for it keeps working.
install -m 0755 "$BIN" "$ROOTFS/bin/hcloud-cloud-controller-manager"
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' >"$ROOTFS/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$ROOTFS/etc/group"
chmod 0644 "$ROOTFS/etc/passwd" "$ROOTFS/etc/group"
chmod 0755 "$ROOTFS" "$ROOTFS/bin" "$ROOTFS/etc" "$ROOTFS/etc/ssl" "$ROOTFS/etc/ssl/certs"
find "$ROOTFS" -exec touch -h -d "@$EPOCH" {} +

log "assembling $TAG ($ARCH) from scratch"
ctr="$("${BUILDAH[@]}" from --name "hcloud-ccm-build-$ARCH" scratch)"
trap '"${BUILDAH[@]}" rm "$ctr" >/dev/null 2>&1 || true' EXIT
"${BUILDAH[@]}" copy --chown 0:0 "$ctr" "$ROOTFS/" / >/dev/null
"${BUILDAH[@]}" config \
    --arch "$ARCH" \
    --os linux \
    --entrypoint '["/bin/hcloud-cloud-controller-manager"]' \
    --cmd '' \
    --user 65532:65532 \
    --workingdir / \
    --port 8233 \
    --port 10258 \
    --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --created-by "scripts/image.sh" \
    --label org.opencontainers.image.title=hcloud-ccm \
    --label "org.opencontainers.image.description=Kubernetes cloud-controller-manager for Hetzner Cloud" \
    --label "org.opencontainers.image.version=$VERSION" \
    --label "org.opencontainers.image.revision=$REVISION" \
    --label "org.opencontainers.image.source=$SOURCE" \
    --label "org.opencontainers.image.created=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)" \
    --label org.opencontainers.image.licenses=Apache-2.0 \
    "$ctr"
# --timestamp: the image's and every file's time is the commit's, so two builds of one commit
# have one digest.
"${BUILDAH[@]}" commit --quiet --rm --timestamp "$EPOCH" --identity-label=false "$ctr" "localhost/$TAG" >/dev/null
trap - EXIT
ARCHIVE="$OUT/$NAME.tar"
rm -f "$ARCHIVE"
"${BUILDAH[@]}" push --quiet "localhost/$TAG" "oci-archive:$ARCHIVE:$TAG" >&2
"${BUILDAH[@]}" rmi "localhost/$TAG" >/dev/null
DIGEST="$(tar -xOf "$ARCHIVE" index.json | sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')"
[[ -n "$DIGEST" ]] || { log "no manifest digest in $ARCHIVE"; exit 1; }
echo "$DIGEST" >"$OUT/$NAME.digest"

# The SBOM: every crate compiled into the binary (normal dependencies of hcloud-ccm for the
# target), with versions and licences, CycloneDX JSON.
# The tool writes one file beside each workspace member's Cargo.toml; the binary's is kept.
SBOM_FILE=image-sbom-$ARCH
"$CYCLONEDX_ROOT/bin/cargo-cyclonedx" cyclonedx --manifest-path crates/hcloud-ccm/Cargo.toml \
    --format json --spec-version 1.5 --target "$TARGET" --no-build-deps \
    --override-filename "$SBOM_FILE" -qq >&2
mv "crates/hcloud-ccm/$SBOM_FILE.json" "$OUT/$NAME.cdx.json"
rm -f crates/*/"$SBOM_FILE.json"

binary_size="$(stat -c %s "$BIN")"
archive_size="$(stat -c %s "$ARCHIVE")"
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1000000 }'; }
log "image $TAG ($ARCH) $DIGEST: $(mb "$archive_size") as OCI archive (compressed), binary $(mb "$binary_size"); SBOM $OUT/$NAME.cdx.json"
echo "$ARCHIVE"
