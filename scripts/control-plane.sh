#!/usr/bin/env bash
# Builds the test control plane from Go modules and caches it outside the repository, by version:
# kube-apiserver, kube-controller-manager and kubectl from the wrapper module tools/kubernetes
# (k8s.io/kubernetes at the version its go.mod requires), etcd from tools/etcd. Both modules and
# their go.sum are committed, so the go command fetches exactly those versions from the module
# proxy. Needs Go 1.21 or newer on PATH (the go.mod files ask for 1.26; an older go fetches that
# toolchain from the proxy by itself).
#
# Usage: scripts/control-plane.sh                  # ensure the binaries; print their directory
#        scripts/control-plane.sh --print-dir      # the directory only, building nothing
#        KUBERNETES_MODULE=tools/kubernetes-oldest scripts/control-plane.sh
#                                                  # the oldest supported Kubernetes instead
#
# The directory holds kube-apiserver, kube-controller-manager, kubectl and etcd. Idempotent: a
# cached version is not built again.
set -euo pipefail
cd "$(dirname "$0")/.."

MODULE="${KUBERNETES_MODULE:-tools/kubernetes}"
# The required version, written `require k8s.io/kubernetes vX` or inside a require block.
K8S_VERSION="$(awk '{ m = $1; v = $2 } $1 == "require" { m = $2; v = $3 }
    m == "k8s.io/kubernetes" && v ~ /^v/ { print v; exit }' "$MODULE/go.mod")"
ETCD_VERSION="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' tools/etcd/go.mod)"
CACHE_ROOT="${HCLOUD_CCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcloud-ccm-rs}"
BIN_DIR="$CACHE_ROOT/kubernetes/$K8S_VERSION"
ETCD_DIR="$CACHE_ROOT/etcd/$ETCD_VERSION"

log() { printf '[control-plane] %s\n' "$*" >&2; }
fail() { log "FAILED: $*"; exit 1; }
[[ -n "$K8S_VERSION" ]] || fail "$MODULE/go.mod requires no k8s.io/kubernetes version"
[[ -n "$ETCD_VERSION" ]] || fail "tools/etcd/go.mod requires no go.etcd.io/etcd/server/v3 version"

if [[ "${1:-}" == "--print-dir" ]]; then
    echo "$BIN_DIR"
    exit 0
fi

command -v go >/dev/null 2>&1 || fail "no go on PATH: install Go 1.21 or newer (the go.mod files ask for 1.26)"

# The version stamp kube-apiserver reports at /version (and kubectl version): without it a
# module build reports v0.0.0-master with an empty major and minor.
stamp() {
    local v="${1#v}" major minor pkg=k8s.io/component-base/version
    major="${v%%.*}"
    minor="${v#*.}"
    minor="${minor%%.*}"
    printf -- '-s -w -X %s.gitMajor=%s -X %s.gitMinor=%s -X %s.gitVersion=%s -X %s.gitTreeState=clean -X %s.buildDate=1970-01-01T00:00:00Z' \
        "$pkg" "$major" "$pkg" "$minor" "$pkg" "$1" "$pkg" "$pkg"
}

if [[ ! -x "$BIN_DIR/kube-apiserver" || ! -x "$BIN_DIR/kube-controller-manager" || ! -x "$BIN_DIR/kubectl" ]]; then
    log "building kube-apiserver, kube-controller-manager and kubectl $K8S_VERSION from $MODULE (the first time: about 12 minutes on 2 cores, with the module downloads)"
    mkdir -p "$BIN_DIR"
    work="$(mktemp -d "$BIN_DIR/build.XXXXXX")"
    (cd "$MODULE" && CGO_ENABLED=0 go build -trimpath -ldflags "$(stamp "$K8S_VERSION")" -o "$work/" \
        k8s.io/kubernetes/cmd/kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kubectl) >&2
    for binary in kube-apiserver kube-controller-manager kubectl; do
        mv "$work/$binary" "$BIN_DIR/$binary"
    done
    rmdir "$work"
fi

if [[ ! -x "$ETCD_DIR/etcd" ]]; then
    log "building etcd $ETCD_VERSION from tools/etcd"
    mkdir -p "$ETCD_DIR"
    (cd tools/etcd && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ETCD_DIR/etcd.tmp" go.etcd.io/etcd/server/v3) >&2
    mv "$ETCD_DIR/etcd.tmp" "$ETCD_DIR/etcd"
fi
# One directory for the harness: etcd beside the Kubernetes binaries.
ln -sfn "$ETCD_DIR/etcd" "$BIN_DIR/etcd"

log "$("$BIN_DIR/kube-apiserver" --version), etcd $ETCD_VERSION: $BIN_DIR"
echo "$BIN_DIR"
