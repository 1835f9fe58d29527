#!/usr/bin/env bash
# Builds scripts/lease-holder/main.go (a client-go leader-election participant used by the
# hand-over tests) against the vendored client-go of the Kubernetes source tree that
# scripts/control-plane.sh unpacks, and caches the binary beside kube-apiserver.
#
# Usage: scripts/lease-holder.sh     # ensure the binary, print its path on the last line
# Idempotent: rebuilds only when main.go changed.
set -euo pipefail
cd "$(dirname "$0")/.."

K8S_VERSION="${K8S_VERSION:-1.20.2}"
CACHE_ROOT="${HCLOUD_CCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcloud-ccm-rs}"
SRC_DIR="$CACHE_ROOT/src/kubernetes-$K8S_VERSION"
OUT_DIR="$CACHE_ROOT/lease-holder/$K8S_VERSION"
SOURCE="$PWD/scripts/lease-holder/main.go"
log() { printf '[lease-holder] %s\n' "$*" >&2; }

sum="$(sha256sum "$SOURCE" | cut -c1-16)"
binary="$OUT_DIR/lease-holder-$sum"
if [[ -x "$binary" ]]; then
    echo "$binary"
    exit 0
fi
[[ -d "$SRC_DIR/vendor/k8s.io/client-go" ]] || scripts/control-plane.sh >/dev/null
[[ -d "$SRC_DIR/vendor/k8s.io/client-go" ]] || { log "no Kubernetes source tree at $SRC_DIR"; exit 1; }
command -v go >/dev/null 2>&1 || {
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >&2
}

log "building against client-go $K8S_VERSION"
pkg="$SRC_DIR/cmd/hcloud-ccm-lease-holder"
mkdir -p "$pkg" "$OUT_DIR"
cp "$SOURCE" "$pkg/main.go"
# GOPATH mode, as the Kubernetes 1.20 build itself does (vendor/ holds client-go).
mkdir -p "$SRC_DIR/.go/src/k8s.io"
[[ -e "$SRC_DIR/.go/src/k8s.io/kubernetes" ]] || ln -s ../../.. "$SRC_DIR/.go/src/k8s.io/kubernetes"
(cd "$SRC_DIR/.go/src/k8s.io/kubernetes" && GOPATH="$SRC_DIR/.go" GO111MODULE=off CGO_ENABLED=0 \
    go build -o "$binary.tmp" ./cmd/hcloud-ccm-lease-holder >&2)
mv "$binary.tmp" "$binary"
echo "$binary"
