# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The facts nvml_info reports, read in one NVML session: the driver, every GPU
(identity, PCI, memory, architecture, MIG mode, instances and profiles,
processes) and, where asked, each GPU's health (_nvml/health.py).

A call this GPU or driver cannot answer leaves its field null; a GPU that fell
off the bus is reported as lost with its other fields at their defaults; any
other NVML error stops gathering with NvmlFactsError, naming call and GPU.
"""

from __future__ import annotations

import time
import typing as t

from .constants import (
    DEFAULT_LIBRARY,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_UNKNOWN,
    NvmlError,
    NvmlLibraryNotFoundError,
)
from .health import FABRIC_PENDING, empty_health, read_fabric, read_health
from .session import NvmlSession, answer_or_none
from .values import Device, GpuInstance, GpuInstanceProfile, Placement, architecture_name, to_dict

_MIB = 1024 * 1024

# Answers that mean "this GPU or driver cannot tell": the field becomes null
# instead of failing the task. A missing symbol (older driver) counts too: a
# facts module should degrade on an old driver, not refuse to run.
_UNAVAILABLE = frozenset({NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND})

# nvmlInit outcomes that describe the host rather than a failure of the task.
_INIT_STATUS = {
    NVML_ERROR_DRIVER_NOT_LOADED: ("driver_not_loaded", False),
    NVML_ERROR_LIBRARY_NOT_FOUND: ("library_not_found", False),
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: ("version_mismatch", True),
}

# A GPU that fell off the bus: NVML answers GPU_IS_LOST for it, and a real
# driver's nvmlDeviceGetHandleByIndex often answers UNKNOWN instead (nvidia-smi
# then prints "Unable to determine the device handle for GPU ...: Unknown
# Error"; NVIDIA/open-gpu-kernel-modules#387, NVIDIA/dcgm-exporter#604,
# koordinator-sh/koordinator#2706). Either way that GPU is reported lost and
# the others are still read: a health check must be able to name it.
_LOST_CODES = {
    "nvmlDeviceGetHandleByIndex_v2": frozenset({NVML_ERROR_GPU_IS_LOST, NVML_ERROR_UNKNOWN}),
}
_LOST = frozenset({NVML_ERROR_GPU_IS_LOST})

# How often a GPU whose fabric registration is still starting is read again.
FABRIC_POLL_S = 2.0

T = t.TypeVar("T")


def unread_gpu(index: int, gather_mig_profiles: bool, gather_health: bool) -> dict[str, t.Any]:
    """A GPU's record before anything is read from it; a lost GPU keeps it for every field not read."""
    gpu: dict[str, t.Any] = {
        "index": index,
        "name": None,
        "uuid": None,
        "serial": None,
        "board_part_number": None,
        "minor_number": None,
        "pci": None,
        "memory_total_mib": None,
        "memory_total_bytes": None,
        "architecture": "unknown",
        "architecture_id": None,
        "compute_capability": None,
        "persistence_mode": None,
        "mig": {"capable": False, "enabled": False, "pending_enabled": False, "pending_change": False, "gpu_instances": [], "devices": []},
        "processes": [],
        "lost": False,
    }
    if gather_mig_profiles:
        gpu["mig"]["profiles"] = []
    if gather_health:
        gpu["health"] = empty_health()
    return gpu


class NvmlFactsError(Exception):
    """Gathering stopped on an NVML error; the message names call and GPU."""


class NvmlFactsCollector:
    """Reads everything nvml_info reports, in one NVML session."""

    # Calls the facts cannot do without: even NOT_SUPPORTED from them fails
    # the task, because there is no honest "null" for a device count, a
    # device handle or the identity of an existing GPU/compute instance.
    REQUIRED_CALLS = frozenset(
        {
            "nvmlInit_v2",
            "nvmlInit",
            "nvmlInitWithFlags",
            "nvmlShutdown",
            "nvmlDeviceGetCount_v2",
            "nvmlDeviceGetHandleByIndex_v2",
            "nvmlGpuInstanceGetInfo",
            "nvmlComputeInstanceGetInfo_v2",
        }
    )

    def __init__(
        self,
        library: str | None,
        gather_mig_profiles: bool = False,
        session_factory: t.Callable[[str], NvmlSession] = NvmlSession,
        gather_health: bool = True,
        fabric_wait: float = 0,
        clock: t.Callable[[], float] = time.monotonic,
        sleep: t.Callable[[float], None] = time.sleep,
    ) -> None:
        self.library = library or DEFAULT_LIBRARY
        self.gather_mig_profiles = gather_mig_profiles
        self.gather_health = gather_health
        self.fabric_wait = fabric_wait
        self.session_factory = session_factory
        self.clock, self.sleep = clock, sleep
        self.facts: dict[str, t.Any] = {
            "status": "ok",
            "driver_loaded": False,
            "reason": None,
            "library": self.library,
            "driver_version": None,
            "nvml_version": None,
            "cuda_driver_version": None,
            "gpu_count": 0,
            "gpus": [],
        }
        # Where the current query happens, for error messages ("GPU 0 (GPU-..)").
        self._scope: list[str] = []

    # -- entry point ------------------------------------------------------------
    def collect(self) -> dict[str, t.Any]:
        """Return the facts; raise NvmlFactsError (self.facts stays partial)."""
        try:
            session = self.session_factory(self.library)
        except NvmlLibraryNotFoundError as err:
            return self._not_ready("library_not_found", False, "{0} could not be loaded: {1}; {2}".format(err.path, err.text, err.hint))
        try:
            session.init()
        except NvmlError as err:
            if err.code not in _INIT_STATUS:
                self.facts["reason"] = self._message(err)
                raise NvmlFactsError(self.facts["reason"]) from None
            status, driver_loaded = _INIT_STATUS[err.code]
            return self._not_ready(status, driver_loaded, "{0} loaded, but {1}".format(self.library, err))

        self.facts["driver_loaded"] = True
        self._in_session(session, self._system, self._gpus)
        self._settle_fabric()
        return self.facts

    def _in_session(self, session: NvmlSession, *reads: t.Callable[[NvmlSession], None]) -> None:
        """Run the reads in an initialised session, then shut it down whatever happened.

        Raises NvmlFactsError naming the first error, the reads' or the shutdown's."""
        message = None
        try:
            for read in reads:
                read(session)
        except NvmlError as err:
            message = self._message(err)
        finally:
            self._scope = []
            try:
                session.shutdown()
            except NvmlError as err:
                message = message or self._message(err)
        if message:
            raise NvmlFactsError(message)

    def _not_ready(self, status: str, driver_loaded: bool, reason: str) -> dict[str, t.Any]:
        self.facts.update(status=status, driver_loaded=driver_loaded, reason=reason)
        return self.facts

    def _message(self, err: NvmlError) -> str:
        where = " for " + " ".join(self._scope) if self._scope else ""
        msg = "{0} failed{1}: {2} ({3})".format(err.function, where, err.text, err.name)
        if err.hint:
            msg += "; " + err.hint
        return msg

    @staticmethod
    def _optional(query: t.Callable[..., T], *args: t.Any) -> T | None:
        return answer_or_none(_UNAVAILABLE, query, *args)

    # -- system -------------------------------------------------------------------
    def _system(self, s: NvmlSession) -> None:
        self.facts["driver_version"] = self._optional(s.driver_version)
        self.facts["nvml_version"] = self._optional(s.nvml_version)
        self.facts["cuda_driver_version"] = self._optional(s.cuda_driver_version)
        self.facts["gpu_count"] = s.device_count()

    # -- fabric ---------------------------------------------------------------------
    def _settle_fabric(self) -> None:
        """Read again, for up to fabric_wait seconds, the GPUs whose fabric registration is still starting.

        Fabric Manager registers the GPUs with the NVLink fabric after boot; until it has, CUDA
        cannot use them, but a judge that reads them once right after boot would report a fault
        that settles by itself. Each read is a session of its own, as a later nvidia-smi would be.
        A GPU that was waited for carries the seconds in health.fabric.waited_s.
        """
        if not self.gather_health or self.fabric_wait <= 0:
            return
        pending = [gpu for gpu in self.facts["gpus"] if _fabric_pending(gpu)]
        if not pending:
            return
        start = self.clock()
        deadline = start + self.fabric_wait

        def read_again(session: NvmlSession) -> None:
            for gpu in pending:
                self._scope = ["GPU {0} ({1})".format(gpu["index"], gpu["uuid"])]
                try:
                    gpu["health"]["fabric"] = read_fabric(session, session.device_by_index(gpu["index"]))
                except NvmlError as err:
                    if not _lost(err):
                        raise
                    gpu["lost"] = True  # fell off the bus while waited for, as _gpus reports it

        while pending and self.clock() < deadline:
            self.sleep(min(FABRIC_POLL_S, max(deadline - self.clock(), 0)))
            session = self.session_factory(self.library)
            try:
                session.init()
            except NvmlError as err:
                raise NvmlFactsError(self._message(err)) from None
            self._in_session(session, read_again)
            waited = int(round(self.clock() - start))
            for gpu in pending:
                if gpu["health"]["fabric"] is not None:
                    gpu["health"]["fabric"]["waited_s"] = waited
            pending = [gpu for gpu in pending if _fabric_pending(gpu)]

    # -- GPUs -----------------------------------------------------------------------
    def _gpus(self, s: NvmlSession) -> None:
        for index in range(self.facts["gpu_count"]):
            gpu = unread_gpu(index, self.gather_mig_profiles, self.gather_health)
            # Appended before it is filled, so a failure still returns what
            # was read about this GPU.
            self.facts["gpus"].append(gpu)
            self._scope = ["GPU {0}".format(index)]
            try:
                self._gpu(s, s.device_by_index(index), gpu)
            except NvmlError as err:
                if not _lost(err):
                    raise
                # What was read before stays; the rest of this GPU keeps
                # its defaults and the next GPU is read.
                gpu["lost"] = True

    def _gpu(self, s: NvmlSession, dev: Device, gpu: dict[str, t.Any]) -> None:
        opt = self._optional
        # UUID first: every later error message can then name the GPU by it.
        gpu["uuid"] = opt(s.device_uuid, dev)
        if gpu["uuid"]:
            self._scope = ["GPU {0} ({1})".format(gpu["index"], gpu["uuid"])]
        gpu["name"] = opt(s.device_name, dev)
        gpu["serial"] = opt(s.device_serial, dev)
        gpu["board_part_number"] = opt(s.device_board_part_number, dev)
        gpu["minor_number"] = opt(s.device_minor_number, dev)

        pci = opt(s.device_pci_info, dev)
        if pci is not None:
            gpu["pci"] = {
                "bus_id": pci.bus_id,
                "domain": pci.domain,
                "bus": pci.bus,
                "device": pci.device,
                "device_id": "0x{0:08X}".format(pci.pci_device_id),
                "subsystem_id": "0x{0:08X}".format(pci.pci_subsystem_id),
            }
        memory = opt(s.device_memory, dev)
        gpu["memory_total_mib"] = memory.total // _MIB if memory else None
        gpu["memory_total_bytes"] = memory.total if memory else None

        arch = opt(s.device_architecture, dev)
        gpu["architecture"] = architecture_name(arch)
        gpu["architecture_id"] = arch
        capability = opt(s.device_compute_capability, dev)
        gpu["compute_capability"] = "{0}.{1}".format(*capability) if capability else None
        gpu["persistence_mode"] = opt(s.device_persistence_mode, dev)

        self._mig(s, dev, gpu["mig"])

        processes = opt(s.device_compute_processes, dev) or []
        gpu["processes"] = sorted(
            (
                {
                    "pid": p.pid,
                    "used_memory_mib": None if p.used_memory is None else p.used_memory // _MIB,
                    "gpu_instance_id": p.gpu_instance_id,
                    "compute_instance_id": p.compute_instance_id,
                }
                for p in processes
            ),
            key=lambda p: p["pid"],
        )
        if self.gather_health:
            gpu["health"] = read_health(s, dev)

    # -- MIG --------------------------------------------------------------------------
    def _mig(self, s: NvmlSession, dev: Device, mig: dict[str, t.Any]) -> None:
        mode = self._optional(s.device_mig_mode, dev)
        if mode is None:
            return
        mig.update(
            capable=True,
            enabled=mode.current,
            pending_enabled=mode.pending,
            pending_change=mode.current != mode.pending,
        )
        profiles: list[GpuInstanceProfile] = []
        if mode.current or self.gather_mig_profiles:
            profiles = self._optional(s.gpu_instance_profiles, dev) or []
        if mode.current:
            mig["gpu_instances"] = self._gpu_instances(s, dev, profiles)
            mig["devices"] = self._mig_devices(s, dev)
        if self.gather_mig_profiles:
            mig["profiles"] = [self._profile(s, dev, p) for p in profiles]

    def _gpu_instances(self, s: NvmlSession, dev: Device, profiles: list[GpuInstanceProfile]) -> list[dict[str, t.Any]]:
        found = []
        outer = list(self._scope)
        for profile in profiles:
            handles = self._optional(s.gpu_instances, dev, profile) or []
            for handle in handles:
                info = s.gpu_instance_info(handle)
                self._scope = outer + ["GPU instance {0}".format(info.id)]
                found.append(
                    {
                        "id": info.id,
                        "profile_id": info.profile_id,
                        "profile_index": profile.index,
                        "profile_name": profile.name,
                        "placement": _placement(info.placement),
                        "compute_instances": self._compute_instances(s, handle),
                    }
                )
                self._scope = outer
        return sorted(found, key=lambda gi: gi["id"])

    def _compute_instances(self, s: NvmlSession, gi: GpuInstance) -> list[dict[str, t.Any]]:
        found = []
        for profile in self._optional(s.compute_instance_profiles, gi) or []:
            for handle in self._optional(s.compute_instances, gi, profile) or []:
                info = s.compute_instance_info(handle)
                found.append(
                    {
                        "id": info.id,
                        "profile_id": info.profile_id,
                        "profile_index": profile.index,
                        "placement": _placement(info.placement),
                    }
                )
        return sorted(found, key=lambda ci: ci["id"])

    def _mig_devices(self, s: NvmlSession, dev: Device) -> list[dict[str, t.Any]]:
        opt = self._optional
        found = []
        outer = list(self._scope)
        for index, mig in enumerate(opt(s.mig_devices, dev) or []):
            self._scope = outer + ["MIG device {0}".format(index)]
            memory = opt(s.device_memory, mig)
            attributes = opt(s.device_attributes, mig)
            found.append(
                {
                    "uuid": opt(s.device_uuid, mig),
                    "name": opt(s.device_name, mig),
                    "gpu_instance_id": opt(s.mig_device_gpu_instance_id, mig),
                    "compute_instance_id": opt(s.mig_device_compute_instance_id, mig),
                    "memory_total_mib": memory.total // _MIB if memory else None,
                    "attributes": to_dict(attributes) if attributes else None,
                }
            )
        self._scope = outer

        def order(device: dict[str, t.Any]) -> tuple[int, int, str]:
            gi, ci = device["gpu_instance_id"], device["compute_instance_id"]
            return (-1 if gi is None else gi, -1 if ci is None else ci, device["uuid"] or "")

        return sorted(found, key=order)

    def _profile(self, s: NvmlSession, dev: Device, profile: GpuInstanceProfile) -> dict[str, t.Any]:
        placements = self._optional(s.gpu_instance_possible_placements, dev, profile.id) or []
        return {
            "index": profile.index,
            "id": profile.id,
            "name": profile.name,
            "slices": profile.slice_count,
            "instances": profile.instance_count,
            "memory_mib": profile.memory_size_mb,
            "placements": [_placement(p) for p in sorted(placements, key=lambda p: (p.start, p.size))],
        }


def _placement(placement: Placement) -> dict[str, int]:
    return {"start": placement.start, "size": placement.size}


def _lost(err: NvmlError) -> bool:
    """Whether the error says the GPU fell off the bus (the call's own answer for that, see _LOST_CODES)."""
    return err.code in _LOST_CODES.get(err.function, _LOST)


def _fabric_pending(gpu: dict[str, t.Any]) -> bool:
    fabric = (gpu.get("health") or {}).get("fabric")
    return not gpu.get("lost") and isinstance(fabric, dict) and fabric.get("state") in FABRIC_PENDING
