# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""MIG expectations derived from the simulator's own view of a node (`simctl.py show`).

`gpu_state` builds the planner's GpuState straight from a state file, without
NVML, so tests can check the NVML reader against it and plan on every fixture
without a library round trip. `layouts_for` derives the common layouts
(all-1g, all-2g, all-3g, all-balanced, all-7g) from a GPU's profiles, so no
test hard-codes a profile name.
"""

from __future__ import annotations

import typing as t
from collections import Counter

from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import state as mig_state

# FORMAT.md: NVML_COMPUTE_INSTANCE_PROFILE_* index -> compute slices.
CI_PROFILE_SLICES = (1, 2, 3, 4, 7, 8, 6)
MIB = 1024 * 1024


def profiles(gpu: dict[str, t.Any]) -> tuple[mig_state.Profile, ...]:
    return tuple(
        mig_state.Profile(p["id"], p["name"], p["slices"], p["instances"], tuple(sorted((pl["start"], pl["size"]) for pl in p["placements"])))
        for p in gpu["profiles"]
    )


def gpu_state(gpu: dict[str, t.Any], mig_enabled: bool | None = None) -> mig_state.GpuState:
    """The GpuState of one `show` GPU; mig_enabled overrides the mode (as if MIG were on)."""
    enabled = bool(gpu["mig_current"]) if mig_enabled is None else mig_enabled
    instances = (
        tuple(
            mig_state.GpuInstanceState(
                gi["id"],
                gi["profile"],
                gi["start"],
                gi["size"],
                tuple(mig_state.ComputeInstanceState(ci["id"], CI_PROFILE_SLICES[ci["profile"]], ci["start"]) for ci in gi["cis"]),
            )
            for gi in gpu["gis"]
        )
        if enabled
        else ()
    )
    processes = tuple(
        mig_state.ClientProcess(
            p["pid"],
            "not visible here",
            p.get("used_memory", 0) // MIB,
            None if p.get("gi", -1) < 0 or not enabled else p["gi"],
            None if p.get("ci", -1) < 0 or not enabled else p["ci"],
        )
        for p in sorted(gpu["processes"], key=lambda p: p["pid"])
    )
    capable = bool(gpu["mig_capable"])
    return mig_state.GpuState(
        index=gpu["index"],
        uuid=gpu["uuid"],
        name=gpu["name"],
        pci_device_id=gpu["pci_device_id"],
        pci_subsystem_id=gpu["pci_subsystem_id"],
        mig_capable=capable,
        mig_enabled=capable and enabled,
        mig_pending=capable and (enabled if mig_enabled is not None else bool(gpu["mig_pending"])),
        profiles=profiles(gpu) if capable else (),
        profiles_from="nvml" if capable else "none",
        gpu_instances=instances,
        processes=processes,
    )


def plain_profile(gpu: mig_state.GpuState, slices: int) -> mig_state.Profile:
    """The ordinary profile of `slices` compute slices: the smallest memory, the most instances."""
    return min((p for p in gpu.profiles if p.slices == slices), key=lambda p: (p.size, -p.instances, p.id))


def layouts_for(gpu: mig_state.GpuState) -> dict[str, dict[str, int]]:
    """mig-devices of the common layouts, named like mig-parted's default labels."""
    one, two, three = (plain_profile(gpu, n) for n in (1, 2, 3))
    full = max(gpu.profiles, key=lambda p: p.slices)
    return {
        "all-1g": {one.name: one.instances},
        "all-2g": {two.name: two.instances},
        "all-3g": {three.name: three.instances},
        "all-balanced": {one.name: 2, two.name: 1, three.name: 1},
        "all-7g": {full.name: 1},
    }


def config(label: str, *entries: dict[str, t.Any]) -> dict[str, t.Any]:
    return {"version": "v1", "mig-configs": {label: list(entries)}}


def device_counts(gpu: dict[str, t.Any]) -> Counter:
    """MIG devices of a `show` GPU by mig-parted name (1g.5gb, 1c.3g.20gb, ...)."""
    names = {p["id"]: p for p in gpu["profiles"]}
    found: Counter = Counter()
    for gi in gpu["gis"]:
        profile = names[gi["profile"]]
        for ci in gi["cis"]:
            slices = CI_PROFILE_SLICES[ci["profile"]]
            found[profile["name"] if slices == profile["slices"] else "{0}c.{1}".format(slices, profile["name"])] += 1
    return found


def check_layout(gpu: dict[str, t.Any]) -> list[str]:
    """Problems with a `show` GPU's instances: bad placement, overlap, too many, over capacity."""
    names = {p["id"]: p for p in gpu["profiles"]}
    problems, spans = [], []
    for gi in gpu["gis"]:
        profile = names[gi["profile"]]
        if {"start": gi["start"], "size": gi["size"]} not in profile["placements"]:
            problems.append("GI {0} at {1} is not a placement of {2}".format(gi["id"], gi["start"], profile["name"]))
        for start, size in spans:
            if gi["start"] < start + size and start < gi["start"] + gi["size"]:
                problems.append("GI {0} overlaps [{1}, {2})".format(gi["id"], start, start + size))
        spans.append((gi["start"], gi["size"]))
    per_profile = Counter(gi["profile"] for gi in gpu["gis"])
    problems += ["{0} instances of {1}".format(n, names[p]["name"]) for p, n in per_profile.items() if n > names[p]["instances"]]
    if sum(names[gi["profile"]]["slices"] for gi in gpu["gis"]) > max(p["slices"] for p in gpu["profiles"]):
        problems.append("more compute slices than the GPU has")
    return problems
