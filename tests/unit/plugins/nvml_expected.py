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

from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import health as nvml_health
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml.facts import unread_gpu

MIB = 1024 * 1024


# nvmlDeviceArchitecture_t values from nvml.h (kept apart from the binding's
# table on purpose: this is the independent expectation).
ARCHITECTURES = {2: "kepler", 3: "maxwell", 4: "pascal", 5: "volta", 6: "turing", 7: "ampere", 8: "ada", 9: "hopper", 10: "blackwell", 13: "rubin"}
# FORMAT.md: NVML_COMPUTE_INSTANCE_PROFILE_* index -> compute slices.
CI_PROFILE_SLICES = (1, 2, 3, 4, 7, 8, 6)
# nvml.h (NVIDIA/go-nvml@2f9e261fe40a:gen/nvml/nvml.h): NVML_GPU_FABRIC_STATE_*,
# the nvmlClocksEventReason* bits in bit order, NVML_DEVICE_ARCH_AMPERE.
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
CLOCK_EVENT_BITS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
)
ARCH_AMPERE = 7
ARCH_UNKNOWN = 0xFFFFFFFF


def expected_health(gpu: dict[str, t.Any]) -> dict[str, t.Any]:
    """nvml.gpus[].health for one `simctl show` gpu record (keys and defaults: tests/nvml-sim/FORMAT.md, Health).

    A record without health keys reads as a healthy GPU with ECC on and no
    PCIe, temperature, power, NVLink or fabric information."""
    # The all-null shape is the binding's: what a GPU answers, below, is this file's own reading of FORMAT.md.
    health = nvml_health.empty_health()
    if gpu.get("lost"):
        return health

    def get(key: str, default: t.Any = 0) -> t.Any:
        return gpu.get(key, default)

    def known(key: str) -> t.Any:
        """A value the library answers only when the record has it (NOT_SUPPORTED otherwise)."""
        value = gpu.get(key)
        return None if value is None or value < 0 else value

    ecc_supported = bool(get("ecc_supported", 1))
    if ecc_supported:
        ecc_on = bool(get("ecc_mode", 1))
        health["ecc"] = {
            "mode_current": ecc_on,
            "mode_pending": bool(get("ecc_pending", 1)),
            # nvml.h: the totals "require ECC Mode to be enabled".
            "volatile": {"corrected": get("ecc_vol_corr") if ecc_on else None, "uncorrected": get("ecc_vol_uncorr") if ecc_on else None},
            "aggregate": {"corrected": get("ecc_agg_corr") if ecc_on else None, "uncorrected": get("ecc_agg_uncorr") if ecc_on else None},
        }
    arch = gpu["arch"]
    retired = get("retired_pages_supported", -1)
    retired = bool(retired) if retired >= 0 else ecc_supported and 0 < arch < ARCH_AMPERE
    remapped = get("remapped_rows_supported", -1)
    remapped = bool(remapped) if remapped >= 0 else ecc_supported and arch >= ARCH_AMPERE and arch != ARCH_UNKNOWN
    if retired:
        health["retired_pages"] = {"single_bit_ecc": get("retired_sbe"), "double_bit_ecc": get("retired_dbe"), "pending": bool(get("retired_pending"))}
    # nvml.h: no remapped rows "on MIG-enabled GPUs with active instances".
    if remapped and not (gpu["mig_capable"] and gpu.get("gis")):
        health["remapped_rows"] = {
            "correctable": get("remap_corr"),
            "uncorrectable": get("remap_uncorr"),
            "pending": bool(get("remap_pending")),
            "failure": bool(get("remap_failure")),
        }
    health["recovery_action"] = known("recovery_action") if "recovery_action" in gpu else 0
    gen_max, width_max = known("pcie_gen_max"), known("pcie_width_max")
    health["pcie"] = {
        "gen_current": known("pcie_gen") if "pcie_gen" in gpu else gen_max,
        "gen_max": gen_max,
        "width_current": known("pcie_width") if "pcie_width" in gpu else width_max,
        "width_max": width_max,
        "replay_counter": get("pcie_replay"),
    }
    down = get("nvlink_down", [])
    if isinstance(down, str):
        down = [int(link) for link in down.split(",") if link]
    elif isinstance(down, int):
        down = [down]
    health["nvlink"] = [{"link": link, "active": link not in down} for link in range(get("nvlinks"))]
    if "fabric_state" in gpu:
        state = gpu["fabric_state"]
        state = FABRIC_STATES[state] if isinstance(state, int) else state
        done = state == "completed"
        status = get("fabric_status", None)
        if status == 0 or status == "0":
            status = "NVML_SUCCESS"  # the probe's nvmlReturn_t, reported by name
        health["fabric"] = {
            "state": state,
            "status": status if done else None,
            "clique_id": get("clique_id", None) if done else None,
            "cluster_uuid": get("cluster_uuid", None) if done else None,
            "waited_s": None,
        }
    health["temperature"] = {"current_c": known("temp"), "slowdown_c": known("temp_slowdown"), "shutdown_c": known("temp_shutdown")}
    mask = get("clock_event_reasons")
    health["clock_event_reasons"] = {"mask": mask, "active": [name for bit, name in enumerate(CLOCK_EVENT_BITS) if mask >> bit & 1]}

    def watts(key: str) -> float | None:
        value = known(key)
        return None if value is None else round(value / 1000.0, 3)

    health["power"] = {"draw_w": watts("power_mw"), "limit_w": watts("power_limit_mw")}
    return health


def cuda_version(version: int) -> str:
    return "{0}.{1}".format(version // 1000, (version % 1000) // 10)


def _placement(record: dict[str, t.Any]) -> dict[str, int]:
    return {"start": record["start"], "size": record["size"]}


def expected_gpu(gpu: dict[str, t.Any], gather: bool, gather_health: bool = True) -> dict[str, t.Any]:
    if gpu.get("lost"):
        return lost_gpu(gpu["index"], gather, gather_health)
    capable = bool(gpu["mig_capable"])
    mig_on = capable and bool(gpu["mig_current"])
    profiles = {p["id"]: p for p in gpu.get("profiles", [])}
    gpu_instances, devices = [], []
    for gi in gpu.get("gis", []) if mig_on else []:
        gi_profile = profiles[gi["profile"]]
        gpu_instances.append(
            {
                "id": gi["id"],
                "profile_id": gi["profile"],
                "profile_index": gi_profile["index"],
                "profile_name": gi_profile["name"],
                "placement": _placement(gi),
                # The simulator's compute-instance profile ids are their NVML_COMPUTE_INSTANCE_PROFILE_* indexes.
                "compute_instances": sorted(
                    ({"id": ci["id"], "profile_id": ci["profile"], "profile_index": ci["profile"], "placement": _placement(ci)} for ci in gi["cis"]),
                    key=lambda ci: ci["id"],
                ),
            }
        )
        for ci in gi["cis"]:
            ci_slices = CI_PROFILE_SLICES[ci["profile"]]
            ci_name = gi_profile["name"] if ci_slices == gi_profile["slices"] else "{0}c.{1}".format(ci_slices, gi_profile["name"])
            devices.append(
                {
                    "uuid": ci["uuid"],
                    "name": "{0} MIG {1}".format(gpu["name"], ci_name),
                    "gpu_instance_id": gi["id"],
                    "compute_instance_id": ci["id"],
                    "memory_total_mib": gi_profile["memory_mb"],
                    # nvmlDeviceGetAttributes of the MIG device: the GI profile's engines and memory, the
                    # compute instance's share of the GI's multiprocessors.
                    "attributes": {
                        "multiprocessor_count": gi_profile["sm"] // gi_profile["slices"] * ci_slices,
                        "shared_copy_engine_count": gi_profile["ce"],
                        "shared_decoder_count": gi_profile["dec"],
                        "shared_encoder_count": gi_profile["enc"],
                        "shared_jpeg_count": gi_profile["jpeg"],
                        "shared_ofa_count": gi_profile["ofa"],
                        "gpu_instance_slice_count": gi_profile["slices"],
                        "compute_instance_slice_count": ci_slices,
                        "memory_size_mb": gi_profile["memory_mb"],
                    },
                }
            )
    mig: dict[str, t.Any] = {
        "capable": capable,
        "enabled": mig_on,
        "pending_enabled": capable and bool(gpu["mig_pending"]),
        "pending_change": capable and gpu["mig_current"] != gpu["mig_pending"],
        "gpu_instances": sorted(gpu_instances, key=lambda gi: gi["id"]),
        "devices": sorted(devices, key=lambda d: (d["gpu_instance_id"], d["compute_instance_id"], d["uuid"])),
    }
    if gather:
        mig["profiles"] = (
            [
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
            ]
            if mig_on or gpu.get("mig_profiles_off")
            else []
        )  # a driver that answers with MIG off (FORMAT.md)

    def instance(value: int) -> int | None:
        return value if mig_on and value >= 0 else None

    expected = {
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
        "memory_total_bytes": gpu["memory_total"],
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
        "lost": False,
    }
    if gather_health:
        expected["health"] = expected_health(gpu)
    return expected


def lost_gpu(index: int, gather: bool, gather_health: bool = True) -> dict[str, t.Any]:
    """A GPU whose handle NVML refused with GPU_IS_LOST: the collector's unread record (_nvml/facts.py, every field
    at its default), marked lost, with the health of a lost GPU from the simulator's own defaults."""
    gpu = unread_gpu(index, gather, gather_health=False)
    gpu["lost"] = True
    if gather_health:
        gpu["health"] = expected_health({"lost": 1})
    return gpu


def expected_facts(show: dict[str, t.Any], library: str, gather: bool, gather_health: bool = True) -> dict[str, t.Any]:
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
        "gpus": [expected_gpu(gpu, gather, gather_health) for gpu in show["gpus"]],
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
