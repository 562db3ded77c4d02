# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read a real GPU node through our NVML binding, NVIDIA's pynvml and nvidia-smi; compare.

Everything the collection's ctypes binding (plugins/module_utils/_nvml/) can
read is read three ways -- our binding, the reference binding NVIDIA ships
(pynvml, package nvidia-ml-py) and nvidia-smi -- and compared field by field.
The nvml_info collector and the MIG planner (mig_config's reads) run on the
same node in-process. Each GPU's health (_nvml/health.py read_health: ECC,
retired pages, remapped rows, recovery action, PCIe, NVLink, fabric,
temperature, clock event reasons, power) is read the same three ways and
compared leaf by leaf; temperature and power draw with a tolerance, the
current PCIe generation and the clock event reasons only recorded (they move
between two reads). What the health reads add to nvml_info's collector is
timed too (report: health.nvml_info_added_by_health). The result is one JSON
report on stdout (or --output); the exit status is 1 when anything disagrees,
0 otherwise.

STRICTLY READ-ONLY: the binding is wrapped so that any NVML entry point named
*Set*, *Create*, *Destroy*, *Reset* or *Clear* raises before it is resolved,
and pynvml and nvidia-smi are only asked read commands.

Standard library only (pynvml and PyYAML are used when importable), Python 3.8+:

    python3 tests/device/nvml_real_check.py [--repo .] [--nvml path/to/nvml/] [--output report.json]

The simulated library works too (LD_LIBRARY_PATH=tests/nvml-sim/build with
NVML_SIM_STATE set), which is how the script itself is tested without a GPU.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import glob
import importlib
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
import typing as t
import xml.etree.ElementTree as ET

MIB = 1024 * 1024
PKG = "ansible_collections.gpufleet.nvidia.plugins"
# Entry points that change a GPU: the check refuses to resolve them.
_WRITES = re.compile(r"Set|Create|Destroy|Reset|Clear")
# nvidia-smi --query-gpu fields read, each also asked alone when the whole query fails.
SMI_FIELDS = (
    "index",
    "name",
    "uuid",
    "serial",
    "pci.bus_id",
    "pci.domain",
    "pci.bus",
    "pci.device",
    "pci.device_id",
    "pci.sub_device_id",
    "memory.total",
    "memory.reserved",
    "memory.used",
    "memory.free",
    "driver_version",
    "persistence_mode",
    "mig.mode.current",
    "mig.mode.pending",
    "compute_cap",
)
# Fields used/free move when anything touches the GPU between two reads.
VOLATILE_MIB = 64
# Health fields (nvidia-smi --help-query-gpu names), queried in groups: one
# name an older nvidia-smi lacks must not cost the others (each group is
# retried field by field when it fails).
SMI_HEALTH_GROUPS = (
    (
        "ecc.mode.current",
        "ecc.mode.pending",
        "ecc.errors.corrected.volatile.total",
        "ecc.errors.uncorrected.volatile.total",
        "ecc.errors.corrected.aggregate.total",
        "ecc.errors.uncorrected.aggregate.total",
    ),
    ("retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending"),
    ("remapped_rows.correctable", "remapped_rows.uncorrectable", "remapped_rows.pending", "remapped_rows.failure"),
    ("pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max"),
    ("temperature.gpu", "power.draw", "enforced.power.limit"),
    ("clocks_event_reasons.active",),
    ("clocks_throttle_reasons.active",),
)
# Volatile health readings: the two reads are a moment apart on a live GPU.
VOLATILE_TEMP_C = 5
VOLATILE_POWER_W = 60.0


# --- loading the collection's code ------------------------------------------
# The binding's modules under module_utils/_nvml/ (the readers, health.py and facts.py, are imported as the
# collection's modules use them).
BINDING_MODULES = ("constants", "structs", "values", "library", "mig_calls", "health_calls", "session")


def load_collection(repo: str, nvml_path: str | None) -> types.SimpleNamespace:
    """Make ansible_collections.gpufleet.nvidia importable from `repo`; return its NVML binding (the public names
    of module_utils/_nvml's constants, structs, values and session) as one namespace.

    With `nvml_path` (a directory laid out as module_utils/_nvml/), that package is loaded as the binding instead
    of the repo's, so a fixed copy can be checked without touching the checkout.
    """
    root = tempfile.mkdtemp(prefix="nvml-real-check-")
    os.makedirs(os.path.join(root, "ansible_collections", "gpufleet"))
    os.symlink(os.path.abspath(repo), os.path.join(root, "ansible_collections", "gpufleet", "nvidia"))
    sys.path.insert(0, root)
    utils = importlib.import_module(PKG + ".module_utils")
    name = PKG + ".module_utils._nvml"
    if nvml_path:
        spec = importlib.util.spec_from_file_location(name, os.path.join(nvml_path, "__init__.py"), submodule_search_locations=[nvml_path])
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package  # the submodules import each other relatively through it
        spec.loader.exec_module(package)  # type: ignore[union-attr]
        utils.nvml = package
    nvml = binding()
    guard_read_only(nvml)
    return nvml


def binding() -> types.SimpleNamespace:
    """The binding's names (module_utils/_nvml's BINDING_MODULES) in one namespace, as the checks read them."""
    nvml = types.SimpleNamespace()
    for part in BINDING_MODULES:
        module = importlib.import_module(PKG + ".module_utils._nvml." + part)
        vars(nvml).update((k, v) for k, v in vars(module).items() if not k.startswith("__"))
    return nvml


def guard_read_only(nvml: types.SimpleNamespace) -> None:
    resolve = nvml.NvmlSession._function

    def _function(self: t.Any, name: str) -> t.Any:
        if _WRITES.search(name[len("nvml") :]):
            raise RuntimeError("read-only check refused to call {0}".format(name))
        return resolve(self, name)

    nvml.NvmlSession._function = _function


def import_module_file(relpath: str, repo: str) -> types.ModuleType:
    """Import plugins/modules/<x>.py; without ansible-core, AnsibleModule is a placeholder (main() is not run)."""
    try:
        import ansible.module_utils.basic  # noqa: F401  pylint: disable=unused-import
    except ImportError:
        for name in ("ansible", "ansible.module_utils", "ansible.module_utils.basic"):
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules["ansible.module_utils.basic"].AnsibleModule = None  # type: ignore[attr-defined]
    name = PKG + ".modules." + os.path.splitext(os.path.basename(relpath))[0]
    spec = importlib.util.spec_from_file_location(name, os.path.join(repo, relpath))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


# --- reading helpers ------------------------------------------------------------
def error_name(nvml: types.SimpleNamespace, exc: BaseException) -> dict[str, t.Any]:
    code = getattr(exc, "code", None)
    if code is None:
        code = getattr(exc, "value", None)  # pynvml.NVMLError
    if isinstance(code, int):
        return {"error": nvml.ERROR_NAMES.get(code, "NVML_ERROR_{0}".format(code))}
    return {"error": "{0}: {1}".format(type(exc).__name__, exc)}


def attempt(nvml: types.SimpleNamespace, fn: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
    try:
        return fn(*args)
    except Exception as exc:  # pylint: disable=broad-except
        return error_name(nvml, exc)


def _text(value: t.Any) -> t.Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _instance(value: int) -> int | None:
    return None if value == 0xFFFFFFFF else value


# --- our binding ------------------------------------------------------------------
def read_ours(nvml: types.SimpleNamespace, indices: range) -> dict[str, t.Any]:
    s = nvml.NvmlSession()
    s.init()
    try:
        out: dict[str, t.Any] = {
            "driver_version": attempt(nvml, s.driver_version),
            "nvml_version": attempt(nvml, s.nvml_version),
            "cuda_driver_version": attempt(nvml, s.cuda_driver_version_int),
            "device_count": attempt(nvml, s.device_count),
            "devices": [],
        }
        count = out["device_count"] if isinstance(out["device_count"], int) else 0
        for i in range(count):
            dev = s.device_by_index(i)
            d: dict[str, t.Any] = {
                "index": attempt(nvml, s.device_index, dev),
                "name": attempt(nvml, s.device_name, dev),
                "uuid": attempt(nvml, s.device_uuid, dev),
                "serial": attempt(nvml, s.device_serial, dev),
                "board_part_number": attempt(nvml, s.device_board_part_number, dev),
                "minor_number": attempt(nvml, s.device_minor_number, dev),
                "pci": attempt(nvml, lambda x: nvml.to_dict(s.device_pci_info(x)), dev),
                "memory": attempt(nvml, lambda x: nvml.to_dict(s.device_memory(x)), dev),
                "architecture": attempt(nvml, s.device_architecture, dev),
                "compute_capability": attempt(nvml, lambda x: list(s.device_compute_capability(x)), dev),
                "persistence_mode": attempt(nvml, s.device_persistence_mode, dev),
                "processes": attempt(nvml, lambda x: [nvml.to_dict(p) for p in s.device_compute_processes(x)], dev),
                "mig_mode": attempt(nvml, lambda x: nvml.to_dict(s.device_mig_mode(x)), dev),
            }
            # The by-UUID and by-bus-id lookups must land on the same handle.
            if isinstance(d["uuid"], str):
                d["handle_by_uuid_matches"] = attempt(nvml, lambda u: s.device_by_uuid(u) == dev, d["uuid"])
            if isinstance(d["pci"], dict):
                d["handle_by_bus_id_matches"] = attempt(nvml, lambda b: s.device_by_pci_bus_id(b) == dev, d["pci"]["bus_id"])
            d["gpu_instance_profiles"] = {}
            for index in indices:
                p = attempt(nvml, s.gpu_instance_profile, dev, index)
                d["gpu_instance_profiles"][str(index)] = {"error": "NVML_ERROR_NOT_SUPPORTED"} if p is None else p if isinstance(p, dict) else nvml.to_dict(p)
            listed = attempt(nvml, s.gpu_instance_profiles, dev)
            d["gpu_instance_profiles_listed"] = [p.id for p in listed] if isinstance(listed, list) else listed
            d["placements"] = {}
            d["remaining_capacity"] = {}
            for p in listed if isinstance(listed, list) else []:
                d["placements"][str(p.id)] = attempt(nvml, lambda x, pid: [nvml.to_dict(q) for q in s.gpu_instance_possible_placements(x, pid)], dev, p.id)
                d["remaining_capacity"][str(p.id)] = attempt(nvml, s.gpu_instance_remaining_capacity, dev, p.id)
            d["gpu_instances"] = []
            mig_on = isinstance(d["mig_mode"], dict) and d["mig_mode"]["current"]
            for p in listed if mig_on and isinstance(listed, list) else []:
                for gi in s.gpu_instances(dev, p):
                    info = nvml.to_dict(s.gpu_instance_info(gi))
                    info["compute_instances"] = []
                    for cp in s.compute_instance_profiles(gi):
                        for ci in s.compute_instances(gi, cp):
                            info["compute_instances"].append(nvml.to_dict(s.compute_instance_info(ci)))
                    d["gpu_instances"].append(info)
            d["max_mig_device_count"] = attempt(nvml, s.max_mig_device_count, dev)
            d["mig_devices"] = []
            if mig_on:
                for mig in s.mig_devices(dev):
                    d["mig_devices"].append(
                        {
                            "uuid": attempt(nvml, s.device_uuid, mig),
                            "gpu_instance_id": attempt(nvml, s.mig_device_gpu_instance_id, mig),
                            "compute_instance_id": attempt(nvml, s.mig_device_compute_instance_id, mig),
                        }
                    )
            out["devices"].append(d)
        out["resolved"] = list(s.resolved)
        return out
    finally:
        s.shutdown()


def read_health_ours(nvml: types.SimpleNamespace) -> dict[str, t.Any]:
    """_nvml/health.py read_health for every GPU, and how long each took."""
    health = importlib.import_module(PKG + ".module_utils._nvml.health")
    s = nvml.NvmlSession()
    s.init()
    try:
        devices = []
        for i in range(s.device_count()):
            dev = s.device_by_index(i)
            start = time.perf_counter()
            reading = attempt(nvml, health.read_health, s, dev)
            devices.append({"health": reading, "seconds": round(time.perf_counter() - start, 6)})
        return {"devices": devices, "resolved": [n for n in s.resolved if n in health.HEALTH_CALLS]}
    finally:
        s.shutdown()


def time_collector(repo: str, runs: int = 7) -> dict[str, t.Any]:
    """nvml_info's collector with gather_health false and true, interleaved: what the health reads add here."""
    module = import_module_file("plugins/modules/nvml_info.py", repo)
    samples: dict[str, list[float]] = {"false": [], "true": []}
    for _run_index in range(runs):
        for gather in (False, True):
            start = time.perf_counter()
            module.NvmlFactsCollector(library=None, gather_health=gather).collect()
            samples[str(gather).lower()].append(time.perf_counter() - start)
    medians = {key: statistics.median(values) for key, values in samples.items()}
    return {"runs": runs, "median_s": medians, "added_median_s": round(medians["true"] - medians["false"], 6), "samples_s": samples}


# --- pynvml ----------------------------------------------------------------------------
def read_pynvml(nvml: types.SimpleNamespace, indices: range) -> dict[str, t.Any]:
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        return {"error": "pynvml not importable: {0}".format(exc)}
    try:
        from importlib.metadata import version  # pylint: disable=import-outside-toplevel

        package_version = version("nvidia-ml-py")
    except Exception:  # pylint: disable=broad-except
        package_version = None
    p = pynvml

    def a(fn: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
        return attempt(nvml, fn, *args)

    p.nvmlInit()
    try:
        out: dict[str, t.Any] = {
            "package_version": package_version,
            "driver_version": a(lambda: _text(p.nvmlSystemGetDriverVersion())),
            "nvml_version": a(lambda: _text(p.nvmlSystemGetNVMLVersion())),
            "cuda_driver_version": a(p.nvmlSystemGetCudaDriverVersion_v2),
            "device_count": a(p.nvmlDeviceGetCount),
            "devices": [],
        }
        for i in range(out["device_count"] if isinstance(out["device_count"], int) else 0):
            h = p.nvmlDeviceGetHandleByIndex(i)

            def pci(x: t.Any) -> dict[str, t.Any]:
                r = p.nvmlDeviceGetPciInfo_v3(x)
                return {
                    "bus_id": _text(r.busId),
                    "bus_id_legacy": _text(r.busIdLegacy),
                    "domain": r.domain,
                    "bus": r.bus,
                    "device": r.device,
                    "pci_device_id": r.pciDeviceId,
                    "pci_subsystem_id": r.pciSubSystemId,
                }

            def memory(x: t.Any) -> dict[str, t.Any]:
                r = p.nvmlDeviceGetMemoryInfo(x, version=p.nvmlMemory_v2)
                return {"total": r.total, "free": r.free, "used": r.used, "reserved": r.reserved}

            def processes(x: t.Any) -> list[dict[str, t.Any]]:
                return [
                    {
                        "pid": r.pid,
                        "used_memory": r.usedGpuMemory,
                        "gpu_instance_id": _instance(r.gpuInstanceId),
                        "compute_instance_id": _instance(r.computeInstanceId),
                    }
                    for r in p.nvmlDeviceGetComputeRunningProcesses_v3(x)
                ]

            def mig_mode(x: t.Any) -> dict[str, bool]:
                cur, pend = p.nvmlDeviceGetMigMode(x)
                return {"current": cur == p.NVML_DEVICE_MIG_ENABLE, "pending": pend == p.NVML_DEVICE_MIG_ENABLE}

            d: dict[str, t.Any] = {
                "index": a(p.nvmlDeviceGetIndex, h),
                "name": a(lambda x: _text(p.nvmlDeviceGetName(x)), h),
                "uuid": a(lambda x: _text(p.nvmlDeviceGetUUID(x)), h),
                "serial": a(lambda x: _text(p.nvmlDeviceGetSerial(x)), h),
                "board_part_number": a(lambda x: _text(p.nvmlDeviceGetBoardPartNumber(x)), h),
                "minor_number": a(p.nvmlDeviceGetMinorNumber, h),
                "pci": a(pci, h),
                "memory": a(memory, h),
                "architecture": a(p.nvmlDeviceGetArchitecture, h),
                "compute_capability": a(lambda x: list(p.nvmlDeviceGetCudaComputeCapability(x)), h),
                "persistence_mode": a(lambda x: p.nvmlDeviceGetPersistenceMode(x) == p.NVML_FEATURE_ENABLED, h),
                "processes": a(processes, h),
                "mig_mode": a(mig_mode, h),
                "gpu_instance_profiles": {},
            }
            for index in indices:

                def profile(x: t.Any, idx: int) -> dict[str, t.Any]:
                    r = p.nvmlDeviceGetGpuInstanceProfileInfo(x, idx, version=2)
                    return {
                        "index": idx,
                        "id": r.id,
                        "name": _text(r.name),
                        "slice_count": r.sliceCount,
                        "instance_count": r.instanceCount,
                        "multiprocessor_count": r.multiprocessorCount,
                        "copy_engine_count": r.copyEngineCount,
                        "decoder_count": r.decoderCount,
                        "encoder_count": r.encoderCount,
                        "jpeg_count": r.jpegCount,
                        "ofa_count": r.ofaCount,
                        "memory_size_mb": r.memorySizeMB,
                        "is_p2p_supported": bool(r.isP2pSupported),
                    }

                d["gpu_instance_profiles"][str(index)] = a(profile, h, index)
            d["placements"] = {}
            d["remaining_capacity"] = {}
            for prof in d["gpu_instance_profiles"].values():
                if "id" not in prof:
                    continue

                def placements(x: t.Any, pid: int) -> list[dict[str, int]]:
                    count = ctypes.c_uint(0)
                    p.nvmlDeviceGetGpuInstancePossiblePlacements(x, pid, None, ctypes.byref(count))
                    arr = (p.c_nvmlGpuInstancePlacement_t * max(count.value, 1))()
                    p.nvmlDeviceGetGpuInstancePossiblePlacements(x, pid, arr, ctypes.byref(count))
                    return [{"start": q.start, "size": q.size} for q in arr[: count.value]]

                d["placements"][str(prof["id"])] = a(placements, h, prof["id"])
                d["remaining_capacity"][str(prof["id"])] = a(p.nvmlDeviceGetGpuInstanceRemainingCapacity, h, prof["id"])
            d["max_mig_device_count"] = a(p.nvmlDeviceGetMaxMigDeviceCount, h)
            out["devices"].append(d)
        return out
    finally:
        p.nvmlShutdown()


def read_health_pynvml(nvml: types.SimpleNamespace) -> dict[str, t.Any]:
    """The same health leaves as read_health, read through pynvml (None where pynvml raises "unavailable")."""
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        return {"error": "pynvml not importable: {0}".format(exc)}
    p = pynvml
    health = importlib.import_module(PKG + ".module_utils._nvml.health")
    names = ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND", "NO_PERMISSION", "NO_DATA")
    unavailable = {getattr(p, "NVML_ERROR_" + n) for n in names if hasattr(p, "NVML_ERROR_" + n)}

    def a(fn: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
        try:
            return fn(*args)
        except p.NVMLError as exc:
            if exc.value in unavailable:
                return None
            return error_name(nvml, exc)
        except Exception as exc:  # pylint: disable=broad-except
            return {"error": "{0}: {1}".format(type(exc).__name__, exc)}

    def one(h: t.Any) -> dict[str, t.Any]:
        mode = a(p.nvmlDeviceGetEccMode, h)
        ecc = {
            "mode_current": None if not isinstance(mode, list) else mode[0] == p.NVML_FEATURE_ENABLED,
            "mode_pending": None if not isinstance(mode, list) else mode[1] == p.NVML_FEATURE_ENABLED,
        }
        for key, counter in (("volatile", p.NVML_VOLATILE_ECC), ("aggregate", p.NVML_AGGREGATE_ECC)):
            ecc[key] = {
                "corrected": a(p.nvmlDeviceGetTotalEccErrors, h, p.NVML_MEMORY_ERROR_TYPE_CORRECTED, counter),
                "uncorrected": a(p.nvmlDeviceGetTotalEccErrors, h, p.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counter),
            }
        sbe = a(p.nvmlDeviceGetRetiredPages, h, p.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        dbe = a(p.nvmlDeviceGetRetiredPages, h, p.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        pending = a(p.nvmlDeviceGetRetiredPagesPendingStatus, h)
        rows = a(p.nvmlDeviceGetRemappedRows, h)
        fields = a(p.nvmlDeviceGetFieldValues, h, [230])
        recovery = None
        # pynvml hands back the ctypes array itself (or an error dict from a()).
        if fields is not None and not isinstance(fields, dict) and fields[0].nvmlReturn == p.NVML_SUCCESS:
            member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
            recovery = int(getattr(fields[0].value, member[fields[0].valueType]))
        links = []
        for link in range(36):
            try:
                links.append({"link": link, "active": p.nvmlDeviceGetNvLinkState(h, link) == p.NVML_FEATURE_ENABLED})
            except p.NVMLError:
                continue
        fabric = None
        try:
            info = p.c_nvmlGpuFabricInfo_t()
            p.nvmlDeviceGetGpuFabricInfo(h, ctypes.byref(info))
            done = info.state == 3
            fabric = {
                "state": health.FABRIC_STATES.get(info.state, "unknown"),
                "status": nvml.ERROR_NAMES.get(info.status) if done else None,
                "clique_id": info.cliqueId if done else None,
                "cluster_uuid": health._uuid(bytes(bytearray(info.clusterUuid))) if done else None,
            }
        except p.NVMLError as exc:
            fabric = None if exc.value in unavailable else error_name(nvml, exc)
        except Exception as exc:  # pylint: disable=broad-except
            fabric = {"error": "{0}: {1}".format(type(exc).__name__, exc)}
        reasons = getattr(p, "nvmlDeviceGetCurrentClocksEventReasons", None) or p.nvmlDeviceGetCurrentClocksThrottleReasons
        mask = a(reasons, h)

        def watts(mw: t.Any) -> t.Any:
            return round(mw / 1000.0, 3) if isinstance(mw, int) else mw

        return {
            "ecc": ecc,
            "retired_pages": {
                "single_bit_ecc": len(sbe) if isinstance(sbe, list) else sbe,
                "double_bit_ecc": len(dbe) if isinstance(dbe, list) else dbe,
                "pending": pending == p.NVML_FEATURE_ENABLED if isinstance(pending, int) else pending,
            },
            "remapped_rows": (
                {"correctable": rows[0], "uncorrectable": rows[1], "pending": bool(rows[2]), "failure": bool(rows[3])}
                if isinstance(rows, (list, tuple))
                else {"correctable": rows, "uncorrectable": rows, "pending": rows, "failure": rows}
            ),
            "recovery_action": recovery,
            "pcie": {
                "gen_current": a(p.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "gen_max": a(p.nvmlDeviceGetMaxPcieLinkGeneration, h),
                "width_current": a(p.nvmlDeviceGetCurrPcieLinkWidth, h),
                "width_max": a(p.nvmlDeviceGetMaxPcieLinkWidth, h),
                "replay_counter": a(p.nvmlDeviceGetPcieReplayCounter, h),
            },
            "nvlink": links,
            "fabric": fabric,
            "temperature": {
                "current_c": a(p.nvmlDeviceGetTemperature, h, p.NVML_TEMPERATURE_GPU),
                "slowdown_c": a(p.nvmlDeviceGetTemperatureThreshold, h, p.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
                "shutdown_c": a(p.nvmlDeviceGetTemperatureThreshold, h, p.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
            },
            "clock_event_reasons": {"mask": mask, "active": [n for bit, n in health.CLOCK_EVENT_REASONS if isinstance(mask, int) and mask & bit]},
            "power": {"draw_w": watts(a(p.nvmlDeviceGetPowerUsage, h)), "limit_w": watts(a(p.nvmlDeviceGetEnforcedPowerLimit, h))},
        }

    p.nvmlInit()
    try:
        return {"devices": [one(p.nvmlDeviceGetHandleByIndex(i)) for i in range(p.nvmlDeviceGetCount())]}
    finally:
        p.nvmlShutdown()


def struct_layouts(nvml: types.SimpleNamespace) -> dict[str, t.Any]:
    """Our ctypes structs and constants against pynvml's: sizes, field offsets, values."""
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
    except ImportError:
        return {"skipped": "pynvml not importable"}
    pairs = {
        "_PciInfo": "nvmlPciInfo_t",
        "_Memory": "c_nvmlMemory_t",
        "_Memory_v2": "c_nvmlMemory_v2_t",
        "_ProcessInfo": "c_nvmlProcessInfo_v2_t",
        "_GpuInstancePlacement": "c_nvmlGpuInstancePlacement_t",
        "_GpuInstanceProfileInfo": "c_nvmlGpuInstanceProfileInfo_t",
        "_GpuInstanceProfileInfo_v2": "c_nvmlGpuInstanceProfileInfo_v2_t",
        "_GpuInstanceInfo": "c_nvmlGpuInstanceInfo_t",
        "_ComputeInstancePlacement": "c_nvmlComputeInstancePlacement_t",
        "_ComputeInstanceProfileInfo": "c_nvmlComputeInstanceProfileInfo_t",
        "_ComputeInstanceProfileInfo_v2": "c_nvmlComputeInstanceProfileInfo_v2_t",
        "_ComputeInstanceInfo": "c_nvmlComputeInstanceInfo_t",
        "_FieldValue": "c_nvmlFieldValue_t",
        "_GpuFabricInfo": "c_nvmlGpuFabricInfo_t",
        "_GpuFabricInfo_v2": "c_nvmlGpuFabricInfo_v2_t",
        "_GpuFabricInfo_v3": "c_nvmlGpuFabricInfo_v3_t",
    }

    # Where pynvml's declaration differs from nvml.h and ours follows the header:
    # nvml.h has "typedef unsigned char nvmlGpuFabricState_t", pynvml
    # (nvidia-ml-py 13.615.71) declares it c_uint. Offsets and sizeof agree;
    # pynvml reads three padding bytes with the state, which works as long
    # as the caller zeroed the struct.
    header_wins = {("_GpuFabricInfo", "state"), ("_GpuFabricInfo_v2", "state"), ("_GpuFabricInfo_v3", "state")}

    def layout(cls: t.Any, name: str = "") -> list[list[t.Any]]:
        return [[f[0], getattr(cls, f[0]).offset, None if (name, f[0]) in header_wins else getattr(cls, f[0]).size] for f in cls._fields_]

    structs = {}
    for ours, theirs in pairs.items():
        if not hasattr(pynvml, theirs):
            structs[ours] = {"pynvml": None}
            continue
        a, b = getattr(nvml, ours), getattr(pynvml, theirs)
        structs[ours] = {
            "pynvml": theirs,
            "sizeof": [ctypes.sizeof(a), ctypes.sizeof(b)],
            "same": ctypes.sizeof(a) == ctypes.sizeof(b) and layout(a, ours) == layout(b, ours),
        }
        if not structs[ours]["same"]:
            structs[ours]["ours"], structs[ours]["theirs"] = layout(a), layout(b)
    constants = {}
    names = [n for n in vars(nvml) if n.startswith("NVML_") or re.match(r"nvml\w+_v\d+$", n)]
    for name in sorted(names):
        ours = getattr(nvml, name)
        if isinstance(ours, int) and hasattr(pynvml, name):
            theirs = getattr(pynvml, name)
            theirs = getattr(theirs, "value", theirs)
            constants[name] = {"ours": ours, "pynvml": theirs, "same": ours == theirs}
    return {
        "structs": structs,
        "constants": constants,
        "constants_compared": len(constants),
        "constants_differing": sorted(n for n, c in constants.items() if not c["same"]),
    }


# --- nvidia-smi -------------------------------------------------------------------------
def _run(argv: list[str]) -> dict[str, t.Any]:
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": None, "output": str(exc)}
    return {"rc": proc.returncode, "output": proc.stdout.decode("utf-8", "replace")}


def read_smi() -> dict[str, t.Any]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {"error": "nvidia-smi not on PATH"}
    out: dict[str, t.Any] = {"path": smi, "version": _run([smi, "--version"])["output"].strip()}
    fmt = "--format=csv,noheader,nounits"
    whole = _run([smi, "--query-gpu=" + ",".join(SMI_FIELDS), fmt])
    gpus: list[dict[str, t.Any]] = []
    if whole["rc"] == 0:
        for line in whole["output"].strip().splitlines():
            gpus.append(dict(zip(SMI_FIELDS, (v.strip() for v in line.split(",")))))
    else:
        out["query_gpu_error"] = whole["output"].strip()
        for field in SMI_FIELDS:
            one = _run([smi, "--query-gpu=" + field, fmt])
            for i, line in enumerate(one["output"].strip().splitlines() if one["rc"] == 0 else []):
                while len(gpus) <= i:
                    gpus.append({})
                gpus[i][field] = line.strip()
            if one["rc"] != 0:
                out.setdefault("query_field_errors", {})[field] = one["output"].strip()
    out["query_gpu"] = gpus
    apps = _run([smi, "--query-compute-apps=gpu_uuid,pid,used_memory", fmt])
    out["compute_apps"] = (
        [dict(zip(("gpu_uuid", "pid", "used_memory"), (v.strip() for v in line.split(",")))) for line in apps["output"].strip().splitlines()]
        if apps["rc"] == 0
        else apps
    )
    xml = _run([smi, "-q", "-x"])
    out["xml"] = parse_smi_xml(xml["output"]) if xml["rc"] == 0 else xml
    out["mig"] = {}
    for flag in ("-lgip", "-lgipp", "-lgi", "-lci"):
        out["mig"][flag] = _run([smi, "mig", flag])
    if out["mig"]["-lgip"]["rc"] == 0:
        out["mig"]["lgip_parsed"] = parse_lgip(out["mig"]["-lgip"]["output"])
    return out


def _smi_query(smi: str, fields: t.Sequence[str]) -> tuple[list[dict[str, str]], dict[str, str]]:
    """--query-gpu for `fields`; on failure each field alone. Returns rows and {field: error}."""
    fmt = "--format=csv,noheader,nounits"
    whole = _run([smi, "--query-gpu=" + ",".join(fields), fmt])
    if whole["rc"] == 0:
        return [dict(zip(fields, (v.strip() for v in line.split(",")))) for line in whole["output"].strip().splitlines()], {}
    rows: list[dict[str, str]] = []
    errors = {}
    for field in fields:
        one = _run([smi, "--query-gpu=" + field, fmt])
        if one["rc"] != 0:
            errors[field] = one["output"].strip()
            continue
        for i, line in enumerate(one["output"].strip().splitlines()):
            while len(rows) <= i:
                rows.append({})
            rows[i][field] = line.strip()
    return rows, errors


def read_smi_health() -> dict[str, t.Any]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {"error": "nvidia-smi not on PATH"}
    out: dict[str, t.Any] = {"query_gpu": [], "query_errors": {}}
    for group in SMI_HEALTH_GROUPS:
        rows, errors = _smi_query(smi, group)
        out["query_errors"].update(errors)
        for i, row in enumerate(rows):
            while len(out["query_gpu"]) <= i:
                out["query_gpu"].append({})
            out["query_gpu"][i].update(row)
    out["q_health"] = _run([smi, "-q", "-d", "ECC,PAGE_RETIREMENT,ROW_REMAPPER,TEMPERATURE,POWER,PERFORMANCE"])
    nvlink = _run([smi, "nvlink", "-s"])
    out["nvlink_status"] = nvlink
    out["nvlink_parsed"] = parse_nvlink_status(nvlink["output"]) if nvlink["rc"] == 0 else None
    return out


_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINK = re.compile(r"^\s+Link (\d+): (.*)$")


def parse_nvlink_status(text: str) -> dict[int, list[dict[str, t.Any]]]:
    """`nvidia-smi nvlink -s`: "Link N: 26.562 GB/s" for an active link, "Link N: <inactive>" for one down."""
    gpus: dict[int, list[dict[str, t.Any]]] = {}
    current = None
    for line in text.splitlines():
        gpu = _NVLINK_GPU.match(line)
        if gpu:
            current = int(gpu.group(1))
            gpus[current] = []
            continue
        link = _NVLINK_LINK.match(line)
        if link and current is not None:
            gpus[current].append({"link": int(link.group(1)), "active": "inactive" not in link.group(2).lower()})
    return gpus


def parse_smi_xml(text: str) -> dict[str, t.Any]:
    root = ET.fromstring(text)

    def get(node: t.Any, path: str) -> str | None:
        found = node.find(path)
        return None if found is None or found.text is None else found.text.strip()

    out: dict[str, t.Any] = {
        "driver_version": get(root, "driver_version"),
        "cuda_version": get(root, "cuda_version"),
        "attached_gpus": get(root, "attached_gpus"),
        "gpus": [],
    }
    for gpu in root.findall("gpu"):
        out["gpus"].append(
            {
                "id": gpu.get("id"),
                "product_name": get(gpu, "product_name"),
                "product_architecture": get(gpu, "product_architecture"),
                "serial": get(gpu, "serial"),
                "uuid": get(gpu, "uuid"),
                "minor_number": get(gpu, "minor_number"),
                "board_part_number": get(gpu, "board_part_number"),
                "pci_bus_id": get(gpu, "pci/pci_bus_id"),
                "pci_device_id": get(gpu, "pci/pci_device_id"),
                "pci_sub_system_id": get(gpu, "pci/pci_sub_system_id"),
                "fb_total": get(gpu, "fb_memory_usage/total"),
                "fb_reserved": get(gpu, "fb_memory_usage/reserved"),
                "persistence_mode": get(gpu, "persistence_mode"),
                "mig_current": get(gpu, "mig_mode/current_mig"),
                "mig_pending": get(gpu, "mig_mode/pending_mig"),
                "processes": [get(p, "pid") for p in gpu.findall("processes/process_info")],
                "health": {
                    "ecc_current": get(gpu, "ecc_mode/current_ecc"),
                    "ecc_pending": get(gpu, "ecc_mode/pending_ecc"),
                    "remap_corr": get(gpu, "remapped_rows/remapped_row_corr"),
                    "remap_unc": get(gpu, "remapped_rows/remapped_row_unc"),
                    "remap_pending": get(gpu, "remapped_rows/remapped_row_pending"),
                    "remap_failure": get(gpu, "remapped_rows/remapped_row_failure"),
                    "gen_max": get(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen"),
                    "gen_current": get(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen"),
                    "width_max": get(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width"),
                    "width_current": get(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width"),
                    "replay_counter": get(gpu, "pci/replay_counter"),
                    "temp_shutdown": get(gpu, "temperature/gpu_temp_max_threshold"),
                    "temp_slowdown": get(gpu, "temperature/gpu_temp_slow_threshold"),
                    "fabric_state": get(gpu, "fabric/state"),
                    "fabric_status": get(gpu, "fabric/status"),
                    "fabric_clique_id": get(gpu, "fabric/cliqueId"),
                    "fabric_cluster_uuid": get(gpu, "fabric/clusterUuid"),
                    "recovery_action": get(gpu, "gpu_recovery_action"),
                },
            }
        )
    return out


_LGIP_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([\d.]+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|")


def parse_lgip(text: str) -> list[dict[str, t.Any]]:
    rows = []
    for line in text.splitlines():
        m = _LGIP_ROW.match(line)
        if m:
            rows.append(
                {
                    "gpu": int(m.group(1)),
                    "name": m.group(2),
                    "id": int(m.group(3)),
                    "free": int(m.group(4)),
                    "total": int(m.group(5)),
                    "memory_gib": m.group(6),
                    "p2p": m.group(7),
                    "sm": int(m.group(8)),
                    "dec": int(m.group(9)),
                    "enc": int(m.group(10)),
                }
            )
    return rows


# --- the collection's own readers -------------------------------------------------------
def read_collector(repo: str) -> dict[str, t.Any]:
    module = import_module_file("plugins/modules/nvml_info.py", repo)
    result = {}
    for gather in (False, True):
        collector = module.NvmlFactsCollector(library=None, gather_mig_profiles=gather)
        try:
            result["gather_mig_profiles={0}".format(gather)] = collector.collect()
        except module.NvmlFactsError as exc:
            result["gather_mig_profiles={0}".format(gather)] = {"failed": str(exc), "partial": collector.facts}
    return result


def read_mig_plan(nvml: types.SimpleNamespace) -> dict[str, t.Any]:
    """mig_config's read path: plan the 'MIG off everywhere' layout (asserts what a disabled GPU is)."""
    mig_config = importlib.import_module(PKG + ".module_utils._mig.config")
    mig_apply = importlib.import_module(PKG + ".module_utils._mig.apply")
    mig_export = importlib.import_module(PKG + ".module_utils._mig.export")
    config = {"version": "v1", "mig-configs": {"all-disabled": [{"devices": "all", "mig-enabled": False}]}}
    entries = mig_config.select_label(mig_config.parse_config(config), "all-disabled")
    s = nvml.NvmlSession()
    s.init()
    try:
        node = mig_apply.MigController(entries, "all-disabled", s).plan()
        return {"plans": [mig_export.plan_to_dict(p) for p in node.plans], "reset_gpus": list(node.reset_gpus)}
    except Exception as exc:  # pylint: disable=broad-except
        return error_name(nvml, exc)
    finally:
        s.shutdown()


def read_sim_models(repo: str, name: t.Any) -> dict[str, t.Any] | None:
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    for path in sorted(glob.glob(os.path.join(repo, "tests/nvml-sim/models/*.yml"))):
        with open(path, encoding="utf-8") as f:
            model = yaml.safe_load(f)
        if model.get("name") == name:
            model["_path"] = os.path.relpath(path, repo)
            return model
    return None


# --- comparing ----------------------------------------------------------------------------
class Compare:
    def __init__(self) -> None:
        self.mismatches: list[dict[str, t.Any]] = []
        self.matched: list[str] = []

    def same(self, field: str, volatile: float = 0, **values: t.Any) -> None:
        present = {k: v for k, v in values.items() if v is not None}
        vals = list(present.values())
        if len(vals) < 2:
            return
        if volatile and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            ok = max(vals) - min(vals) <= volatile
        else:
            ok = all(v == vals[0] for v in vals[1:])
        if ok:
            self.matched.append(field)
        else:
            self.mismatches.append(dict(field=field, **present))


def _int(text: t.Any) -> int | None:
    try:
        return int(str(text), 0)
    except (TypeError, ValueError):
        return None


def _smi_bool(text: t.Any) -> bool | None:
    return {"Enabled": True, "Disabled": False}.get(text)


def compare(
    ours: dict[str, t.Any],
    ref: dict[str, t.Any],
    smi: dict[str, t.Any],
    nvml: types.SimpleNamespace,
    collector: dict[str, t.Any] | None,
    ansible: dict[str, t.Any] | None,
) -> Compare:
    c = Compare()
    xml = smi.get("xml") if isinstance(smi.get("xml"), dict) and "gpus" in smi["xml"] else {}
    c.same("driver_version", ours=ours["driver_version"], pynvml=ref.get("driver_version"), smi_xml=xml.get("driver_version"))
    c.same("nvml_version", ours=ours["nvml_version"], pynvml=ref.get("nvml_version"))
    c.same("cuda_driver_version", ours=ours["cuda_driver_version"], pynvml=ref.get("cuda_driver_version"))
    if isinstance(ours["cuda_driver_version"], int):
        c.same("cuda_driver_version (major.minor)", ours=nvml.format_cuda_version(ours["cuda_driver_version"]), smi_xml=xml.get("cuda_version"))
    c.same("device_count", ours=ours["device_count"], pynvml=ref.get("device_count"), smi_xml=_int(xml.get("attached_gpus")))
    for i, d in enumerate(ours["devices"]):
        r = ref["devices"][i] if i < len(ref.get("devices", [])) else {}
        q = smi["query_gpu"][i] if i < len(smi.get("query_gpu", [])) else {}
        x = xml["gpus"][i] if xml and i < len(xml["gpus"]) else {}
        g = "gpu{0}.".format(i)
        for key in (
            "index",
            "name",
            "uuid",
            "serial",
            "board_part_number",
            "minor_number",
            "architecture",
            "compute_capability",
            "persistence_mode",
            "mig_mode",
            "max_mig_device_count",
        ):
            c.same(g + key, ours=d.get(key), pynvml=r.get(key))
        c.same(g + "name (smi)", ours=d["name"], smi=q.get("name"), smi_xml=x.get("product_name"))
        c.same(g + "uuid (smi)", ours=d["uuid"], smi=q.get("uuid"), smi_xml=x.get("uuid"))
        c.same(g + "serial (smi)", ours=d["serial"], smi=q.get("serial"), smi_xml=x.get("serial"))
        c.same(g + "board_part_number (smi)", ours=d["board_part_number"], smi_xml=x.get("board_part_number"))
        c.same(g + "minor_number (smi)", ours=d["minor_number"], smi_xml=_int(x.get("minor_number")))
        c.same(
            g + "architecture (smi)",
            ours=nvml.architecture_name(d["architecture"]) if isinstance(d["architecture"], int) else d["architecture"],
            smi_xml=(x.get("product_architecture") or "").lower() or None,
        )
        if isinstance(d["compute_capability"], list):
            c.same(g + "compute_capability (smi)", ours="{0}.{1}".format(*d["compute_capability"]), smi=q.get("compute_cap"))
        c.same(g + "persistence_mode (smi)", ours=d["persistence_mode"], smi=_smi_bool(q.get("persistence_mode")))
        if isinstance(d["mig_mode"], dict):
            c.same(g + "mig_mode.current (smi)", ours=d["mig_mode"]["current"], smi=_smi_bool(q.get("mig.mode.current")))
            c.same(g + "mig_mode.pending (smi)", ours=d["mig_mode"]["pending"], smi=_smi_bool(q.get("mig.mode.pending")))
        c.same(g + "handle_by_uuid", ours=d.get("handle_by_uuid_matches"), expected=True)
        c.same(g + "handle_by_bus_id", ours=d.get("handle_by_bus_id_matches"), expected=True)
        pci, rpci = d["pci"], r.get("pci") or {}
        if isinstance(pci, dict):
            for key in pci:
                c.same(g + "pci." + key, ours=pci[key], pynvml=rpci.get(key))
            c.same(g + "pci.bus_id (smi)", ours=pci["bus_id"], smi=q.get("pci.bus_id"), smi_xml=x.get("pci_bus_id"))
            c.same(g + "pci.domain (smi)", ours=pci["domain"], smi=_int(q.get("pci.domain")))
            c.same(g + "pci.bus (smi)", ours=pci["bus"], smi=_int(q.get("pci.bus")))
            c.same(g + "pci.device (smi)", ours=pci["device"], smi=_int(q.get("pci.device")))
            c.same(g + "pci.pci_device_id (smi)", ours=pci["pci_device_id"], smi=_int(q.get("pci.device_id")))
            c.same(g + "pci.pci_subsystem_id (smi)", ours=pci["pci_subsystem_id"], smi=_int(q.get("pci.sub_device_id")))
        mem, rmem = d["memory"], r.get("memory") or {}
        if isinstance(mem, dict):
            for key in ("total", "reserved"):
                c.same(g + "memory." + key, ours=mem[key], pynvml=rmem.get(key))
                c.same(g + "memory.{0} MiB (smi)".format(key), ours=mem[key] // MIB if mem[key] is not None else None, smi=_int(q.get("memory." + key)))
            for key in ("free", "used"):
                c.same(g + "memory." + key, volatile=VOLATILE_MIB * MIB, ours=mem[key], pynvml=rmem.get(key))
                c.same(g + "memory.{0} MiB (smi)".format(key), volatile=VOLATILE_MIB, ours=mem[key] // MIB, smi=_int(q.get("memory." + key)))
        if isinstance(d["processes"], list):
            pids = sorted(p["pid"] for p in d["processes"])
            c.same(g + "processes", ours=d["processes"], pynvml=r.get("processes"))
            apps = smi.get("compute_apps") if isinstance(smi.get("compute_apps"), list) else []
            c.same(g + "process pids (smi)", ours=pids, smi=sorted(_int(a["pid"]) for a in apps if a.get("gpu_uuid") == d["uuid"]))
        for key in ("gpu_instance_profiles", "placements", "remaining_capacity"):
            for idx, prof in (d.get(key) or {}).items():
                c.same(g + "{0}[{1}]".format(key, idx), ours=prof, pynvml=(r.get(key) or {}).get(idx))
        lgip = (smi.get("mig") or {}).get("lgip_parsed") or []
        ours_profiles = {p["id"]: p for p in d["gpu_instance_profiles"].values() if "id" in p}
        for row in (row for row in lgip if row["gpu"] == i):
            p = ours_profiles.get(row["id"])
            got = (
                None
                if p is None
                else {
                    "name": (p["name"] or "").replace("MIG ", ""),
                    "total": p["instance_count"],
                    "sm": p["multiprocessor_count"],
                    "memory_gib": "{0:.2f}".format(p["memory_size_mb"] / 1024.0),
                }
            )
            c.same(
                g + "lgip id {0}".format(row["id"]),
                ours=got,
                smi={"name": row["name"], "total": row["total"], "sm": row["sm"], "memory_gib": row["memory_gib"]},
            )
        for label, facts in (("collector", collector and collector.get("gather_mig_profiles=True")), ("ansible nvml_info", ansible)):
            if not facts or "gpus" not in facts or i >= len(facts["gpus"]):
                continue
            f = facts["gpus"][i]
            c.same(g + label, pynvml=_facts_view(r, nvml), **{label.replace(" ", "_"): _facts_view_of(f)})
    return c


def _smi_flag(text: t.Any) -> bool | None:
    return {"enabled": True, "yes": True, "1": True, "disabled": False, "no": False, "0": False}.get(str(text).strip().lower()) if text is not None else None


def _num(text: t.Any) -> t.Any:
    """An nvidia-smi number ("16", "16x", "71.23 W", "0x0000000000000001"); None for N/A and the like."""
    if text is None:
        return None
    m = re.match(r"^\s*(0x[0-9a-fA-F]+|-?\d+(?:\.\d+)?)", str(text))
    if not m:
        return None
    value = m.group(1)
    return int(value, 16) if value.startswith("0x") else float(value) if "." in value else int(value)


def _leaves(tree: t.Any, path: str = "") -> dict[str, t.Any]:
    if isinstance(tree, dict) and "error" not in tree:
        found: dict[str, t.Any] = {}
        for key, value in tree.items():
            found.update(_leaves(value, path + "." + key if path else key))
        return found
    return {path: tree}


# <gpu_recovery_action> in `nvidia-smi -q -x`: driver 580 prints "None" for
# NVML_GPU_RECOVERY_ACTION_NONE (seen on an H200, tests/device/h200-reading-*.json);
# the other words are not confirmed on a real GPU yet, so they are not compared.
SMI_RECOVERY_ACTIONS = {"none": 0}

# Leaves that move on a live GPU between two reads: compared with a tolerance
# (numbers) or only recorded (the rest).
VOLATILE_HEALTH = {"temperature.current_c": VOLATILE_TEMP_C, "power.draw_w": VOLATILE_POWER_W}
RECORDED_ONLY = {"pcie.gen_current", "clock_event_reasons.mask", "clock_event_reasons.active"}


def compare_health(c: Compare, ours: dict[str, t.Any], ref: dict[str, t.Any], smi: dict[str, t.Any], xml: dict[str, t.Any]) -> None:
    """Every health leaf: our binding against pynvml, and against nvidia-smi where it has the field."""
    for i, mine in enumerate(ours.get("devices", [])):
        g = "gpu{0}.health.".format(i)
        h = mine["health"]
        if "error" in h:
            c.mismatches.append({"field": g + "read_health", "ours": h})
            continue
        theirs = (ref.get("devices") or [{}] * (i + 1))[i] if "error" not in ref else {}
        ours_leaves, ref_leaves = _leaves(h), _leaves(theirs) if theirs else {}
        for path, value in sorted(ours_leaves.items()):
            if path in RECORDED_ONLY or path not in ref_leaves:
                continue
            tolerance = VOLATILE_HEALTH.get(path, 0)
            c.same(g + path, volatile=tolerance, ours=value, pynvml=ref_leaves[path])
        q = smi["query_gpu"][i] if i < len(smi.get("query_gpu", [])) else {}
        x = (xml["gpus"][i].get("health") or {}) if xml and i < len(xml.get("gpus", [])) else {}
        ecc, pcie, temp = h["ecc"], h["pcie"], h["temperature"]
        c.same(g + "ecc.mode_current (smi)", ours=ecc["mode_current"], smi=_smi_flag(q.get("ecc.mode.current")), smi_xml=_smi_flag(x.get("ecc_current")))
        c.same(g + "ecc.mode_pending (smi)", ours=ecc["mode_pending"], smi=_smi_flag(q.get("ecc.mode.pending")), smi_xml=_smi_flag(x.get("ecc_pending")))
        for kind in ("corrected", "uncorrected"):
            for counter in ("volatile", "aggregate"):
                c.same(
                    g + "ecc.{0}.{1} (smi)".format(counter, kind), ours=ecc[counter][kind], smi=_num(q.get("ecc.errors.{0}.{1}.total".format(kind, counter)))
                )
        retired = h["retired_pages"]
        c.same(g + "retired_pages.single_bit_ecc (smi)", ours=retired["single_bit_ecc"], smi=_num(q.get("retired_pages.single_bit_ecc.count")))
        c.same(g + "retired_pages.double_bit_ecc (smi)", ours=retired["double_bit_ecc"], smi=_num(q.get("retired_pages.double_bit.count")))
        c.same(g + "retired_pages.pending (smi)", ours=retired["pending"], smi=_smi_flag(q.get("retired_pages.pending")))
        rows = h["remapped_rows"]
        c.same(g + "remapped_rows.correctable (smi)", ours=rows["correctable"], smi=_num(q.get("remapped_rows.correctable")), smi_xml=_num(x.get("remap_corr")))
        c.same(
            g + "remapped_rows.uncorrectable (smi)",
            ours=rows["uncorrectable"],
            smi=_num(q.get("remapped_rows.uncorrectable")),
            smi_xml=_num(x.get("remap_unc")),
        )
        c.same(
            g + "remapped_rows.pending (smi)", ours=rows["pending"], smi=_smi_flag(q.get("remapped_rows.pending")), smi_xml=_smi_flag(x.get("remap_pending"))
        )
        c.same(
            g + "remapped_rows.failure (smi)", ours=rows["failure"], smi=_smi_flag(q.get("remapped_rows.failure")), smi_xml=_smi_flag(x.get("remap_failure"))
        )
        c.same(g + "recovery_action (smi_xml)", ours=h["recovery_action"], smi_xml=SMI_RECOVERY_ACTIONS.get(str(x.get("recovery_action")).strip().lower()))
        c.same(g + "pcie.gen_max (smi)", ours=pcie["gen_max"], smi=_num(q.get("pcie.link.gen.max")), smi_xml=_num(x.get("gen_max")))
        c.same(g + "pcie.width_max (smi)", ours=pcie["width_max"], smi=_num(q.get("pcie.link.width.max")), smi_xml=_num(x.get("width_max")))
        c.same(g + "pcie.width_current (smi)", ours=pcie["width_current"], smi=_num(q.get("pcie.link.width.current")), smi_xml=_num(x.get("width_current")))
        c.same(g + "pcie.replay_counter (smi_xml)", ours=pcie["replay_counter"], smi_xml=_num(x.get("replay_counter")))
        c.same(g + "temperature.current_c (smi)", volatile=VOLATILE_TEMP_C, ours=temp["current_c"], smi=_num(q.get("temperature.gpu")))
        c.same(g + "temperature.slowdown_c (smi_xml)", ours=temp["slowdown_c"], smi_xml=_num(x.get("temp_slowdown")))
        c.same(g + "temperature.shutdown_c (smi_xml)", ours=temp["shutdown_c"], smi_xml=_num(x.get("temp_shutdown")))
        c.same(g + "power.limit_w (smi)", volatile=1, ours=h["power"]["limit_w"], smi=_num(q.get("enforced.power.limit")))
        c.same(g + "power.draw_w (smi)", volatile=VOLATILE_POWER_W, ours=h["power"]["draw_w"], smi=_num(q.get("power.draw")))
        links = (smi.get("nvlink_parsed") or {}).get(i)
        if links is not None:
            c.same(g + "nvlink (smi nvlink -s)", ours=h["nvlink"], smi=links)
        fabric = h["fabric"]
        if isinstance(fabric, dict) and x.get("fabric_state") and x["fabric_state"].strip().upper() != "N/A":
            c.same(g + "fabric.state (smi_xml)", ours=fabric["state"], smi_xml=x["fabric_state"].strip().lower().replace(" ", "_"))
            if fabric["clique_id"] is not None:
                c.same(g + "fabric.clique_id (smi_xml)", ours=fabric["clique_id"], smi_xml=_num(x.get("fabric_clique_id")))
            if fabric["cluster_uuid"] is not None and x.get("fabric_cluster_uuid"):
                c.same(g + "fabric.cluster_uuid (smi_xml)", ours=fabric["cluster_uuid"], smi_xml=x["fabric_cluster_uuid"].strip().lower())


def _facts_view(r: dict[str, t.Any], nvml: types.SimpleNamespace) -> dict[str, t.Any]:
    """What nvml_info should report, built from pynvml's reading."""
    profiles = sorted((p for p in r["gpu_instance_profiles"].values() if "id" in p), key=lambda p: p["index"])
    return {
        "name": r["name"],
        "uuid": r["uuid"],
        "serial": r["serial"],
        "board_part_number": r["board_part_number"],
        "minor_number": r["minor_number"],
        "bus_id": r["pci"]["bus_id"],
        "device_id": "0x{0:08X}".format(r["pci"]["pci_device_id"]),
        "subsystem_id": "0x{0:08X}".format(r["pci"]["pci_subsystem_id"]),
        "memory_total_mib": r["memory"]["total"] // MIB,
        "architecture": nvml.architecture_name(r["architecture"]),
        "compute_capability": "{0}.{1}".format(*r["compute_capability"]),
        "persistence_mode": r["persistence_mode"],
        "mig_enabled": r["mig_mode"]["current"],
        "mig_pending": r["mig_mode"]["pending"],
        "profile_ids": [p["id"] for p in profiles],
        "pids": sorted(p["pid"] for p in r["processes"]) if isinstance(r["processes"], list) else None,
    }


def _facts_view_of(f: dict[str, t.Any]) -> dict[str, t.Any]:
    return {
        "name": f["name"],
        "uuid": f["uuid"],
        "serial": f["serial"],
        "board_part_number": f["board_part_number"],
        "minor_number": f["minor_number"],
        "bus_id": (f["pci"] or {}).get("bus_id"),
        "device_id": (f["pci"] or {}).get("device_id"),
        "subsystem_id": (f["pci"] or {}).get("subsystem_id"),
        "memory_total_mib": f["memory_total_mib"],
        "architecture": f["architecture"],
        "compute_capability": f["compute_capability"],
        "persistence_mode": f["persistence_mode"],
        "mig_enabled": f["mig"]["enabled"],
        "mig_pending": f["mig"]["pending_enabled"],
        "profile_ids": [p["id"] for p in sorted(f["mig"].get("profiles", []), key=lambda p: p["index"])],
        "pids": sorted(p["pid"] for p in f["processes"]),
    }


def sim_differences(model: dict[str, t.Any] | None, d: dict[str, t.Any], nvml: types.SimpleNamespace) -> list[t.Any]:
    """Where tests/nvml-sim's model of this GPU differs from the reading (informational)."""
    if model is None:
        return [{"model": None, "note": "no tests/nvml-sim model has this name"}]
    diffs = []

    def check(field: str, sim: t.Any, real: t.Any) -> None:
        if real is not None and not isinstance(real, dict) and sim != real:
            diffs.append({"field": field, "sim": sim, "real": real})

    pci = d["pci"] if isinstance(d["pci"], dict) else {}
    mem = d["memory"] if isinstance(d["memory"], dict) else {}
    check("arch", model.get("arch"), d["architecture"])
    check("cuda_compute_capability", model.get("cuda_compute_capability"), d["compute_capability"])
    check("pci_device_id", _int(model.get("pci_device_id")), pci.get("pci_device_id"))
    check("pci_subsystem_id", _int(model.get("pci_subsystem_id")), pci.get("pci_subsystem_id"))
    check("board_part_number", model.get("board_part_number"), d["board_part_number"])
    check("memory_total_mib", model.get("memory_total_mib"), mem["total"] // MIB if mem else None)
    check("memory_reserved_mib", model.get("memory_reserved_mib"), mem["reserved"] // MIB if mem.get("reserved") else None)
    real = {p["index"]: p for p in d["gpu_instance_profiles"].values() if "id" in p}
    for sp in model.get("profiles", []):
        rp = real.get(sp["index"])
        if rp is None:
            if real:
                diffs.append({"field": "profile index {0}".format(sp["index"]), "sim": sp["name"], "real": None})
            continue
        for sk, rk in (
            ("id", "id"),
            ("slices", "slice_count"),
            ("instances", "instance_count"),
            ("memory_mib", "memory_size_mb"),
            ("sm", "multiprocessor_count"),
            ("ce", "copy_engine_count"),
            ("dec", "decoder_count"),
            ("enc", "encoder_count"),
            ("jpeg", "jpeg_count"),
            ("ofa", "ofa_count"),
            ("p2p", "is_p2p_supported"),
        ):
            check("profile {0}.{1}".format(sp["name"], sk), sp.get(sk), int(rp[rk]) if sk == "p2p" else rp[rk])
        check("profile {0}.name".format(sp["name"]), "MIG " + sp["name"], rp["name"])
        placements = d["placements"].get(str(rp["id"]))
        if isinstance(placements, list):
            want = [{"start": s, "size": sp["placements"]["size"]} for s in sp["placements"]["starts"]]
            check("profile {0}.placements".format(sp["name"]), want, placements)
    for idx, rp in real.items():
        if idx not in {sp["index"] for sp in model.get("profiles", [])}:
            diffs.append({"field": "profile index {0}".format(idx), "sim": None, "real": rp["name"]})
    return diffs


def known_model_differences(repo: str, d: dict[str, t.Any]) -> t.Any:
    """plugins/module_utils/_mig/profiles.py's table (used while MIG is off) against the reading."""
    profiles_mod = importlib.import_module(PKG + ".module_utils._mig.profiles")
    if not isinstance(d["pci"], dict):
        return None
    model = profiles_mod.known_model(d["pci"]["pci_device_id"])
    if model is None:
        return {"known_model": None}
    out: dict[str, t.Any] = {"known_model": model.model, "differences": []}
    real = {p["id"]: p for p in d["gpu_instance_profiles"].values() if "id" in p}
    if not real:
        out["note"] = "no profiles read (MIG off or not supported); table not checked"
        return out
    for (pid, slices, instances, size, starts), name in zip(model.geometry, model.names):
        rp = real.get(pid)
        got = None if rp is None else (rp["slice_count"], rp["instance_count"], (rp["name"] or "").replace("MIG ", ""))
        want = (slices, instances, name)
        if got != want:
            out["differences"].append({"id": pid, "table": want, "real": got})
        pl = d["placements"].get(str(pid))
        if isinstance(pl, list) and pl != [{"start": s, "size": size} for s in starts]:
            out["differences"].append({"id": pid, "table_placements": [size, list(starts)], "real": pl})
    return out


def read_ansible_result(path: str) -> dict[str, t.Any]:
    """The nvml result of `ansible localhost -m gpufleet.nvidia.nvml_info` (minimal callback: 'host | STATUS => {...}')."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    sep, body = text.partition(" => ")[1:]
    try:
        return json.loads(body)["nvml"] if sep else {"error": "no ' => ' in " + path}
    except (ValueError, KeyError) as exc:
        return {"error": "{0}: {1}".format(path, exc)}


def redact(report: t.Any, secrets: set[str]) -> t.Any:
    if isinstance(report, dict):
        return {k: redact(v, secrets) for k, v in report.items()}
    if isinstance(report, list):
        return [redact(v, secrets) for v in report]
    if isinstance(report, str):
        for s in secrets:
            report = report.replace(s, "<redacted>")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--repo", default=".", help="collection checkout (default: .)")
    ap.add_argument("--nvml", help="binding package directory to load instead of <repo>/plugins/module_utils/_nvml")
    ap.add_argument("--ansible-json", help="JSON of an nvml_info run (ansible's json callback) to compare too")
    ap.add_argument("--expect-pid", type=int, action="append", default=[], help="a process known to hold GPU memory; it must appear in our reading")
    ap.add_argument("--output", help="write the report here as well as to stdout")
    ap.add_argument("--redacted-output", help="also write a copy with UUIDs and serials replaced by <redacted>")
    args = ap.parse_args(argv)

    nvml = load_collection(args.repo, args.nvml)
    indices = range(nvml.NVML_GPU_INSTANCE_PROFILE_COUNT + 2)
    ours = read_ours(nvml, indices)
    ref = read_pynvml(nvml, indices)
    smi = read_smi()
    try:
        collector: dict[str, t.Any] | None = read_collector(args.repo)
    except Exception as exc:  # pylint: disable=broad-except
        collector = {"error": "{0}: {1}".format(type(exc).__name__, exc)}
    health_ours = read_health_ours(nvml)
    health_ref = read_health_pynvml(nvml)
    health_smi = read_smi_health()
    try:
        health_timing: dict[str, t.Any] = time_collector(args.repo)
    except Exception as exc:  # pylint: disable=broad-except
        health_timing = {"error": "{0}: {1}".format(type(exc).__name__, exc)}
    ansible = None
    if args.ansible_json and os.path.exists(args.ansible_json):
        ansible = read_ansible_result(args.ansible_json)
    if "error" in ref:
        result = Compare()
        result.mismatches.append({"field": "pynvml", "error": ref["error"]})
    else:
        result = compare(ours, ref, smi, nvml, collector, ansible)
    compare_health(result, health_ours, health_ref, health_smi, smi.get("xml") if isinstance(smi.get("xml"), dict) and "gpus" in smi["xml"] else {})
    for pid in args.expect_pid:
        seen = [p["pid"] for d in ours["devices"] if isinstance(d["processes"], list) for p in d["processes"]]
        result.same("expected pid {0} seen".format(pid), ours=pid in seen, expected=True)
    report = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "binding": os.path.relpath(args.nvml, args.repo) if args.nvml else "plugins/module_utils/_nvml",
        "python": sys.version.split()[0],
        "mismatches": result.mismatches,
        "matched_count": len(result.matched),
        "matched": result.matched,
        "layouts": struct_layouts(nvml),
        "ours": ours,
        "pynvml": ref,
        "nvidia_smi": smi,
        "collector": collector,
        "health": {"ours": health_ours, "pynvml": health_ref, "nvidia_smi": health_smi, "nvml_info_added_by_health": health_timing},
        "ansible_nvml_info": ansible,
        "mig_plan": read_mig_plan(nvml),
        "simulator": [{"gpu": d["index"], "differences": sim_differences(read_sim_models(args.repo, d["name"]), d, nvml)} for d in ours["devices"]],
        "known_models": [known_model_differences(args.repo, d) for d in ours["devices"]],
    }
    layouts = report["layouts"]
    if "structs" in layouts:
        for name, s in layouts["structs"].items():
            if s.get("pynvml") and not s["same"]:
                result.mismatches.append({"field": "struct " + name, "ours": s.get("ours"), "pynvml": s.get("theirs")})
        for name in layouts["constants_differing"]:
            result.mismatches.append(dict(field="constant " + name, **layouts["constants"][name]))
    text = json.dumps(report, indent=2, sort_keys=False, default=str)
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    if args.redacted_output:
        secrets = set()
        for d in ours["devices"]:
            for key in ("uuid", "serial"):
                if isinstance(d.get(key), str) and d[key]:
                    secrets.add(d[key])
            secrets.update(m["uuid"] for m in d.get("mig_devices", []) if isinstance(m.get("uuid"), str))
        with open(args.redacted_output, "w", encoding="utf-8") as f:
            f.write(json.dumps(redact(report, secrets), indent=2, default=str) + "\n")
    sys.stderr.write("{0} fields matched, {1} mismatches\n".format(len(result.matched), len(result.mismatches)))
    return 1 if result.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
