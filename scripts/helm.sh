#!/usr/bin/env bash
# Real Helm for the tests, without a helm binary: PyPI's helm-python-sdk (a pinned version that
# embeds Helm's Go library) in a virtualenv cached beside the apiserver, created on first use.
#
# Usage: scripts/helm.sh --install      # ensure the virtualenv, print its python on the last line
#        scripts/helm.sh render         # JSON request on stdin, JSON answer on stdout
#
# The request: {"chart": DIR, "release": NAME, "namespace": NS, "values": {...},
# "api_versions": ["group/version/Kind", ...]}. The answer: {"helm": VERSION, "templates":
# {"chart/templates/file.yaml": "rendered text", ...}} or {"error": "Helm's message"} with exit 1.
# Offline, as `helm template --api-versions ...`: no cluster is contacted.
set -euo pipefail
cd "$(dirname "$0")/.."

SDK_VERSION=0.2.2   # embeds Helm 4.2.3
CACHE_ROOT="${HCLOUD_CCM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hcloud-ccm-rs}"
VENV="$CACHE_ROOT/helm-python-sdk/$SDK_VERSION"

log() { printf '[helm] %s\n' "$*" >&2; }

ensure_venv() {
    if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import helm_python' 2>/dev/null; then
        return
    fi
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
        { log "helm-python-sdk needs Python 3.10 or later: $(python3 --version)"; exit 1; }
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        log "installing python3-venv"
        SUDO=""
        if [[ "$(id -u)" != "0" ]]; then SUDO="sudo"; fi
        $SUDO apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >&2
    fi
    log "creating $VENV with helm-python-sdk==$SDK_VERSION"
    rm -rf "$VENV"
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV" >&2
    "$VENV/bin/pip" install --quiet "helm-python-sdk==$SDK_VERSION" >&2
}

case "${1:-}" in
    --install)
        ensure_venv
        echo "$VENV/bin/python"
        ;;
    render)
        ensure_venv
        exec "$VENV/bin/python" scripts/helm_render.py
        ;;
    *)
        log "usage: $0 --install | render"
        exit 2
        ;;
esac
