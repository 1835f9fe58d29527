#!/usr/bin/env bash
# The binary's end-to-end tests on the oldest Kubernetes this project supports (tools/kubernetes-oldest,
# the version README and docs/deploy.md claim as the lowest); the test command runs them on the newest
# (tools/kubernetes) every time. Builds that control plane once (13 min 26 s on 2 cores the first
# time, other work beside it; cached by version like the newest), then runs
# `cargo test -p hcloud-ccm --test it` against it.
#
# Usage: scripts/oldest-kubernetes.sh [extra cargo test arguments, e.g. a test name filter]
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir="$(KUBERNETES_MODULE=tools/kubernetes-oldest scripts/control-plane.sh | tail -n1)"
version="$("$bin_dir/kube-apiserver" --version)"
printf '[oldest-kubernetes] the binary'"'"'s end-to-end tests on %s (%s)\n' "$version" "$bin_dir" >&2
# The client-go participant of the lease hand-over test is built with the newest client-go
# (scripts/lease-holder.sh), as a newer controller manager would run against an older apiserver.
KUBE_HARNESS_BIN_DIR="$bin_dir" RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}" \
    cargo test --locked -p hcloud-ccm --test it "$@"
