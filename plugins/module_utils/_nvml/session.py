# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""NvmlSession, the binding's public face: a loaded library with the system and
device queries, and the MIG and health calls of mig_calls.py and
health_calls.py.
"""

from __future__ import annotations

import ctypes
import typing as t

from .constants import (
    _INVALID_INSTANCE_ID,
    _VALUE_NOT_AVAILABLE_ULL,
    NVML_DEVICE_NAME_V2_BUFFER_SIZE,
    NVML_DEVICE_PART_NUMBER_BUFFER_SIZE,
    NVML_DEVICE_SERIAL_BUFFER_SIZE,
    NVML_DEVICE_UUID_V2_BUFFER_SIZE,
    NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_FEATURE_ENABLED,
    NVML_SUCCESS,
    NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE,
    NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE,
    NvmlError,
)
from .health_calls import HealthCalls
from .mig_calls import MigCalls
from .structs import _Memory, _Memory_v2, _PciInfo, _ProcessInfo, nvmlMemory_v2
from .values import Device, MemoryInfo, PciInfo, ProcessInfo, _text, format_cuda_version

T = t.TypeVar("T")


def answer_or_none(unavailable: t.AbstractSet[int], query: t.Callable[..., T], *args: t.Any) -> T | None:
    """query(*args), or None where NVML answers one of the `unavailable` codes.

    The readers (facts.py, health.py) each say which answers mean "this GPU
    or driver cannot tell"; every other NvmlError propagates.
    """
    try:
        return query(*args)
    except NvmlError as err:
        if err.code in unavailable:
            return None
        raise


class NvmlSession(MigCalls, HealthCalls):
    """One loaded NVML library and its init/shutdown lifetime.

    Use as a context manager (nvmlInit on enter, nvmlShutdown on exit) or call
    init()/shutdown() yourself. NVML reference-counts init, so several sessions
    on the same library are fine.
    """

    # -- system ----------------------------------------------------------------
    def driver_version(self) -> str:
        return self._string("nvmlSystemGetDriverVersion", NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE)

    def nvml_version(self) -> str:
        return self._string("nvmlSystemGetNVMLVersion", NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE)

    def cuda_driver_version_int(self) -> int:
        value = ctypes.c_int(0)
        self._call_with_fallback("nvmlSystemGetCudaDriverVersion_v2", (ctypes.byref(value),), (ctypes.byref(value),))
        return value.value

    def cuda_driver_version(self) -> str:
        return format_cuda_version(self.cuda_driver_version_int())

    def device_count(self) -> int:
        return self._uint("nvmlDeviceGetCount_v2")

    # -- device handles ----------------------------------------------------------
    def _handle(self, name: str, *args: t.Any) -> int | None:
        handle = ctypes.c_void_p()
        self._call(name, *args, ctypes.byref(handle))
        return handle.value

    def device_by_index(self, index: int) -> Device:
        return Device(self._handle("nvmlDeviceGetHandleByIndex_v2", index))

    def device_by_uuid(self, uuid: str) -> Device:
        return Device(self._handle("nvmlDeviceGetHandleByUUID", uuid.encode()))

    def device_by_pci_bus_id(self, bus_id: str) -> Device:
        return Device(self._handle("nvmlDeviceGetHandleByPciBusId_v2", bus_id.encode()))

    # -- device queries (work on MIG device handles too where NVML allows) --------
    def device_index(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetIndex", device.value)

    def device_name(self, device: Device) -> str:
        return self._string("nvmlDeviceGetName", NVML_DEVICE_NAME_V2_BUFFER_SIZE, device.value)

    def device_uuid(self, device: Device) -> str:
        return self._string("nvmlDeviceGetUUID", NVML_DEVICE_UUID_V2_BUFFER_SIZE, device.value)

    def device_serial(self, device: Device) -> str:
        return self._string("nvmlDeviceGetSerial", NVML_DEVICE_SERIAL_BUFFER_SIZE, device.value)

    def device_board_part_number(self, device: Device) -> str:
        return self._string("nvmlDeviceGetBoardPartNumber", NVML_DEVICE_PART_NUMBER_BUFFER_SIZE, device.value)

    def device_minor_number(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetMinorNumber", device.value)

    def device_pci_info(self, device: Device) -> PciInfo:
        pci = _PciInfo()
        args = (device.value, ctypes.byref(pci))
        used = self._call_with_fallback("nvmlDeviceGetPciInfo_v3", args, args)
        bus_id = _text(pci.busId)
        if used != "nvmlDeviceGetPciInfo_v3":
            # v2 fills busId in the legacy 4-digit-domain form; rebuild the
            # NVML_DEVICE_PCI_BUS_ID_FMT form so the value does not depend on
            # the driver's age.
            bus_id = "{0:08X}:{1:02X}:{2:02X}.0".format(pci.domain, pci.bus, pci.device)
        return PciInfo(
            bus_id=bus_id,
            bus_id_legacy=_text(pci.busIdLegacy),
            domain=pci.domain,
            bus=pci.bus,
            device=pci.device,
            pci_device_id=pci.pciDeviceId,
            pci_subsystem_id=pci.pciSubSystemId,
        )

    def device_memory(self, device: Device) -> MemoryInfo:
        mem_v2 = _Memory_v2(version=nvmlMemory_v2)
        mem_v1 = _Memory()
        used = self._call_with_fallback(
            "nvmlDeviceGetMemoryInfo_v2",
            (device.value, ctypes.byref(mem_v2)),
            (device.value, ctypes.byref(mem_v1)),
        )
        if used == "nvmlDeviceGetMemoryInfo_v2":
            return MemoryInfo(total=mem_v2.total, free=mem_v2.free, used=mem_v2.used, reserved=mem_v2.reserved)
        return MemoryInfo(total=mem_v1.total, free=mem_v1.free, used=mem_v1.used, reserved=None)

    def device_architecture(self, device: Device) -> int:
        return self._uint("nvmlDeviceGetArchitecture", device.value)

    def device_compute_capability(self, device: Device) -> tuple[int, int]:
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        self._call("nvmlDeviceGetCudaComputeCapability", device.value, ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value

    def device_persistence_mode(self, device: Device) -> bool:
        mode = ctypes.c_int(0)
        self._call("nvmlDeviceGetPersistenceMode", device.value, ctypes.byref(mode))
        return mode.value == NVML_FEATURE_ENABLED

    def device_compute_processes(self, device: Device) -> list[ProcessInfo]:
        name = "nvmlDeviceGetComputeRunningProcesses_v3"
        count = ctypes.c_uint(0)
        ret = self._status(name, device.value, ctypes.byref(count), None)
        # Processes come and go between the sizing call and the real one, so
        # allocate some slack and retry a few times on INSUFFICIENT_SIZE.
        for _attempt in range(5):
            if ret == NVML_SUCCESS and count.value == 0:
                return []
            if ret not in (NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE):
                raise self.error(ret, name)
            size = count.value + 8
            infos = (_ProcessInfo * size)()
            count = ctypes.c_uint(size)
            ret = self._status(name, device.value, ctypes.byref(count), infos)
            if ret == NVML_SUCCESS:
                return [self._process(infos[i]) for i in range(count.value)]
        raise self.error(ret, name)

    @staticmethod
    def _process(info: _ProcessInfo) -> ProcessInfo:
        def instance(value: int) -> int | None:
            return None if value == _INVALID_INSTANCE_ID else value

        used = info.usedGpuMemory
        return ProcessInfo(
            pid=info.pid,
            used_memory=None if used == _VALUE_NOT_AVAILABLE_ULL else used,
            gpu_instance_id=instance(info.gpuInstanceId),
            compute_instance_id=instance(info.computeInstanceId),
        )
