#!/usr/bin/env bash
# The local sandbox: builds what is missing, then starts a Kubernetes control plane (etcd,
# kube-apiserver, kube-controller-manager for pod CIDRs; see scripts/control-plane.sh), the
# Hetzner Cloud simulator (a network and 3 servers), hcloud-ccm, and 3 kubelet-like Nodes.
# Arguments go to the sandbox, e.g. --exit-after-demo.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "==> control-plane binaries (the first run builds them from Go modules, about 12 minutes on 2 cores, with the module downloads)" >&2
scripts/control-plane.sh >/dev/null
echo "==> building hcloud-ccm and the sandbox" >&2
cargo build -p hcloud-ccm -p hcloud-ccm-sandbox
exec cargo run --quiet -p hcloud-ccm-sandbox -- "$@"
