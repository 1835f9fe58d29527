#!/usr/bin/env bash
# Installs etcd and builds kube-apiserver from Debian's kubernetes source package,
# caching the binary outside the repository under a versioned path.
#
# Usage: scripts/control-plane.sh            # ensure binaries, print their directory on the last line
#        scripts/control-plane.sh --print-dir
#
# Idempotent: when the cached binary and etcd exist it does nothing.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.20.2}"
CACHE_ROOT="${HCLOUD_CCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcloud-ccm-rs}"
BIN_DIR="$CACHE_ROOT/kube-apiserver/$K8S_VERSION"
SRC_DIR="$CACHE_ROOT/src/kubernetes-$K8S_VERSION"
STEP="start"

log() { printf '[control-plane] %s\n' "$*" >&2; }
fail() { log "FAILED at step '$STEP': $*"; exit 1; }
trap 'fail "command exited with status $? (line $LINENO)"' ERR

step() { STEP="$1"; log "step: $1"; }

if [[ "${1:-}" == "--print-dir" ]]; then
    echo "$BIN_DIR"
    exit 0
fi

SUDO=""
if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi

APT_UPDATED=0
apt_update_once() {
    if [[ $APT_UPDATED == 0 ]]; then
        $SUDO apt-get update -qq >&2
        APT_UPDATED=1
    fi
}

need_pkgs=()
command -v etcd >/dev/null 2>&1 || need_pkgs+=(etcd-server)
command -v rsync >/dev/null 2>&1 || need_pkgs+=(rsync)
command -v jq >/dev/null 2>&1 || need_pkgs+=(jq)
command -v kubectl >/dev/null 2>&1 || need_pkgs+=(kubernetes-client)
if [[ ! -x "$BIN_DIR/kube-apiserver" ]]; then
    command -v go >/dev/null 2>&1 || need_pkgs+=(golang-go)
    command -v make >/dev/null 2>&1 || need_pkgs+=(make)
fi

if ((${#need_pkgs[@]})); then
    step "install packages: ${need_pkgs[*]}"
    apt_update_once
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >&2
fi

if [[ -x "$BIN_DIR/kube-apiserver" ]]; then
    log "kube-apiserver $K8S_VERSION cached at $BIN_DIR"
    echo "$BIN_DIR"
    exit 0
fi

step "enable Debian source packages"
sources_changed=0
for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    if grep -qE '^Types: deb$' "$f"; then
        $SUDO sed -i -E 's/^Types: deb$/Types: deb deb-src/' "$f"
        sources_changed=1
    fi
done
if [[ -f /etc/apt/sources.list ]] && grep -qE '^deb ' /etc/apt/sources.list && ! grep -qE '^deb-src ' /etc/apt/sources.list; then
    $SUDO sed -i -E 's/^deb (.*)$/deb \1\ndeb-src \1/' /etc/apt/sources.list
    sources_changed=1
fi
if [[ $sources_changed == 1 ]]; then APT_UPDATED=0; fi

step "fetch kubernetes source package"
mkdir -p "$CACHE_ROOT/src"
if [[ ! -d "$SRC_DIR" ]]; then
    apt_update_once
    work="$(mktemp -d "$CACHE_ROOT/src/fetch.XXXXXX")"
    (cd "$work" && apt-get source -qq "kubernetes" >&2)
    found="$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'kubernetes-*' | head -n1)"
    [[ -n "$found" ]] || fail "apt-get source produced no kubernetes-* directory"
    got="$(basename "$found")"; got="${got#kubernetes-}"
    # Debian versions a re-packaged upstream release as e.g. "1.20.5+really1.20.2".
    if [[ "$got" == *+really* ]]; then got="${got##*+really}"; fi
    if [[ "$got" != "$K8S_VERSION" ]]; then
        fail "source package is kubernetes $got, expected $K8S_VERSION (set K8S_VERSION to override)"
    fi
    mv "$found" "$SRC_DIR"
    rm -rf "$work"
fi

step "build kube-apiserver $K8S_VERSION (takes ~9 minutes on 2 cores the first time)"
cd "$SRC_DIR"
mkdir -p .go/src/k8s.io
[[ -e .go/src/k8s.io/kubernetes ]] || ln -s ../../.. .go/src/k8s.io/kubernetes
GOPATH="$PWD/.go" CGO_ENABLED=0 make WHAT=cmd/kube-apiserver >&2
built="$SRC_DIR/_output/local/bin/linux/amd64/kube-apiserver"
[[ -x "$built" ]] || fail "build finished but $built is missing"

step "cache binary"
mkdir -p "$BIN_DIR"
cp "$built" "$BIN_DIR/kube-apiserver.tmp"
mv "$BIN_DIR/kube-apiserver.tmp" "$BIN_DIR/kube-apiserver"
"$BIN_DIR/kube-apiserver" --version >&2 || true
log "kube-apiserver $K8S_VERSION cached at $BIN_DIR"
echo "$BIN_DIR"
