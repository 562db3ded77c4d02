#!/usr/bin/env python
"""Controller-side cost of the version matrix, the verify checks and the fleet report.

    .venv/bin/python benchmarks/matrix_and_report.py [--hosts 1000]

Judges a full declaration the way preflight does (every rule fires its
lookups), judges a converged host's layers the way verify does, and renders
the fleet report (HTML and Markdown) for N hosts of 8 MIG-partitioned GPUs.
Host data comes from the simulator's mixed-MIG DGX A100 through nvml_info.
Prints the median of several runs; nothing is asserted (a script, not a test).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "build" / "collections"))

# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.nvidia.plugins.module_utils._matrix.evaluate import Matrix
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _report, _verify
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import nvml_sim

DESIRED = {
    "driver_branch": "580",
    "driver_version": "580.95.05",
    "driver_kernel_module": "auto",
    "container_toolkit_version": "1.17.8",
    "container_runtime_engine": "containerd",
    "container_runtime_cdi": True,
    "cdi_spec_dir": "/etc/cdi",
    "crictl_version": "v1.33.0",
    "crictl_kubernetes_version": "1.33",
    "mig_label": "all-1g.5gb",
}


def timed(func, repeat: int) -> float:
    samples = []
    for _run in range(repeat):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def nvml_facts() -> dict:
    with tempfile.TemporaryDirectory() as work:
        node = nvml_sim.SimNode(Path(work), "dgx-a100-mig-mixed")
        outcome = node.run("nvml_info", gather_mig_profiles=True)
    if outcome["kind"] != "exit":
        raise SystemExit("nvml_info failed: {0}".format(outcome))
    return outcome["result"]["nvml"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=1000)
    args = parser.parse_args()
    subprocess.run(["make", "-s", "-C", str(ROOT / "tests" / "nvml-sim")], check=True)
    nvml = nvml_facts()
    installed = {"nvml": nvml, "versions": {"containerd": "1.7.24"}}
    matrix = Matrix()

    per_host = timed(lambda: matrix.evaluate(DESIRED, installed, ["12.4", "12.8", "13.0"]), 200)
    build = timed(Matrix, 200)

    declared = {"managed": True, "reason": "benchmark", "vars": {"driver_version": nvml["driver_version"]}}

    def host_report(name: str) -> dict:
        checks = [
            _verify.check_driver(declared, nvml),
            _verify.check_mig(declared, False),
            _verify.check_matrix({"findings": matrix.evaluate(DESIRED, installed, ["12.4"])[1]}),
        ]
        return _verify.build_report(name, checks, nvml, {"driver": nvml["driver_version"]})

    checks = timed(lambda: host_report("gpu-0001"), 50)
    reports = [json.loads(json.dumps(host_report("gpu-{0:04d}".format(i)))) for i in range(args.hosts)]
    html = timed(lambda: _report.render_html(reports), 3)
    markdown = timed(lambda: _report.render_markdown(reports), 3)
    size = len(_report.render_html(reports).encode())

    print("version matrix, one host (all rules, 3 CUDA versions): {0:.2f} ms".format(per_host * 1000))
    print("matrix construction (tables, no user rows):            {0:.2f} ms".format(build * 1000))
    print("verify checks + report, one host:                      {0:.2f} ms".format(checks * 1000))
    print("fleet report HTML, {0} hosts x 8 GPUs:               {1:.2f} s ({2:.1f} MiB)".format(args.hosts, html, size / 2**20))
    print("fleet report Markdown, {0} hosts:                    {1:.2f} s".format(args.hosts, markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
