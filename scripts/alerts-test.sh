#!/usr/bin/env bash
# Checks and unit-tests the Prometheus alert rules in deploy/monitoring with promtool (from
# Debian's prometheus package, installed when missing; its service is not started).
#
# Usage: scripts/alerts-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[alerts] %s\n' "$*" >&2; }

if ! command -v promtool >/dev/null 2>&1; then
    SUDO=""
    if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi
    log "installing prometheus (for promtool)"
    $SUDO apt-get update -qq >&2
    # policy-rc.d-free containers: the package's service may fail to start; promtool does not care.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >&2
fi

cd deploy/monitoring
promtool check rules alerts.yaml >&2
promtool test rules alerts_test.yaml >&2
# Every rule has a test case of its own.
rules=0
for alert in $(sed -n 's/^      - alert: *//p' alerts.yaml); do
    grep -q "alertname: $alert\$" alerts_test.yaml || { log "$alert has no unit test in alerts_test.yaml"; exit 1; }
    rules=$((rules + 1))
done
((rules > 0)) || { log "no alert rules found in alerts.yaml"; exit 1; }
log "$rules alert rules checked and unit-tested"
