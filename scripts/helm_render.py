"""Render a chart with Helm's own library (helm-python-sdk); see scripts/helm.sh."""

import contextlib
import json
import os
import sys

import helm_python as helm
from helm_python import _native


@contextlib.contextmanager
def quiet_stderr():
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def main() -> int:
    request = json.load(sys.stdin)
    options = {
        "name": request["release"],
        "namespace": request["namespace"],
        # As `helm install`/`helm template`: .Release.IsInstall is true.
        "is_install": True,
    }
    if request.get("api_versions"):
        # The render call takes Helm's --api-versions; the Python wrapper does not expose it.
        options["api_versions"] = request["api_versions"]
    if request.get("kube_version"):
        options["kube_version"] = request["kube_version"]
    try:
        with quiet_stderr():
            # Helm's loader logs "found symbolic link in path" for files/alerts.yaml; errors
            # come back as exceptions, not on stderr.
            chart = helm.Chart.load(request["chart"])
        with chart:
            rendered = _native.call_string(
                "helm_render",
                chart._raw(),
                json.dumps(request.get("values") or {}),
                json.dumps(options),
            )
    except helm.HelmError as error:
        json.dump({"error": str(error)}, sys.stdout)
        return 1
    json.dump({"helm": helm.helm_sdk_version(), "templates": json.loads(rendered)}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
