# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the health reads add to nvml_info on an 8-GPU simulated node.

    .venv/bin/python benchmarks/nvml_health.py [--fixture hgx-h100-8x80gb] [--repeat N] [--module-repeat M]

Two measurements, each gather_health=false against gather_health=true, the
runs interleaved so that load on the machine hits both alike:

* in-process -- NvmlFactsCollector.collect() against the simulated
  libnvidia-ml.so.1 (one NVML session, every GPU);
* module     -- the nvml_info module in a fresh interpreter per run
  (tests/unit/plugins/module_runner), as Ansible runs it, minus the transport;
* binding    -- read_health on 8 GPUs against the unit tests' fake library
  (FakeNvml: every entry point a Python callback behind real ctypes
  marshalling, an NVLink GPU with 18 links). Python callbacks are slower than
  C, so this bounds what the binding itself costs per node whatever the
  simulator exports.

Prints min / median / max per case and the added median, and how many of the
health entry points the built simulator exports (a simulator without them
answers every health read with FUNCTION_NOT_FOUND, which costs next to
nothing and makes the figure meaningless). Exits 1 when the added median
exceeds the 0.5 s budget of issue 20.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _collection import ROOT  # pylint: disable=wrong-import-order

SIM = os.path.join(ROOT, "tests", "nvml-sim")
LIBRARY = os.path.join(SIM, "build", "libnvidia-ml.so.1")

BUDGET_S = 0.5
RUNNER = "ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner"


# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import health as nvml_health
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import library as nvml_library
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import session as nvml_session
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import values as nvml_values
from ansible_collections.gpufleet.nvidia.plugins.modules import nvml_info
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_utils import test_nvml_health as fake


def render(fixture: str, workdir: str) -> dict[str, str]:
    subprocess.run(["make", "-s", "-C", SIM], check=True)
    state = os.path.join(workdir, "state")
    subprocess.run(
        [sys.executable, os.path.join(SIM, "simctl.py"), "render", os.path.join(SIM, "nodes", fixture + ".yml"), "-o", state, "--booted"], check=True
    )
    return {"NVML_SIM_STATE": state, "NVML_SIM_RUNDIR": os.path.join(workdir, "run")}


def in_process(gather_health: bool) -> float:
    start = time.perf_counter()
    facts = nvml_info.NvmlFactsCollector(LIBRARY, gather_health=gather_health).collect()
    elapsed = time.perf_counter() - start
    if len(facts["gpus"]) != 8 or any(gpu["lost"] for gpu in facts["gpus"]):
        raise RuntimeError("expected 8 readable GPUs, got {0}".format(facts["gpus"]))
    return elapsed


def as_module(gather_health: bool, workdir: str, env: dict[str, str]) -> float:
    args, out = os.path.join(workdir, "args.json"), os.path.join(workdir, "out.json")
    with open(args, "w", encoding="utf-8") as handle:
        json.dump({"library": LIBRARY, "gather_health": gather_health}, handle)
    child_env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **env)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", RUNNER, "nvml_info", args, out], env=child_env, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    with open(out, encoding="utf-8") as handle:
        outcome = json.load(handle)
    if outcome["kind"] != "exit":
        raise RuntimeError("nvml_info failed: {0}".format(outcome))
    return elapsed


def binding(repeat: int) -> list[float]:
    library = fake.FakeNvml(fake.HOPPER)
    real_cdll = nvml_library.ctypes.CDLL
    nvml_library.ctypes.CDLL = lambda path: library  # type: ignore[assignment,misc]
    try:
        session = nvml_session.NvmlSession("fake")
    finally:
        nvml_library.ctypes.CDLL = real_cdll  # type: ignore[misc]
    samples = []
    for _sample in range(repeat):
        start = time.perf_counter()
        for _gpu in range(8):
            nvml_health.read_health(session, nvml_values.Device(fake.HANDLE))
        samples.append(time.perf_counter() - start)
    calls = len(library.calls) // repeat
    print("binding: read_health x 8 GPUs against the fake library, {0} NVML calls per node".format(calls))
    print("  min {0:7.4f}  median {1:7.4f}  max {2:7.4f} s  (n={3})".format(min(samples), statistics.median(samples), max(samples), repeat))
    return samples


def summary(name: str, off: list[float], on: list[float]) -> float:
    def row(label: str, samples: list[float]) -> str:
        return "  {0:<22} min {1:7.4f}  median {2:7.4f}  max {3:7.4f} s  (n={4})".format(
            label, min(samples), statistics.median(samples), max(samples), len(samples)
        )

    added = statistics.median(on) - statistics.median(off)
    print(name)
    print(row("gather_health=false", off))
    print(row("gather_health=true", on))
    print("  added (median)         {0:+.4f} s  (budget {1} s)".format(added, BUDGET_S))
    return added


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", default="hgx-h100-8x80gb", help="an 8-GPU node in tests/nvml-sim/nodes")
    parser.add_argument("--repeat", type=int, default=50, help="in-process runs per case")
    parser.add_argument("--module-repeat", type=int, default=10, help="module runs per case")
    opts = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="nvml-health-bench-") as workdir:
        env = render(opts.fixture, workdir)
        os.environ.update(env)
        library = ctypes.CDLL(LIBRARY)
        exported = [name for name in nvml_health.HEALTH_CALLS if hasattr(library, name)]
        print(
            "fixture {0}; the simulator exports {1} of {2} health entry points{3}".format(
                opts.fixture, len(exported), len(nvml_health.HEALTH_CALLS), "" if exported else " (the figure below only measures failed symbol lookups)"
            )
        )

        in_process(True)  # warm: first symbol resolution, page cache
        off, on = [], []
        for _sample in range(opts.repeat):
            off.append(in_process(False))
            on.append(in_process(True))
        added = [summary("in-process NvmlFactsCollector.collect()", off, on)]

        off, on = [], []
        for _sample in range(opts.module_repeat):
            off.append(as_module(False, workdir, env))
            on.append(as_module(True, workdir, env))
        added.append(summary("nvml_info module (fresh interpreter per run)", off, on))
    added.append(statistics.median(binding(opts.repeat)))
    return 1 if max(added) > BUDGET_S else 0


if __name__ == "__main__":
    sys.exit(main())
