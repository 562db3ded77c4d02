# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What nvml_info must report for a simulated node, derived from `simctl.py show`.

The one oracle for the module's facts: the unit tests and the Molecule
scenario's testinfra verify both compare the module's output against it, so
an expectation is never hard-coded twice.
"""

from __future__ import annotations

import typing as t

MIB = 1024 * 1024


# nvmlDeviceArchitecture_t values from nvml.h (kept apart from the binding's
# table on purpose: this is the independent expectation).
ARCHITECTURES = {2: "kepler", 3: "maxwell", 4: "pascal", 5: "volta", 6: "turing", 7: "ampere", 8: "ada",
                 9: "hopper", 10: "blackwell", 13: "rubin"}
# FORMAT.md: NVML_COMPUTE_INSTANCE_PROFILE_* index -> compute slices.
CI_PROFILE_SLICES = (1, 2, 3, 4, 7, 8, 6)


def cuda_version(version: int) -> str:
    return "{0}.{1}".format(version // 1000, (version % 1000) // 10)


def _placement(record: dict[str, t.Any]) -> dict[str, int]:
    return {"start": record["start"], "size": record["size"]}


def expected_gpu(gpu: dict[str, t.Any], gather: bool) -> dict[str, t.Any]:
    capable = bool(gpu["mig_capable"])
    mig_on = capable and bool(gpu["mig_current"])
    profiles = {p["id"]: p for p in gpu.get("profiles", [])}
    gpu_instances, devices = [], []
    for gi in gpu.get("gis", []) if mig_on else []:
        gi_profile = profiles[gi["profile"]]
        gpu_instances.append({
            "id": gi["id"],
            "profile_id": gi["profile"],
            "profile_name": gi_profile["name"],
            "placement": _placement(gi),
            "compute_instances": sorted(
                ({"id": ci["id"], "profile_id": ci["profile"], "placement": _placement(ci)} for ci in gi["cis"]),
                key=lambda ci: ci["id"],
            ),
        })
        for ci in gi["cis"]:
            ci_slices = CI_PROFILE_SLICES[ci["profile"]]
            ci_name = gi_profile["name"] if ci_slices == gi_profile["slices"] else "{0}c.{1}".format(
                ci_slices, gi_profile["name"])
            devices.append({
                "uuid": ci["uuid"],
                "name": "{0} MIG {1}".format(gpu["name"], ci_name),
                "gpu_instance_id": gi["id"],
                "compute_instance_id": ci["id"],
                "memory_total_mib": gi_profile["memory_mb"],
            })
    mig: dict[str, t.Any] = {
        "capable": capable,
        "enabled": mig_on,
        "pending_enabled": capable and bool(gpu["mig_pending"]),
        "pending_change": capable and gpu["mig_current"] != gpu["mig_pending"],
        "gpu_instances": sorted(gpu_instances, key=lambda gi: gi["id"]),
        "devices": sorted(devices, key=lambda d: (d["gpu_instance_id"], d["compute_instance_id"], d["uuid"])),
    }
    if gather:
        mig["profiles"] = [
            {
                "index": p["index"],
                "id": p["id"],
                "name": p["name"],
                "slices": p["slices"],
                "instances": p["instances"],
                "memory_mib": p["memory_mb"],
                "placements": sorted((_placement(pl) for pl in p["placements"]), key=lambda pl: pl["start"]),
            }
            for p in sorted(gpu.get("profiles", []), key=lambda p: p["index"])
        ] if mig_on else []

    def instance(value: int) -> int | None:
        return value if mig_on and value >= 0 else None

    return {
        "index": gpu["index"],
        "name": gpu["name"],
        "uuid": gpu["uuid"],
        "serial": gpu["serial"],
        "board_part_number": gpu["board_part_number"],
        "minor_number": gpu["minor"],
        "pci": {
            "bus_id": gpu["bus_id"],
            "domain": gpu["pci_domain"],
            "bus": gpu["pci_bus"],
            "device": gpu["pci_device"],
            "device_id": "0x{0:08X}".format(gpu["pci_device_id"]),
            "subsystem_id": "0x{0:08X}".format(gpu["pci_subsystem_id"]),
        },
        "memory_total_mib": gpu["memory_total"] // MIB,
        "architecture": ARCHITECTURES.get(gpu["arch"], "unknown"),
        "architecture_id": gpu["arch"],
        "compute_capability": "{0}.{1}".format(gpu["cc_major"], gpu["cc_minor"]),
        "persistence_mode": bool(gpu["persistence"]),
        "mig": mig,
        "processes": sorted(
            (
                {
                    "pid": p["pid"],
                    "used_memory_mib": p["used_memory"] // MIB,
                    "gpu_instance_id": instance(p.get("gi", -1)),
                    "compute_instance_id": instance(p.get("ci", -1)),
                }
                for p in gpu.get("processes", [])
            ),
            key=lambda p: p["pid"],
        ),
    }


def expected_facts(show: dict[str, t.Any], library: str, gather: bool) -> dict[str, t.Any]:
    system = show["system"]
    return {
        "status": "ok",
        "driver_loaded": True,
        "reason": None,
        "library": library,
        "driver_version": system["driver_version"],
        "nvml_version": system["nvml_version"],
        "cuda_driver_version": cuda_version(system["cuda_driver_version"]),
        "gpu_count": len(show["gpus"]),
        "gpus": [expected_gpu(gpu, gather) for gpu in show["gpus"]],
    }


def differences(actual: t.Any, expected: t.Any, path: str = "nvml") -> list[str]:
    """Field-by-field comparison that names the path of every mismatch."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = ["{0}: unexpected key".format(path + "." + k) for k in sorted(set(actual) - set(expected))]
        found += ["{0}: missing".format(path + "." + k) for k in sorted(set(expected) - set(actual))]
        for key in sorted(set(actual) & set(expected)):
            found += differences(actual[key], expected[key], path + "." + key)
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        if len(actual) != len(expected):
            template = "{0}: {1} items, expected {2}: {3!r} != {4!r}"
            return [template.format(path, len(actual), len(expected), actual, expected)]
        found = []
        for index, (item, want) in enumerate(zip(actual, expected)):
            found += differences(item, want, "{0}[{1}]".format(path, index))
        return found
    if actual != expected or type(actual) is not type(expected):
        return ["{0}: {1!r} != expected {2!r}".format(path, actual, expected)]
    return []
