#!/usr/bin/env bash
# Builds hcloud-ccm's Kubernetes client types (k8s-openapi) for the oldest and the newest
# Kubernetes version the documentation claims (docs/deploy.md, "Supported Kubernetes versions"):
# `cargo check` of the binary, its library and its tests for each, in a target directory of its
# own per version (switching k8s-openapi's version rebuilds everything that depends on it).
#
# Usage: scripts/k8s-versions.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# The oldest claimed version is k8s-openapi's "earliest" (1.33), which every other command of
# the test command builds already (clippy checks all targets with it); only the newest needs a
# build of its own here.
OLDEST=1.33
NEWEST=1.37
TARGET="${CARGO_TARGET_DIR:-target}/k8s-versions"

for version in "$NEWEST"; do
    printf '[k8s-versions] client types for Kubernetes %s\n' "$version" >&2
    # .cargo/config.toml sets K8S_OPENAPI_ENABLED_VERSION for the library crates; the variable
    # given here wins, and the binary's own feature names the same version.
    K8S_OPENAPI_ENABLED_VERSION="$version" CARGO_TARGET_DIR="$TARGET/$version" \
        cargo check --quiet --locked -p hcloud-ccm --all-targets \
        --no-default-features --features "k8s-openapi/v1_${version#1.}"
done
printf '[k8s-versions] Kubernetes %s to %s: the client types build\n' "$OLDEST" "$NEWEST" >&2
