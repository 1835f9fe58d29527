#!/usr/bin/env bash
# Builds tools/kubernetes/lease-holder (a client-go leader-election participant used by the
# hand-over tests) in the wrapper module tools/kubernetes, so with the client-go of the Kubernetes
# version the tests run, and caches the binary beside the control plane's.
#
# Usage: scripts/lease-holder.sh     # ensure the binary, print its path on the last line
# Idempotent: rebuilds only when main.go or the module's go.sum changed.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN_DIR="$(scripts/control-plane.sh --print-dir)"
sum="$(cat tools/kubernetes/lease-holder/main.go tools/kubernetes/go.sum | sha256sum | cut -c1-16)"
binary="$BIN_DIR/lease-holder-$sum"
if [[ ! -x "$binary" ]]; then
    command -v go >/dev/null 2>&1 || { printf '[lease-holder] no go on PATH\n' >&2; exit 1; }
    mkdir -p "$BIN_DIR"
    (cd tools/kubernetes && CGO_ENABLED=0 go build -trimpath -o "$binary.tmp" ./lease-holder) >&2
    mv "$binary.tmp" "$binary"
fi
echo "$binary"
