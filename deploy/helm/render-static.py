#!/usr/bin/env python3
"""The chart's generated parts, and the static manifests rendered from it.

    deploy/helm/render-static.py [--check] [--bin GPU_EXPORTER]

1. With --bin: the chart's rule files (files/rules.yml and
   files/rules-runbook-url.yml) from `GPU_EXPORTER --print-rules`, the job
   and the runbook host left as placeholders the chart fills in.
2. deploy/kubernetes/{daemonset,daemonset-attribution,service,
   servicemonitor,podmonitor,podmonitor-engines,prometheusrule}.yaml: the chart rendered as
   release gpu-exporter in namespace gpu-exporter, with a header. The
   chart is their one source: edit it and run this again.

--check writes nothing and exits 1 naming each file that differs
(tests/integration/helm.rs runs it). Needs PyPI helm-python-sdk (Helm's
own Go SDK, no helm binary); dcgm-dropin.yaml and sidecar-example.yaml
are hand-written.
"""
import argparse
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy/helm/gpu-exporter"
K8S = ROOT / "deploy/kubernetes"
NAME = NAMESPACE = "gpu-exporter"

# The rule files' placeholders, replaced by templates/prometheusrule.yaml.
RULES = {
    "rules.yml": ["--alerts.scrape-job", "__SCRAPE_JOB__"],
    "rules-runbook-url.yml": [
        "--alerts.scrape-job", "__SCRAPE_JOB__",
        "--alerts.runbook-base-url", "https://runbook-base.invalid/",
    ],
}

HEAD = (
    "# Rendered from the Helm chart deploy/helm/gpu-exporter by\n"
    "# deploy/helm/render-static.py (release gpu-exporter, namespace\n"
    "# gpu-exporter); do not edit. `helm template` renders any other\n"
    "# setting (docs/helm.md).\n"
)

# file: (values, templates in order, what the file is for)
STATIC = {
    "daemonset.yaml": (
        {"namespace": {"create": True}},
        ["namespace.yaml", "daemonset.yaml"],
        "# gpu-exporter on every GPU node. Apply with service.yaml, servicemonitor.yaml\n"
        "# and prometheusrule.yaml; tests/integration/deploy.rs validates them offline.\n",
    ),
    "daemonset-attribution.yaml": (
        {"namespace": {"create": True}, "attribution": {"enabled": True}},
        ["namespace.yaml", "daemonset.yaml"],
        "# gpu-exporter with attribution (attribution.enabled): who uses each GPU.\n"
        "# Apply INSTEAD of daemonset.yaml (same names, so service.yaml and\n"
        "# servicemonitor.yaml select it), on clusters that want gpu_pod_info and\n"
        "# per-process memory. What it grants beyond daemonset.yaml, and why:\n"
        "#\n"
        "# 1. runAsUser 0 (root, with every capability dropped): the kubelet's\n"
        "#    pod-resources socket is root's (srwxr-xr-x root:root), and connecting\n"
        "#    to a unix socket needs write permission on it. Root owns it, so no\n"
        "#    capability (not even DAC_OVERRIDE) is needed, only the uid.\n"
        "# 2. A read-only hostPath of /var/lib/kubelet/pod-resources: the socket\n"
        "#    itself, nothing else of the kubelet's directory. A read-only mount is\n"
        "#    enough to connect.\n"
        "# 3. hostPID: NVML names the processes on a GPU by their host PID. In the\n"
        "#    host's PID namespace the exporter reads /proc/<pid>/cgroup (readable by\n"
        "#    anyone) for container_id and pod_uid; outside it those labels are left\n"
        "#    out. attribution.hostPID=false and attribution.processes=false if you\n"
        "#    want pods only.\n"
        "#\n"
        "# Together they need the `privileged` Pod Security level (hostPath, hostPID\n"
        "# and running as root are outside `baseline`); daemonset.yaml needs it only\n"
        "# for SYSLOG.\n",
    ),
    "service.yaml": ({}, ["service.yaml"], ""),
    "servicemonitor.yaml": ({}, ["servicemonitor.yaml"], ""),
    "podmonitor.yaml": ({"podMonitor": {"enabled": True}}, ["podmonitor.yaml"], ""),
    "podmonitor-engines.yaml": (
        {"engines": {"podMonitor": {"enabled": True}}}, ["podmonitor-engines.yaml"], "",
    ),
    "prometheusrule.yaml": ({}, ["prometheusrule.yaml"], ""),
}


def render(values):
    """The chart's manifests for `values`, by template file name."""
    import helm_python as helm

    with helm.Chart.load(CHART) as chart:
        out = chart.render(values, name=NAME, namespace=NAMESPACE)
    return {k.rsplit("/", 1)[1]: v for k, v in out.items()}


def rules(bin_path):
    """The chart's rule files, from the binary's --print-rules."""
    files = {}
    for name, flags in RULES.items():
        out = subprocess.run([bin_path, "--print-rules", *flags],
                             check=True, capture_output=True)
        files[CHART / "files" / name] = out.stdout
    return files


def statics():
    """The static manifests, rendered from the chart as it is on disk."""
    files = {}
    for name, (values, templates, about) in STATIC.items():
        rendered = render(values)
        docs = [rendered[t].strip("\n") for t in templates]
        files[K8S / name] = (HEAD + about + "\n---\n".join(docs) + "\n").encode()
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare, write nothing")
    ap.add_argument("--bin", help="the gpu-exporter whose --print-rules the chart carries")
    args = ap.parse_args()
    try:
        import helm_python  # noqa: F401
    except ImportError:
        sys.exit("render-static.py: needs PyPI helm-python-sdk (pip install helm-python-sdk==0.2.2)")
    stale = []
    # The rules first: the static manifests are rendered from the chart's
    # files as written.
    for make in ([lambda: rules(args.bin)] if args.bin else []) + [statics]:
        for path, data in make().items():
            if path.exists() and path.read_bytes() == data:
                continue
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_bytes(data)
    for s in stale:
        print(("stale: " if args.check else "wrote: ") + s)
    if args.check and stale:
        sys.exit(f"run deploy/helm/render-static.py --bin target/debug/gpu-exporter: {len(stale)} stale")


if __name__ == "__main__":
    main()
