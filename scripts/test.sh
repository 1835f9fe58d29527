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
phase "cargo test: build"
results="$(mktemp)"
chaos_log="$(mktemp)"
bench_log="$(mktemp)"
image_log="$(mktemp)"
# On any exit: no runner left behind, no temporary file.
trap 'kill $(jobs -p) 2>/dev/null || true; rm -f "$results" "$chaos_log" "$bench_log" "$image_log"' EXIT
cargo test --workspace --locked --no-run
# `cargo test` built the binaries below (the integration tests of their crates run them).
bin="${CARGO_TARGET_DIR:-target}/debug"
# The chaos runner and the benchmark mostly wait, each on a control plane of its own: they run
# beside the tests. Fixed seeds (see docs/reliability.md): the runner fails on a broken
# invariant and on the API token or the Robot password in any log line, event, metric or error
# of the run. The benchmark fails when a request count is over its bar.
phase "chaos runner (fixed seeds) and benchmark runner (small scale), in the background"
"$bin/hcloud-ccm-chaos" --jobs 2 --out "${CARGO_TARGET_DIR:-target}/chaos" \
    --seed 3 --seed 9 --seed 23 --seed 20 --seed 30 --seed 34 --seed 61 >"$chaos_log" 2>&1 &
chaos_pid=$!
"$bin/hcloud-ccm-bench" --scale 0.02 --check >"$bench_log" 2>&1 &
bench_pid=$!
# The image test compiles (a static binary) where the other tests mostly wait: it runs beside
# them, and the workspace run skips exactly its tests (by their full names, which it lists).
phase "image test, in the background"
image_skips=()
while IFS= read -r name; do
    image_skips+=(--skip "$name")
done < <(cargo test --workspace --locked --test image -- --list --format terse 2>/dev/null |
    sed -n 's/: test$//p')
((${#image_skips[@]} > 0)) || { phase "the image test lists no tests"; exit 1; }
cargo test --workspace --locked --test image >"$image_log" 2>&1 &
image_pid=$!
phase "cargo test"
# The tests that drive a control plane mostly wait (for the apiserver, the simulator, a CCM
# process): more of them at once than there are cores keeps both cores busy.
test_status=0
RUST_TEST_THREADS="${RUST_TEST_THREADS:-6}" cargo test --workspace --locked -- --exact "${image_skips[@]}" 2>&1 |
    tee "$results" || test_status=$?
image_status=0
wait "$image_pid" || image_status=$?
phase "image test's report"
cat "$image_log"
grep '^test result:' "$image_log" >>"$results" || true
bench_status=0
wait "$bench_pid" || bench_status=$?
phase "benchmark runner's report"
cat "$bench_log"
chaos_status=0
wait "$chaos_pid" || chaos_status=$?
phase "chaos runner's report"
cat "$chaos_log"
if ((test_status != 0 || image_status != 0 || bench_status != 0 || chaos_status != 0)); then
    phase "failed: cargo test exit $test_status, image test exit $image_status, benchmark exit $bench_status, chaos runner exit $chaos_status"
    exit 1
fi
# One closing line for the whole run (the benchmark's table came after cargo's own).
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "tests: %d passed, %d failed\n", passed, failed }' "$results"
phase "done"
