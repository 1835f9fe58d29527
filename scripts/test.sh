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

# Each phase's start, in seconds since the command began (README: "How long the tests take").
phase() { printf '[test +%ss] %s\n' "$SECONDS" "$*" >&2; }
SECONDS=0

phase "cargo fmt --check"
cargo fmt --all --check
phase "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
phase "cargo doc (broken links and other documentation warnings fail)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
phase "Kubernetes client types for the oldest and newest claimed version"
scripts/k8s-versions.sh
phase "alert rules: promtool check rules, promtool test rules"
scripts/alerts-test.sh
phase "cargo test"
results="$(mktemp)"
chaos_log="$(mktemp)"
trap 'rm -f "$results" "$chaos_log"' EXIT
# The tests that drive a control plane mostly wait (for the apiserver, the simulator, a CCM
# process): more of them at once than there are cores keeps both cores busy.
RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}" cargo test --workspace --locked 2>&1 | tee "$results"
# `cargo test` built the binaries below (the integration tests of their crates run them).
bin="${CARGO_TARGET_DIR:-target}/debug"
# The chaos runner and the benchmark both mostly wait, each on a control plane of its own:
# they run side by side. Fixed seeds (see docs/reliability.md): the runner fails on a broken
# invariant and on the API token or the Robot password in any log line, event, metric or
# error of the run.
phase "chaos runner, fixed seeds, in the background (fails on a broken invariant or a leaked secret)"
"$bin/hcloud-ccm-chaos" --jobs 2 --out "${CARGO_TARGET_DIR:-target}/chaos" \
    --seed 3 --seed 9 --seed 23 --seed 20 --seed 30 --seed 34 --seed 61 >"$chaos_log" 2>&1 &
chaos_pid=$!
phase "benchmark runner, small scale (fails when a request count is over its bar)"
bench_status=0
"$bin/hcloud-ccm-bench" --scale 0.02 --check || bench_status=$?
chaos_status=0
wait "$chaos_pid" || chaos_status=$?
phase "chaos runner's report"
cat "$chaos_log"
if ((bench_status != 0 || chaos_status != 0)); then
    phase "failed: benchmark exit $bench_status, chaos runner exit $chaos_status"
    exit 1
fi
# One closing line for the whole run (the benchmark's table came after cargo's own).
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$results"
phase "done"
