#!/usr/bin/env python3
"""Helm, through PyPI helm-python-sdk (Helm's Go SDK in a C library, no helm
binary), for tests/integration/helm.rs. Each command prints what the test
asserts on; a Helm error is one line on stderr and exit status 1.

    chart.py lint CHART VALUES_JSON             the lint report, JSON
    chart.py render CHART VALUES_JSON NAME NAMESPACE OUTDIR
                                                each non-empty manifest to
                                                OUTDIR/<template>, names printed
    chart.py package CHART DEST VERSION         the .tgz's path
    chart.py push TGZ oci://HOST/PATH           (plain HTTP: a loopback registry)
    chart.py pull oci://HOST/PATH/NAME VERSION DEST
"""
import json
import os
import sys

import helm_python as helm

helm.disable_logging()


def main(cmd, *args):
    if cmd == "lint":
        chart, values = args
        report = helm.lint(chart, json.loads(values), strict=True,
                           namespace="gpu-exporter", kube_version="v1.30.0")
        print(json.dumps(report))
    elif cmd == "render":
        chart, values, name, namespace, out = args
        with helm.Chart.load(chart) as c:
            manifests = c.render(json.loads(values), name=name, namespace=namespace)
        os.makedirs(out, exist_ok=True)
        for path, text in sorted(manifests.items()):
            if text.strip() and not path.endswith("NOTES.txt"):
                base = path.rsplit("/", 1)[1]
                with open(os.path.join(out, base), "w") as f:
                    f.write(text)
                print(base)
    elif cmd == "package":
        chart, dest, version = args
        print(helm.package(chart, destination=dest, version=version, app_version=version))
    elif cmd == "push":
        tgz, remote = args
        print(json.dumps(helm.push(tgz, remote, plain_http=True)))
    elif cmd == "pull":
        ref, version, dest = args
        print(json.dumps(helm.pull(ref, version=version, destination=dest, plain_http=True)))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    try:
        main(*sys.argv[1:])
    except helm.HelmError as e:
        print(f"{type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        sys.exit(1)
    except TypeError:
        sys.exit(__doc__)
