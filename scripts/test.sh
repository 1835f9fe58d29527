#!/usr/bin/env bash
# The whole test suite, from a fresh machine: control-plane binaries (built once, cached),
# formatting, lints, then every unit, integration and doc test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/control-plane.sh >/dev/null
# Real Helm for the chart tests (a pinned helm-python-sdk in a cached virtualenv).
scripts/helm.sh --install >/dev/null

# On CI the clone is fresh every time; keep compiled dependencies beside the apiserver cache.
if [[ "${CI:-}" == "true" && -z "${CARGO_TARGET_DIR:-}" ]]; then
    CARGO_TARGET_DIR="$(scripts/control-plane.sh --print-dir)/../../ci-target"
    export CARGO_TARGET_DIR
    # A build from scratch gains nothing from incremental state (gigabytes of it).
    export CARGO_INCREMENTAL=0
fi

echo "[test] cargo fmt --check" >&2
cargo fmt --all --check
echo "[test] cargo clippy" >&2
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "[test] cargo doc (broken links and other documentation warnings fail)" >&2
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
echo "[test] Kubernetes client types for the oldest and newest claimed version" >&2
scripts/k8s-versions.sh
echo "[test] alert rules: promtool check rules, promtool test rules" >&2
scripts/alerts-test.sh
echo "[test] cargo test" >&2
results="$(mktemp)"
trap 'rm -f "$results"' EXIT
cargo test --workspace --locked 2>&1 | tee "$results"
echo "[test] benchmark runner, small scale (fails when a request count is over its bar)" >&2
cargo build --locked -p hcloud-ccm -p hcloud-ccm-bench -p hcloud-ccm-chaos
"${CARGO_TARGET_DIR:-target}/debug/hcloud-ccm-bench" --scale 0.02 --check
# Fixed seeds (see docs/reliability.md): fails on a broken invariant and on the API token or the
# Robot password in any log line, event, metric or error of the run.
echo "[test] chaos runner, fixed seeds (fails on a broken invariant or a leaked secret)" >&2
"${CARGO_TARGET_DIR:-target}/debug/hcloud-ccm-chaos" --jobs 3 --out "${CARGO_TARGET_DIR:-target}/chaos" \
    --seed 3 --seed 9 --seed 23 --seed 20 --seed 30 --seed 34 --seed 61
# One closing line for the whole run (the benchmark's table came after cargo's own).
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$results"
