# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How long planning a MIG layout for a whole 8-GPU node takes.

    .venv/bin/python benchmarks/mig_planner.py [--repeat N]

Two measurements:

* planner  -- mig_plan.plan_gpu for all 8 GPUs of a node, from GPU states built
  from simulator fixtures (no NVML): the search itself.
* nvml     -- MigController.plan() against the simulated libnvidia-ml.so.1,
  i.e. what the mig_config module does before it changes anything: read
  every GPU (profiles, placements, instances, processes) and plan.

Cases go from the common (MIG off -> all-balanced) to the expensive (every
GPU full of instances that partly fit the new layout, so the search has to
compare many layouts to keep the most). Prints min / median / max per case
and exits 1 if any whole-node median exceeds the 1 s budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
import typing as t

from _collection import ROOT  # pylint: disable=wrong-import-order

SIM = os.path.join(ROOT, "tests", "nvml-sim")

BUDGET_S = 1.0


# pylint: disable=wrong-import-position
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import apply as mig_apply
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import config as mig_config
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import plan as mig_plan
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import state as mig_state
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import session as nvml_session
from ansible_collections.gpufleet.nvidia.tests.unit.plugins import mig_expected


def simctl() -> t.Any:
    spec = importlib.util.spec_from_file_location("bench_simctl", os.path.join(SIM, "simctl.py"))
    if spec is None or spec.loader is None:
        raise RuntimeError("cannot load tests/nvml-sim/simctl.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def node_gpus(ctl: t.Any, fixture: str, mig_on: bool) -> list[mig_state.GpuState]:
    shown = ctl.show_state(ctl.render_node(os.path.join(SIM, "nodes", fixture + ".yml")), "", "")
    return [mig_expected.gpu_state(g, mig_enabled=True if mig_on else None) for g in shown["gpus"]]


def full_of(gpu: mig_state.GpuState, profile: mig_state.Profile) -> mig_state.GpuState:
    """The GPU with as many instances of `profile` as fit, each with its full compute instance."""
    instances = []
    for number, (start, size) in enumerate(profile.placements[: profile.instances]):
        ci = mig_state.ComputeInstanceState(0, profile.slices, 0)
        instances.append(mig_state.GpuInstanceState(100 + number, profile.id, start, size, (ci,)))
    return dataclasses.replace(gpu, gpu_instances=tuple(instances))


def cases(ctl: t.Any) -> list[tuple[str, list[mig_state.GpuState], list[dict[str, int]]]]:
    a100 = node_gpus(ctl, "dgx-a100-8x40gb", mig_on=True)
    a100 = [dataclasses.replace(g, gpu_instances=(), processes=()) for g in a100]
    layouts = mig_expected.layouts_for(a100[0])
    h100 = [dataclasses.replace(g, gpu_instances=()) for g in node_gpus(ctl, "hgx-h100-8x80gb", mig_on=True)]
    one = mig_expected.plain_profile(a100[0], 1)
    double = next(p for p in a100[0].profiles if p.slices == 1 and p.size == 2)
    two = mig_expected.plain_profile(a100[0], 2)
    churned = [full_of(g, one) for g in a100]
    mixed_now = node_gpus(ctl, "dgx-a100-mig-mixed", mig_on=False)
    return [
        ("8 x A100, empty -> all-balanced", a100, [layouts["all-balanced"]] * 8),
        ("8 x H100, empty -> all-1g", h100, [mig_expected.layouts_for(h100[0])["all-1g"]] * 8),
        ("8 x A100, 7 x 1g each -> 3 x 1g + 2 x 2g (keep the most)", churned, [{one.name: 3, two.name: 2}] * 8),
        ("8 x A100, 7 x 1g each -> 1 x 1g + 3 x 1g.10gb", churned, [{one.name: 1, double.name: 3}] * 8),
        (
            "mixed MIG node -> per-device layouts",
            mixed_now,
            [layouts[k] for k in ("all-1g", "all-balanced", "all-3g", "all-2g", "all-7g", "all-1g", "all-balanced", "all-3g")],
        ),
    ]


def plan_node(gpus: list[mig_state.GpuState], wanted: list[dict[str, int]]) -> int:
    steps = 0
    for gpu, devices in zip(gpus, wanted):
        entry = mig_config.parse_config({"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": devices}]}})["x"][0]
        steps += len(mig_plan.plan_gpu(gpu, mig_plan.resolve_target(gpu, entry)).steps())
    return steps


def measure(action: t.Callable[[], t.Any], repeat: int) -> list[float]:
    times = []
    for _round in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def nvml_case(ctl: t.Any, repeat: int) -> list[float]:
    """MigController.plan() through the simulated library: reads 8 GPUs, plans all of them."""
    subprocess.run(["make", "-s", "-C", SIM], check=True, stdout=subprocess.DEVNULL)
    work = tempfile.mkdtemp(prefix="mig-bench-")
    state, rundir = os.path.join(work, "state"), os.path.join(work, "run")
    with ctl.locked(state):
        ctl.write_state(state, ctl.render_node(os.path.join(SIM, "nodes", "dgx-a100-mig-mixed.yml")))
    ctl.mark_booted(rundir)
    os.environ.update(NVML_SIM_STATE=state, NVML_SIM_RUNDIR=rundir)
    os.environ.pop("NVML_SIM_EUID", None)
    config = {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}]}}
    entries = mig_config.parse_config(config)["x"]

    def once() -> None:
        with nvml_session.NvmlSession(os.path.join(SIM, "build", "libnvidia-ml.so.1")) as session:
            mig_apply.MigController(entries, "x", session).plan()

    return measure(once, repeat)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    ctl = simctl()
    rows = []
    for name, gpus, wanted in cases(ctl):
        rows.append(("planner", name, measure(lambda g=gpus, w=wanted: plan_node(g, w), args.repeat)))
    rows.append(("nvml", "mixed MIG node, read 8 GPUs + plan (simulated NVML)", nvml_case(ctl, args.repeat)))
    print("{0:<8} {1:<60} {2:>9} {3:>9} {4:>9}".format("kind", "case (whole 8-GPU node)", "min ms", "median", "max"))
    worst = 0.0
    for kind, name, times in rows:
        median = statistics.median(times)
        worst = max(worst, median)
        print("{0:<8} {1:<60} {2:>9.2f} {3:>9.2f} {4:>9.2f}".format(kind, name, min(times) * 1e3, median * 1e3, max(times) * 1e3))
    print("worst median {0:.1f} ms; budget {1:.0f} ms per node: {2}".format(worst * 1e3, BUDGET_S * 1e3, "ok" if worst < BUDGET_S else "OVER"))
    return 0 if worst < BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
