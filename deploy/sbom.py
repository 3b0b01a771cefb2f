#!/usr/bin/env python3
"""A CycloneDX 1.5 SBOM (JSON) of what the shipped binary is built from.

    cargo metadata --format-version 1 --locked \\
        --filter-platform x86_64-unknown-linux-gnu \\
        --filter-platform aarch64-unknown-linux-gnu |
      deploy/sbom.py VERSION > gpu-exporter-VERSION.cdx.json

deploy/release.sh runs it. The components are the crates that
gpu-exporter's normal and build dependencies reach in Cargo's resolve
(dev-dependencies, the fake NVML and the benches are left out), each
with its licence, its package URL and the SHA-256 that Cargo.lock pins;
`dependencies` is the graph between them. Written here rather than with
cargo-cyclonedx, which takes minutes to install (docs/deploy.md, "Releases").
The binaries carry the same list themselves (cargo auditable).
"""
import json
import os
import sys
import tomllib
import uuid
from datetime import datetime, timezone


def main():
    version = sys.argv[1]
    meta = json.load(sys.stdin)
    root_dir = meta["workspace_root"]
    with open(os.path.join(root_dir, "Cargo.lock"), "rb") as f:
        lock = tomllib.load(f)
    checksums = {
        (p["name"], p["version"]): p["checksum"]
        for p in lock.get("package", [])
        if "checksum" in p
    }
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = next(
        p["id"]
        for p in meta["packages"]
        if p["name"] == "gpu-exporter" and p["id"] in meta["workspace_members"]
    )

    def shipped_deps(node_id):
        for dep in nodes[node_id]["deps"]:
            if any(k["kind"] in (None, "build") for k in dep["dep_kinds"]):
                yield dep["pkg"]

    reached, todo = {root}, [root]
    while todo:
        for dep in shipped_deps(todo.pop()):
            if dep not in reached:
                reached.add(dep)
                todo.append(dep)

    def ref(pid):
        p = packages[pid]
        return f"pkg:cargo/{p['name']}@{p['version']}"

    def component(pid, kind):
        p = packages[pid]
        c = {
            "type": kind,
            "bom-ref": ref(pid),
            "name": p["name"],
            "version": p["version"] if pid != root else version,
            "purl": ref(pid),
        }
        if p.get("description"):
            c["description"] = p["description"].strip()
        if p.get("license"):
            c["licenses"] = [{"expression": p["license"]}]
        sha = checksums.get((p["name"], p["version"]))
        if sha:
            c["hashes"] = [{"alg": "SHA-256", "content": sha}]
        return c

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    stamp = datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    deps = sorted(reached - {root}, key=ref)
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": "urn:uuid:"
        + str(uuid.uuid5(uuid.NAMESPACE_URL, f"gpu-exporter/{version}")),
        "version": 1,
        "metadata": {
            "timestamp": stamp,
            "tools": {"components": [{"type": "application", "name": "deploy/sbom.py"}]},
            "component": component(root, "application"),
        },
        "components": [component(d, "library") for d in deps],
        "dependencies": [
            {"ref": ref(n), "dependsOn": sorted({ref(d) for d in shipped_deps(n)})}
            for n in [root] + deps
        ],
    }
    json.dump(bom, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


main()
